// Package relay carries one buyer request's answer from the node to the buyer: it reads the
// job's frames, writes them in the buyer's format (a stream of SSE chunks or one JSON answer),
// and cancels the job when the buyer goes away.
//
// It must not import the store, ledger or gateway.
package relay

import (
	"context"
	"errors"
	"time"

	"github.com/shareai/shareai/internal/fleet"
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

// Outcome of a relayed request.
type Outcome int

const (
	OK        Outcome = iota // the answer was delivered whole
	Cancelled                // the buyer went away; the job was cancelled
	Failed                   // the node failed after the answer started; the buyer was told
	Refused                  // the job ended with an error before anything was written
)

// Biller prices an answer before its end is written: from the node's usage and the bytes of
// answer relayed, it returns the usage to bill and its cost.
type Biller func(u protocol.Usage, delivered int) (protocol.Usage, money.Nanos)

// cancelWait bounds how long a cancelled job's end frame, with the node's usage, is awaited.
const cancelWait = 2 * time.Second

// Result is what happened.
type Result struct {
	Outcome      Outcome
	FinishReason string
	// Usage is the node's: from its end frame, also after a cancel when it came in time.
	Usage protocol.Usage
	// Delivered is the size of the answer written to the buyer: text, reasoning, tool calls.
	Delivered int
	TTFT      time.Duration // from start to the first delta; 0 when none came
	// Err is why the request did not end OK. When Outcome is Refused nothing has been written,
	// and Err is a *protocol.Error the caller turns into an HTTP error.
	Err error
}

// Run relays job to sink until the job ends or ctx (the buyer's request) is done. bill prices
// the answer before its end is written; progress, if not nil, is told the bytes delivered after
// each flush.
func Run(ctx context.Context, job *fleet.Job, sink Sink, start time.Time, bill Biller, progress func(delivered int)) Result {
	var res Result
	started := false
	for {
		fr, err := job.Next(ctx)
		if err != nil {
			return cancel(job, res, err)
		}
		for {
			if fr.Type == protocol.TypeEnd {
				return end(sink, fr.End, res, started, bill)
			}
			if !started {
				started = true
				res.TTFT = time.Since(start)
			}
			if err := sink.Delta(fr.Delta); err != nil {
				return cancel(job, res, err)
			}
			res.Delivered += len(fr.Delta.Text) + len(fr.Delta.Reasoning) + len(fr.Delta.ToolCalls)
			var ok bool
			if fr, ok = job.TryNext(); !ok {
				break
			}
		}
		if err := sink.Flush(); err != nil {
			return cancel(job, res, err)
		}
		if progress != nil {
			progress(res.Delivered)
		}
	}
}

// cancel stops the job because the buyer went away, and waits a little for the node's end
// frame, whose usage bills what was delivered.
func cancel(job *fleet.Job, res Result, cause error) Result {
	job.Cancel()
	res.Outcome, res.Err = Cancelled, cause
	ctx, stop := context.WithTimeout(context.Background(), cancelWait)
	defer stop()
	for {
		fr, err := job.Next(ctx)
		if err != nil {
			return res
		}
		if fr.Type == protocol.TypeEnd {
			res.Usage = fr.End.Usage
			return res
		}
	}
}

func end(sink Sink, e *protocol.End, res Result, started bool, bill Biller) Result {
	res.Usage = e.Usage
	switch {
	case e.Error != nil && !started:
		res.Outcome, res.Err = Refused, e.Error
		return res
	case e.Error != nil:
		res.Outcome, res.Err = Failed, e.Error
		if err := sink.Fail(e.Error); err == nil {
			sink.Flush()
		}
		return res
	case e.FinishReason == protocol.FinishCancelled:
		// Only the coordinator cancels jobs, and it stops reading when it does.
		res.Outcome, res.Err = Failed, errors.New("node cancelled the job")
		return res
	}
	res.FinishReason = e.FinishReason
	u, cost := bill(e.Usage, res.Delivered)
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
