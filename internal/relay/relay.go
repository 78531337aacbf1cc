// Package relay carries one buyer request's answer from the node to the buyer: it reads the
// job's frames, writes them in the buyer's format (a stream of SSE chunks or one JSON answer),
// and cancels the job when the buyer goes away.
//
// It must not import the store, ledger or gateway.
package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
)

// Sink writes an answer in one of the buyer's formats.
type Sink interface {
	// Delta writes a piece of the answer. The first call starts the response.
	Delta(d *protocol.Delta) error
	// Flush sends what has been written so far.
	Flush() error
	// End finishes a successful answer, with its usage and cost.
	End(finishReason string, u protocol.Usage, cost money.Nanos) error
	// Fail ends an answer that has started but cannot be finished.
	Fail(err error) error
}

// Outcome of a relayed job.
type Outcome int

const (
	OK        Outcome = iota // the answer was delivered whole
	Cancelled                // the buyer went away; the job was cancelled
	// Failed: the node failed (an error, its connection dropped, it stalled) after the answer
	// started. Nothing was written about it: the caller continues the answer on another node,
	// or ends it with Sink.Fail.
	Failed
	// Refused: the job ended with an error (or stalled) before anything was written.
	Refused
)

// Biller prices an answer before its end is written: from the last node's usage, the pieces
// it sent and the bytes of answer it relayed, it returns the usage to bill and its cost.
type Biller func(u protocol.Usage, pieces, delivered int) (protocol.Usage, money.Nanos)

// cancelWait bounds how long a cancelled job's end frame, with the node's usage, is awaited.
const cancelWait = 2 * time.Second

// State is what an answer carries from node to node when one takes over from another.
type State struct {
	Start   time.Time     // when the buyer's request arrived
	Started bool          // something was written to the buyer
	TTFT    time.Duration // from Start to the first piece; 0 when none came
	// Text is the answer's content delivered so far, from which another node continues.
	Text strings.Builder
	// Other is true once the answer carries more than text (tool calls, reasoning): such an
	// answer cannot be continued by another node.
	Other bool
	// Aside is the rest of the answer delivered so far, as text: its reasoning and tool calls
	// (as asideToolCalls writes them), for the coordinator's count of a node's tokens.
	Aside strings.Builder
	calls toolCalls // the tool calls whose start Aside holds
	// Delivered is the size of the answer written in all: text, reasoning, tool calls.
	Delivered int
	// gap is a moving average of the time between pieces, for the stall timeout.
	gap  time.Duration
	last time.Time
}

// toolCalls is a set of tool call indexes, from 0 to maxToolCallIndex: a bit each.
type toolCalls [(maxToolCallIndex + 64) / 64]uint64

func (tc *toolCalls) has(i int) bool { return tc[i/64]&(1<<(i%64)) != 0 }
func (tc *toolCalls) add(i int)      { tc[i/64] |= 1 << (i % 64) }

// A deadline bounds a relay's waits for a job's frames: the stall timeout, or the wait for a
// cancelled job's end. Its timer wakes the job's reader (Frames.Wake), which finds the
// deadline passed; one timer serves every wait of a job, armed again at each, so that a
// stream waiting for its next piece keeps no context, channel or timer of a wait.
type deadline struct {
	timer *time.Timer // nil until armed
	at    time.Time
}

// arm sets the deadline d from now, waking job then.
func (dl *deadline) arm(job Frames, d time.Duration) {
	dl.at = time.Now().Add(d)
	if dl.timer == nil {
		dl.timer = time.AfterFunc(d, job.Wake)
	} else {
		dl.timer.Reset(d)
	}
}

// stop stops the deadline's timer.
func (dl *deadline) stop() {
	if dl.timer != nil {
		dl.timer.Stop()
	}
}

// passed says whether the deadline is armed and has passed.
func (dl *deadline) passed() bool { return dl.timer != nil && !time.Now().Before(dl.at) }

// Options tune Run.
type Options struct {
	Bill Biller
	// Progress, if not nil, is told after each flush the bytes delivered in all, and the
	// pieces (about a token each, as the node says) the job's node has delivered.
	Progress func(delivered, pieces int)
	// StallCeiling bounds how long a node may be silent: before its first piece, and as the
	// most the adaptive timeout between pieces (ten times the pieces' usual gap, at least a
	// second) may grow to. Zero: no stall detection.
	StallCeiling time.Duration
}

