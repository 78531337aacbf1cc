package gateway

import (
	"net/http"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/core"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/relay"
)

func (g *Gateway) chatCompletions(w http.ResponseWriter, r *http.Request, c *call) error {
	var body api.ChatRequest
	if err := api.Decode(r.Body, &body); err != nil {
		return err
	}
	req, err := body.Job()
	if err != nil {
		return err
	}
	param := "max_tokens"
	if body.MaxCompletionTokens != nil {
		param = "max_completion_tokens"
	}
	if err := g.maxTokensCeiling(req, param); err != nil {
		return err
	}
	return g.serve(w, r, c, req, body.Stream, body.StreamOptions, body.Routing, body.User)
}

func (g *Gateway) completions(w http.ResponseWriter, r *http.Request, c *call) error {
	var body api.CompletionRequest
	if err := api.Decode(r.Body, &body); err != nil {
		return err
	}
	req, err := body.Job()
	if err != nil {
		return err
	}
	if err := g.maxTokensCeiling(req, "max_tokens"); err != nil {
		return err
	}
	return g.serve(w, r, c, req, body.Stream, body.StreamOptions, body.Routing, body.User)
}

// serve runs a validated request through the core, within its key's rate limits (limits.go:
// admitted before the hold, given back when it is billed), and writes its answer: the node
// and queue time headers, then server-sent events or one JSON body.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, c *call, job *protocol.Request, stream bool, opts *api.StreamOptions, rt api.Routing, user string) error {
	includeUsage := opts != nil && opts.IncludeUsage
	if stream && r.ProtoMajor == 1 && r.ProtoMinor >= 1 && c.cancel != nil {
		// Over HTTP/1.1 the stream takes its connection over from net/http (h1stream.go),
		// whose watch for the buyer going away then ends the request's context.
		h1 := g.newH1Stream(w, r, c.cancel)
		w = h1
		defer func() {
			if p := recover(); p != nil {
				h1.abort() // no answer cut short may read as complete
				panic(p)
			}
			h1.finish()
		}()
	}
	req := &core.Request{ID: c.id, Key: c.key, Job: job, Routing: rt, Session: session(r, user), Stream: stream, Start: c.start,
		Answer: func(b core.Begin) relay.Sink {
			w.Header().Set(HeaderNode, b.Node)
			w.Header().Set(HeaderModel, b.Answer.Model)
			w.Header().Set(HeaderQueueTime, b.Queued.Round(time.Millisecond).String())
			b.Answer.IncludeUsage = includeUsage
			return relay.Open(w, b.Answer, job.Kind == protocol.KindChat, stream)
		}}
	if err := g.core.Prepare(req); err != nil {
		return err
	}
	admitted, err := g.limits.admit(w.Header(), c.key, req.Reserve(g.cfg.Ledger))
	if err != nil {
		if ae, ok := err.(*api.Error); ok && ae.Status == http.StatusTooManyRequests {
			g.cfg.Metrics.RateLimited(ae.Type) // requests (per minute, or concurrent) or tokens; not a limiter that is down
		}
		return err
	}
	defer g.cfg.Metrics.RequestStarted(stream)()
	var out *core.Outcome
	defer func() { admitted.done(out.Billed()) }() // out is nil if Serve panicked: nothing billed
	out, err = g.core.Serve(c.ctx, req)
	c.usage = out.Usage
	return err
}
