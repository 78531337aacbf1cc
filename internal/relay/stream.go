package relay

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/aside"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
)

// Answer names the answer a sink writes.
type Answer struct {
	ID           string // "chatcmpl-…" or "cmpl-…", the same on every chunk
	Model        string // the model the buyer asked for
	Created      int64  // Unix seconds
	IncludeUsage bool   // stream_options.include_usage
	// ServiceTier is the tier that serves a chat answer, by OpenAI's name (priority, default,
	// flex); "" names none. OpenAI's legacy completions have no such field.
	ServiceTier string
}

// Stream writes a streamed answer as server-sent events: chat.completion.chunk objects for a
// chat request, text_completion objects for a legacy completion; then a usage chunk when
// asked, and "data: [DONE]".
type Stream struct {
	w       http.ResponseWriter
	rc      http.ResponseController
	a       Answer
	chat    bool
	started bool
	prefix  []byte // `data: {"id":…,"choices":[{"index":0,` shared by every chunk
}

// chunks holds the buffers chunks are written from, so that a stream keeps none while it
// waits for its next piece: most of the time, for a slow stream held open.
var chunks = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledChunk bounds the buffers chunks keeps: a rare large chunk (a tool call's
// arguments) is left to the garbage collector.
const maxPooledChunk = 16 << 10

// chunk returns a buffer from the pool, holding the stream's prefix.
func (s *Stream) chunk() *[]byte {
	b := chunks.Get().(*[]byte)
	*b = append((*b)[:0], s.prefix...)
	return b
}

// write writes the buffer b and gives it back to the pool.
func (s *Stream) write(b *[]byte) error {
	_, err := s.w.Write(*b)
	if cap(*b) <= maxPooledChunk {
		*b = (*b)[:0]
		chunks.Put(b)
	}
	return err
}

// The values of a stream's constant headers, shared by every stream: a header map holds a
// slice per key, which Header.Set would make anew each time. None is ever changed in place
// (net/http copies them when it writes the header), and each is full, so an Add copies too.
var (
	eventStream = []string{"text/event-stream"}
	noCache     = []string{"no-cache"}
	no          = []string{"no"}
	costTrailer = []string{HeaderCost}
)

// Open returns the sink of an answer in OpenAI's shape: a chat's or a completion's, streamed
// as server-sent events or collected into one JSON body.
func Open(w http.ResponseWriter, a Answer, chat, stream bool) Sink {
	switch {
	case stream && chat:
		return NewChatStream(w, a)
	case stream:
		return NewCompletionStream(w, a)
	case chat:
		return NewChatCollect(w, a)
	}
	return NewCompletionCollect(w, a)
}

// NewChatStream returns a sink for a streamed chat answer.
func NewChatStream(w http.ResponseWriter, a Answer) *Stream { return newStream(w, a, true) }

// NewCompletionStream returns a sink for a streamed legacy completion.
func NewCompletionStream(w http.ResponseWriter, a Answer) *Stream { return newStream(w, a, false) }

func newStream(w http.ResponseWriter, a Answer, chat bool) *Stream {
	s := &Stream{w: w, rc: *http.NewResponseController(w), a: a, chat: chat}
	object := api.ObjectTextCompletion
	if chat {
		object = api.ObjectChatCompletionChunk
	}
	// Sized for the prefix whole (ids and model names need no escaping, mostly), so that the
	// stream keeps one exact allocation.
	p := make([]byte, 0, len(`data: {"id":,"object":"","created":,"model":,"service_tier":,"choices":[`)+
		len(a.ID)+len(object)+20+len(a.Model)+len(a.ServiceTier)+8)
	p = append(p, `data: {"id":`...)
	p = api.AppendString(p, a.ID)
	p = append(p, `,"object":"`...)
	p = append(p, object...)
	p = append(p, `","created":`...)
	p = strconv.AppendInt(p, a.Created, 10)
	p = append(p, `,"model":`...)
	p = api.AppendString(p, a.Model)
	if chat && a.ServiceTier != "" {
		p = append(p, `,"service_tier":`...)
		p = api.AppendString(p, a.ServiceTier)
	}
	p = append(p, `,"choices":[`...)
	s.prefix = p
	return s
}

func (s *Stream) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h["Content-Type"] = eventStream
	h["Cache-Control"] = noCache
	h["X-Accel-Buffering"] = no
	h["Trailer"] = costTrailer
	s.w.WriteHeader(http.StatusOK)
	if s.chat {
		b := s.chunk()
		*b = append(*b, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		s.write(b)
	}
	// The first flush writes the response's header, deep in net/http: aside, so that the
	// stream's goroutine keeps a small stack for as long as the answer lasts.
	aside.Run(func() { s.rc.Flush() })
}

// Delta writes one chunk.
func (s *Stream) Delta(d *protocol.Delta) error {
	s.start()
	bp := s.chunk()
	b := *bp
	if s.chat {
		b = append(b, `{"index":0,"delta":{`...)
		sep := false
		field := func(name string) {
			if sep {
				b = append(b, ',')
			}
			sep = true
			b = append(b, name...)
		}
		if d.Text != "" {
			field(`"content":`)
			b = api.AppendString(b, d.Text)
		}
		if d.Reasoning != "" {
			field(`"reasoning_content":`)
			b = api.AppendString(b, d.Reasoning)
		}
		if len(d.ToolCalls) > 0 {
			field(`"tool_calls":`)
			b = append(b, d.ToolCalls...)
		}
		b = append(b, `},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	} else {
		b = append(b, `{"text":`...)
		b = api.AppendString(b, d.Text)
		b = append(b, `,"index":0,"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	}
	*bp = b
	return s.write(bp)
}

// End writes the chunk with the finish reason, the usage chunk when asked, and [DONE]. The
// cost also goes in the X-Shareai-Cost trailer.
func (s *Stream) End(finishReason string, u protocol.Usage, cost money.Nanos) error {
	s.start()
	bp := s.chunk()
	b := *bp
	if s.chat {
		b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":`...)
	} else {
		b = append(b, `{"text":"","index":0,"logprobs":null,"finish_reason":`...)
	}
	b = api.AppendString(b, finishReason)
	b = append(b, "}]}\n\n"...)
	if s.a.IncludeUsage {
		b = append(b, s.prefix...)
		b = append(b, `],"usage":`...)
		b = appendUsage(b, u, cost)
		b = append(b, "}\n\n"...)
	}
	b = append(b, "data: [DONE]\n\n"...)
	*bp = b
	err := s.write(bp)
	s.w.Header().Set(HeaderCost, cost.String())
	return err
}

// Fail ends a started stream that cannot be finished: a chunk with finish_reason "error", then
// an error event, and no [DONE], so no client mistakes the answer for a complete one.
func (s *Stream) Fail(cause error) error {
	s.start()
	bp := s.chunk()
	b := *bp
	if s.chat {
		b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"error"}]}`+"\n\n"...)
	} else {
		b = append(b, `{"text":"","index":0,"logprobs":null,"finish_reason":"error"}]}`+"\n\n"...)
	}
	e, _ := json.Marshal(failure(cause, "The answer was cut short: "))
	b = append(b, "data: "...)
	b = append(b, e...)
	b = append(b, "\n\n"...)
	*bp = b
	return s.write(bp)
}

// Flush sends buffered chunks to the buyer.
func (s *Stream) Flush() error { return s.rc.Flush() }

// HeaderCost carries what a request cost the buyer, in USD: a header on a JSON answer, a
// trailer on a stream.
const HeaderCost = "X-Shareai-Cost"

func appendUsage(b []byte, u protocol.Usage, cost money.Nanos) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens+u.CompletionTokens), 10)
	b = append(b, `,"cost":`...)
	b = append(b, cost.String()...)
	return append(b, '}')
}
