package gateway

import (
	"bytes"

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
func (g *Gateway) fail(c *call, t *try, sink relay.Sink, u *store.Usage, err error) error {
	if werr := sink.Fail(err); werr == nil {
		sink.Flush()
	}
	u.Outcome, u.Error, u.Duration, u.QueueTime = store.OutcomeError, err.Error(), g.cfg.Now().Sub(c.start), t.queued
	parts := t.parts
	if !u.Stream {
		parts = nil
	}
	bill := g.cfg.Ledger.Price(c.id, t.bounds, parts)
	u.PromptTokens, u.CompletionTokens = bill.PromptTokens, bill.CompletionTokens
	t.billed = bill.PromptTokens + bill.CompletionTokens
	g.keepReceipts(c, t, bill, u) // then settles
	return nil
}

// original returns the buyer's request, as it was before any continuation.
func (t *try) original(req *protocol.Request) *protocol.Request {
	if t.first == nil {
		t.first = req
	}
	return t.first
}

// cutShort is the work of a node that failed mid-answer: the usage it reported, or else the
// coordinator's (its prompt as estimated, and the tokens it delivered), never more than the
// coordinator's count of what it delivered. A node that delivered nothing is paid nothing.
func (g *Gateway) cutShort(t *try, st *relay.State, job *fleet.Job, res relay.Result) ledger.Work {
	u := res.Usage
	if res.Delivered == 0 {
		u = protocol.Usage{}
	} else if u.PromptTokens == 0 {
		u.PromptTokens = t.bounds.PromptEstimate
	}
	return g.work(t, st, job, u, res.Pieces, res.Delivered, false)
}
