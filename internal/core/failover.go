package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/store"
)

// continuable says why an answer that has started cannot be continued on another node, or "".
func continuable(req *protocol.Request, st *relay.State) string {
	switch {
	case st.Other:
		return "an answer with tool calls or reasoning is not continued as text"
	case req.Kind == protocol.KindChat && len(req.Messages) == 0:
		return "the request has no messages"
	}
	return ""
}

// continuation is the job that continues req's answer from text: the chat with the answer so
// far as a trailing assistant message (which engines that continue extend), or the completion
// with the text as its partial answer.
func continuation(req *protocol.Request, text string) *protocol.Request {
	c := *req
	c.Continue = true
	if req.Kind == protocol.KindChat {
		msgs := bytes.TrimRight(req.Messages, " \t\r\n")
		b := make([]byte, 0, len(msgs)+len(text)+48)
		b = append(b, msgs[:len(msgs)-1]...)
		b = append(b, `,{"role":"assistant","content":`...)
		b = api.AppendString(b, text)
		b = append(b, "}]"...)
		c.Messages = b
	} else {
		c.Partial = text
	}
	// max_tokens stays: in a continuation it counts the whole answer, and the engine, which
	// counts tokens, knows how many the partial answer holds.
	return &c
}

// fail ends an answer that started but cannot be finished, and bills what was delivered: a
// stream's text so far; nothing of an answer not streamed, whose buyer gets only the error
// (the nodes that failed it are not paid either).
func (c *Core) fail(ctx context.Context, r *Request, sink relay.Sink, err error) error {
	u := r.usage
	if werr := sink.Fail(err); werr == nil {
		sink.Flush()
	}
	u.Outcome, u.Error, u.Duration, u.QueueTime = store.OutcomeError, err.Error(), c.cfg.Now().Sub(r.Start), r.queued
	parts := r.parts
	if !u.Stream {
		parts = nil
	}
	bill := c.price(r, parts)
	u.PromptTokens, u.CompletionTokens = bill.PromptTokens, bill.CompletionTokens
	c.keepReceipts(ctx, r, bill) // then settles
	return nil
}

// original returns the buyer's request, as it was before any continuation.
func (r *Request) original(req *protocol.Request) *protocol.Request {
	if r.first == nil {
		r.first = req
	}
	return r.first
}

// cutShort is the work of a node that failed mid-answer: the usage it reported, or else the
// coordinator's (its prompt as estimated, and the tokens it delivered), never more than the
// coordinator's count of what it delivered. A node that delivered nothing is paid nothing.
func (c *Core) cutShort(r *Request, st *relay.State, job *fleet.Job, res relay.Result) ledger.Work {
	u := res.Usage
	if res.Delivered == 0 {
		u = protocol.Usage{}
	} else if u.PromptTokens == 0 {
		u.PromptTokens = r.bounds.PromptEstimate
	}
	return c.work(r, st, job, u, res.Pieces, res.Delivered, false)
}

// nodeError is a node's failure as a buyer may read it, with its cause for the log: of the
// node's engine only its status is told (shown), never its words.
type nodeError struct {
	msg   string
	cause error
}

func (e *nodeError) Error() string { return e.msg }
func (e *nodeError) Unwrap() error { return e.cause }

// nodeFailure is the failure of node, as what it did ("failed before answering"), and why.
func nodeFailure(node, what string, err error) error {
	return &nodeError{msg: fmt.Sprintf("node %s %s: %s", node, what, shown(err)), cause: err}
}

// shown is what a buyer is told of a node's failure: the coordinator's own errors (a node
// gone, a stall, a preemption) as they are; of an error the node reported, only its engine's
// status. A node's own words are a stranger's machine's: a stack trace, "CUDA out of memory",
// a path. They are logged and kept in the usage record, for the provider.
func shown(err error) string {
	if err == nil {
		return "no reason given"
	}
	if pe, ok := errors.AsType[*protocol.Error](err); ok {
		if pe.Status > 0 {
			return fmt.Sprintf("its engine failed with status %d", pe.Status)
		}
		return "the node reported an error"
	}
	if ne, ok := errors.AsType[*nodeError](err); ok {
		return ne.msg
	}
	return err.Error()
}

// nodeSaidEvery is how often a node's own error words are recorded for its provider, at most.
const nodeSaidEvery = time.Minute

// nodeSaid records the words of a node's error (its engine's, as it reported them) where its
// provider reads them: an event of the node (store.EventEngineError, GET
// /v1/provider/nodes/{id}), at most one a minute a node, and the log. The buyer is told only
// what shown says.
func (c *Core) nodeSaid(ctx context.Context, r *Request, n *fleet.Node, err error) {
	pe, ok := errors.AsType[*protocol.Error](err)
	if !ok || pe.Message == "" {
		return
	}
	c.log.Warn("node reported an error", logRequestID, r.ID, logNode, n.ID, "status", pe.Status, "said", pe.Message)
	now := c.cfg.Now()
	c.said.mu.Lock()
	if c.said.m == nil || len(c.said.m) > 100_000 {
		c.said.m = make(map[string]time.Time)
	}
	last, seen := c.said.m[n.ID]
	if seen && now.Sub(last) < nodeSaidEvery {
		c.said.mu.Unlock()
		return
	}
	c.said.m[n.ID] = now
	c.said.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	e := &store.NodeEvent{NodeID: n.ID, At: now, Kind: store.EventEngineError,
		Detail: fmt.Sprintf("request %s, on %s: %s", r.ID, r.Job.Model, protocol.Clip(pe.Message, maxSaid))}
	if pe.Status > 0 {
		e.Detail = fmt.Sprintf("request %s, on %s: status %d: %s", r.ID, r.Job.Model, pe.Status, protocol.Clip(pe.Message, maxSaid))
	}
	if err := c.cfg.Store.AddNodeEvent(ctx, e); err != nil {
		c.log.Warn("record a node's error", logNode, n.ID, "err", err)
	}
}

// maxSaid bounds the bytes of a node's words an event keeps.
const maxSaid = 512

// said is when each node's words were last recorded (nodeSaid).
type said struct {
	mu sync.Mutex
	m  map[string]time.Time
}