// Result is what happened to one job.
type Result struct {
	Outcome      Outcome
	FinishReason string
	// Usage is the node's: from its end frame, also after a cancel when it came in time.
	Usage protocol.Usage
	// Delivered is the size of the answer this job's node delivered, and Pieces how many of
	// its engine's pieces (about a token each) that was.
	Delivered int
	Pieces    int
	// Err is why the job did not end OK. When Outcome is Refused nothing has been written,
	// and Err is a *protocol.Error the caller turns into an HTTP error, or the stall.
	Err error
}

// ErrStalled is a node silent for longer than its stall timeout.
var ErrStalled = errors.New("node stalled")

// Frames is a job's answer as the relay reads it: the frames from its node, deltas then one
// end, and the way to stop it. fleet.Job is the local one; a job whose frames come from
// another process is another.
type Frames interface {
	// TryNext returns the next frame if one is ready.
	TryNext() (protocol.Frame, bool)
	// Ready receives a value when a frame may have come since TryNext last found none, or
	// Wake was called: the relay waits on it and on the buyer's context, rather than in a
	// call of its own, so that a stream held open costs no context or timer per wait.
	Ready() <-chan struct{}
	// Wake makes Ready receive, as a frame would: the relay's timer wakes it at a deadline.
	Wake()
	// Cancel asks the node to stop; its end frame follows.
	Cancel()
	// Preempted reports whether the coordinator stopped the job to free its slot for a gold
	// request: its cancelled end is then ErrPreempted, not the node's failure.
	Preempted() bool
}

// ErrPreempted ends a bronze job the coordinator stopped to free its slot for a gold one.
var ErrPreempted = errors.New("preempted by a gold request")

// Run relays job to sink until the job ends or ctx (the buyer's request) is done. st carries
// the answer's state from job to job.
//
// Its frame, and wait's, are all that the relay keeps on the stack of a stream waiting for its
// next piece (deliver does the rest): the garbage collector paces itself by the stack it scans
// as by the heap, so every byte here costs every open stream about two.
func Run(ctx context.Context, job Frames, sink Sink, st *State, opts Options) Result {
	var (
		res     Result
		dl      deadline
		waiting bool // for a frame since the last: the stall deadline is armed
	)
	defer dl.stop()
	for {
		switch deliver(job, sink, st, &res, &dl, &opts) {
		case ended:
			return res
		case delivered:
			waiting = false
			continue
		}
		if !waiting && opts.StallCeiling > 0 {
			dl.arm(job, stallTimeout(st, res.Delivered > 0, opts.StallCeiling))
		}
		waiting = true
		switch {
		case dl.passed() && ctx.Err() == nil:
			job.Cancel()
			res.Outcome, res.Err = Failed, ErrStalled
			if !st.Started {
				res.Outcome = Refused
			}
			return res
		case dl.passed() || !wait(ctx, job):
			cancel(job, &res, &dl, ctx.Err())
			return res
		}
	}
}

// What deliver did.
const (
	none      = iota // no frame was ready
	delivered        // it wrote the frames that were ready, and flushed them
	ended            // the job ended: res is its result
)

// deliver writes the job's frames that are ready, if any, then flushes them, and says what it
// did.
func deliver(job Frames, sink Sink, st *State, res *Result, dl *deadline, opts *Options) int {
	fr, ok := job.TryNext()
	if !ok {
		return none
	}
	for {
		if fr.Type == protocol.TypeEnd {
			*res = end(sink, fr.End, *res, st, opts.Bill, job.Preempted())
			return ended
		}
		d := fr.Delta
		if err := st.aside(d); err != nil {
			// The node's fault, not the buyer's: it failed (refused, before the answer
			// started).
			job.Cancel()
			res.Outcome, res.Err = Failed, err
			if !st.Started {
				res.Outcome = Refused
			}
			return ended
		}
		now := time.Now()
		if !st.Started {
			st.Started = true
			st.TTFT = now.Sub(st.Start)
		} else if gap := now.Sub(st.last); st.gap == 0 {
			st.gap = gap
		} else {
			st.gap += (gap - st.gap) / 5
		}
		st.last = now
		if err := sink.Delta(d); err != nil {
			cancel(job, res, dl, err)
			return ended
		}
		st.Text.WriteString(d.Text)
		n := len(d.Text) + len(d.Reasoning) + len(d.ToolCalls)
		res.Delivered += n
		res.Pieces += d.Pieces
		st.Delivered += n
		if fr, ok = job.TryNext(); !ok {
			break
		}
	}
	if err := sink.Flush(); err != nil {
		cancel(job, res, dl, err)
		return ended
	}
	if opts.Progress != nil {
		opts.Progress(st.Delivered, res.Pieces)
	}
	return delivered
}

