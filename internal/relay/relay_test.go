package relay_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/relay"
)

// frames is a fake job: the frames queued on it, then silence; a cancel ends it with a
// cancelled end, as an agent does.
type frames struct {
	mu        sync.Mutex
	queue     []protocol.Frame
	ready     chan struct{}
	cancelled bool
	preempted bool
}

func newFrames(fs ...protocol.Frame) *frames {
	f := &frames{ready: make(chan struct{}, 1)}
	f.push(fs...)
	return f
}

func (f *frames) push(fs ...protocol.Frame) {
	f.mu.Lock()
	f.queue = append(f.queue, fs...)
	f.mu.Unlock()
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

func (f *frames) TryNext() (protocol.Frame, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queue) == 0 {
		return protocol.Frame{}, false
	}
	fr := f.queue[0]
	f.queue = f.queue[1:]
	return fr, true
}

func (f *frames) Ready() <-chan struct{} { return f.ready }

func (f *frames) Wake() {
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

func (f *frames) Cancel() {
	f.mu.Lock()
	already := f.cancelled
	f.cancelled = true
	f.mu.Unlock()
	if !already {
		f.push(end(protocol.FinishCancelled, 0))
	}
}

func (f *frames) Preempted() bool { return f.preempted }

func delta(text string) protocol.Frame {
	return protocol.Frame{Type: protocol.TypeDelta, Delta: &protocol.Delta{Text: text, Pieces: 1}}
}

func end(reason string, completion int) protocol.Frame {
	return protocol.Frame{Type: protocol.TypeEnd, End: &protocol.End{FinishReason: reason, Usage: protocol.Usage{PromptTokens: 3, CompletionTokens: completion}}}
}

// bill prices every answer at 1 nano-dollar a token, as the node claims them.
func bill(u protocol.Usage, _, _ int) (protocol.Usage, money.Nanos) {
	return u, money.Nanos(u.PromptTokens + u.CompletionTokens)
}

func chatStream(w *httptest.ResponseRecorder) relay.Sink {
	return relay.NewChatStream(w, relay.Answer{ID: "chatcmpl-1", Model: "m", Created: 7, IncludeUsage: true, ServiceTier: "flex"})
}

// A whole answer is written as OpenAI's chat chunks: one per flush of deltas, the finish
// chunk, the usage chunk asked for, and [DONE].
func TestRun_ChatStreamFraming(t *testing.T) {
	w := httptest.NewRecorder()
	st := &relay.State{Start: time.Now()}
	res := relay.Run(context.Background(), newFrames(delta("Hel"), delta("lo"), end("stop", 2)), chatStream(w), st, relay.Options{Bill: bill})
	if res.Outcome != relay.OK || res.FinishReason != "stop" || res.Delivered != 5 || res.Pieces != 2 {
		t.Fatalf("result %+v; want OK, stop, 5 bytes in 2 pieces", res)
	}
	if st.Text.String() != "Hello" || !st.Started || st.TTFT <= 0 {
		t.Errorf("state: text %q, started %v, ttft %v", st.Text.String(), st.Started, st.TTFT)
	}
	body := w.Body.String()
	prefix := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","service_tier":"flex","choices":[`
	events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	if len(events) < 4 || events[len(events)-1] != "data: [DONE]" {
		t.Fatalf("events %q; want chunks, the usage chunk and [DONE]", events)
	}
	for _, e := range events[:len(events)-1] {
		if !strings.HasPrefix(e, prefix) {
			t.Errorf("chunk %q does not start %q", e, prefix)
		}
	}
	if !strings.Contains(body, `"content":"Hel"`) || !strings.Contains(body, `"content":"lo"`) || !strings.Contains(body, `"finish_reason":"stop"`) {
		t.Errorf("body misses a piece or the finish: %s", body)
	}
	if u := events[len(events)-2]; !strings.Contains(u, `"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5`) || !strings.Contains(u, `"choices":[]`) {
		t.Errorf("usage chunk %q", u)
	}
	if w.Header().Get("Content-Type") != "text/event-stream" {
		t.Errorf("content type %q", w.Header().Get("Content-Type"))
	}
}

// A node silent past the stall ceiling before its first piece is refused (nothing was
// written: another node may start afresh), and cancelled; after a first piece it failed.
func TestRun_Stalls(t *testing.T) {
	for _, started := range []bool{false, true} {
		f := newFrames()
		if started {
			f.push(delta("a"))
		}
		w := httptest.NewRecorder()
		res := relay.Run(context.Background(), f, chatStream(w), &relay.State{Start: time.Now()}, relay.Options{Bill: bill, StallCeiling: 50 * time.Millisecond})
		want := relay.Refused
		if started {
			want = relay.Failed
		}
		if res.Outcome != want || !errors.Is(res.Err, relay.ErrStalled) || !f.cancelled {
			t.Errorf("started %v: %v, %v, cancelled %v; want %v, ErrStalled, cancelled", started, res.Outcome, res.Err, f.cancelled, want)
		}
		if !started && w.Body.Len() > 0 {
			t.Errorf("a refused job wrote %q", w.Body.String())
		}
	}
}

// The state carries one answer across jobs: a node that fails mid-answer leaves its text for
// the next, whose pieces continue it in the same stream, which ends once.
func TestRun_FailoverState(t *testing.T) {
	w := httptest.NewRecorder()
	sink, st := chatStream(w), &relay.State{Start: time.Now()}
	first := newFrames(delta("Once "), protocol.Frame{Type: protocol.TypeEnd, End: &protocol.End{Error: &protocol.Error{Message: "node gone"}}})
	res := relay.Run(context.Background(), first, sink, st, relay.Options{Bill: bill})
	if res.Outcome != relay.Failed || st.Text.String() != "Once " || res.Delivered != 5 {
		t.Fatalf("first job: %+v, text %q; want Failed after 5 bytes", res, st.Text.String())
	}
	res = relay.Run(context.Background(), newFrames(delta("upon"), end("stop", 1)), sink, st, relay.Options{Bill: bill})
	if res.Outcome != relay.OK || st.Text.String() != "Once upon" || st.Delivered != 9 || res.Delivered != 4 {
		t.Fatalf("second job: %+v, text %q, delivered %d", res, st.Text.String(), st.Delivered)
	}
	if n := strings.Count(w.Body.String(), "data: [DONE]"); n != 1 {
		t.Errorf("[DONE] %d times; want once", n)
	}
}

// A preempted job's cancelled end is ErrPreempted; a node that cancels on its own failed.
func TestRun_PreemptedAndCancelledEnds(t *testing.T) {
	for _, preempted := range []bool{false, true} {
		f := newFrames(delta("x"), end(protocol.FinishCancelled, 1))
		f.preempted = preempted
		res := relay.Run(context.Background(), f, chatStream(httptest.NewRecorder()), &relay.State{Start: time.Now()}, relay.Options{Bill: bill})
		if res.Outcome != relay.Failed || errors.Is(res.Err, relay.ErrPreempted) != preempted {
			t.Errorf("preempted %v: %v, %v", preempted, res.Outcome, res.Err)
		}
	}
	// Before the answer started: refused, so that it starts afresh elsewhere.
	f := newFrames(end(protocol.FinishCancelled, 0))
	f.preempted = true
	if res := relay.Run(context.Background(), f, chatStream(httptest.NewRecorder()), &relay.State{Start: time.Now()}, relay.Options{Bill: bill}); res.Outcome != relay.Refused || !errors.Is(res.Err, relay.ErrPreempted) {
		t.Errorf("preempted before the first piece: %v, %v; want Refused, ErrPreempted", res.Outcome, res.Err)
	}
}

// The buyer going away cancels the job and takes the node's usage from its end, to bill what
// was delivered.
func TestRun_BuyerGone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := newFrames(delta("partial"))
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	res := relay.Run(ctx, f, chatStream(httptest.NewRecorder()), &relay.State{Start: time.Now()}, relay.Options{Bill: bill})
	if res.Outcome != relay.Cancelled || !f.cancelled || res.Delivered != 7 {
		t.Errorf("result %+v, cancelled %v; want Cancelled after 7 bytes, the job cancelled", res, f.cancelled)
	}
}