// ErrBadToolCalls is a node's delta whose tool calls are not OpenAI's: an array of deltas,
// each with an index from 0 to maxToolCallIndex.
var ErrBadToolCalls = errors.New("node sent malformed tool calls")

// maxToolCallIndex bounds the index of a tool call in an answer.
const maxToolCallIndex = 128

// aside records what a delta carries beyond text (State.Other, State.Aside), and checks its
// tool calls: the buyer's SDK reads them as they are.
func (st *State) aside(d *protocol.Delta) error {
	if d.Reasoning == "" && len(d.ToolCalls) == 0 {
		return nil
	}
	var tcs []toolCallDelta
	if len(d.ToolCalls) > 0 {
		if err := json.Unmarshal(d.ToolCalls, &tcs); err != nil {
			return fmt.Errorf("%w: %v", ErrBadToolCalls, err)
		}
		for _, tc := range tcs {
			if tc.Index < 0 || tc.Index > maxToolCallIndex {
				return fmt.Errorf("%w: index %d", ErrBadToolCalls, tc.Index)
			}
		}
	}
	st.Other = true
	st.Aside.WriteString(d.Reasoning)
	for _, tc := range tcs {
		st.asideToolCall(tc)
	}
	return nil
}

// asideToolCall writes what a model generated of a tool call delta, for the count of its
// tokens: the function's name and arguments, and once a call the JSON a model writes around
// them, but not the JSON of the deltas (which each streamed fragment repeats).
func (st *State) asideToolCall(tc toolCallDelta) {
	if tc.Function.Name != "" && !st.calls.has(tc.Index) {
		st.calls.add(tc.Index)
		st.Aside.WriteString(`{"name": "`)
		st.Aside.WriteString(tc.Function.Name)
		st.Aside.WriteString(`", "arguments": `)
	}
	st.Aside.WriteString(tc.Function.Arguments)
}

// stallTimeout is how long a job may be silent: the ceiling until its first piece (a node
// taking over an answer has its own time to first token), then ten times the answer's usual
// gap between pieces, at least a second.
func stallTimeout(st *State, flowing bool, ceiling time.Duration) time.Duration {
	if flowing && st.gap > 0 {
		return min(max(10*st.gap, time.Second), ceiling)
	}
	return ceiling
}

// wait waits until the job may have a frame (true), or ctx is done (false).
func wait(ctx context.Context, job Frames) bool {
	select {
	case <-job.Ready():
		return true
	case <-ctx.Done():
		return false
	}
}

// cancel stops the job because the buyer went away (cause), and waits a little for the node's
// end frame, whose usage bills what was delivered.
func cancel(job Frames, res *Result, dl *deadline, cause error) {
	job.Cancel()
	res.Outcome, res.Err = Cancelled, cause
	dl.arm(job, cancelWait)
	for {
		fr, ok := job.TryNext()
		switch {
		case ok && fr.Type == protocol.TypeEnd:
			res.Usage = fr.End.Usage
			return
		case ok:
		case dl.passed():
			return
		default:
			wait(context.Background(), job)
		}
	}
}

func end(sink Sink, e *protocol.End, res Result, st *State, bill Biller, preempted bool) Result {
	res.Usage = e.Usage
	switch {
	case e.Error != nil && !st.Started:
		res.Outcome, res.Err = Refused, e.Error
		return res
	case e.Error != nil:
		res.Outcome, res.Err = Failed, e.Error
		return res
	case e.FinishReason == protocol.FinishCancelled:
		// Only the coordinator cancels jobs, and it stops reading when it does, unless it
		// preempted the job: a node that says so on its own failed (before the answer
		// started: refused).
		res.Outcome, res.Err = Failed, errors.New("node cancelled the job")
		if preempted {
			res.Err = ErrPreempted
		}
		if !st.Started {
			res.Outcome = Refused
		}
		return res
	}
	res.FinishReason = e.FinishReason
	u, cost := bill(e.Usage, res.Pieces, res.Delivered)
	if err := sink.End(e.FinishReason, u, cost); err != nil {
		res.Outcome, res.Err = Cancelled, err
		return res
	}
	if err := sink.Flush(); err != nil {
		res.Outcome, res.Err = Cancelled, err
		return res
	}
	res.Outcome = OK
	return res
}
