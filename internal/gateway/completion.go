package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/store"
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
	return g.serve(w, r, c, req, body.Stream, body.StreamOptions)
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
	return g.serve(w, r, c, req, body.Stream, body.StreamOptions)
}

// maxDispatchAttempts bounds how many nodes a request is offered to when nodes vanish between
// being picked and receiving the job.
const maxDispatchAttempts = 3

// serve runs a validated request on a node and relays the answer.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, c *call, req *protocol.Request, stream bool, opts *api.StreamOptions) error {
	job, err := g.dispatch(req)
	if err != nil {
		return err
	}
	w.Header().Set(HeaderNode, job.Offer.Node.ID)

	a := relay.Answer{Model: req.Model, Created: c.start.Unix(), IncludeUsage: opts != nil && opts.IncludeUsage}
	chat := req.Kind == protocol.KindChat
	suffix := strings.TrimPrefix(c.id, "req_")
	if chat {
		a.ID = "chatcmpl-" + suffix
	} else {
		a.ID = "cmpl-" + suffix
	}
	var sink relay.Sink
	switch {
	case stream && chat:
		sink = relay.NewChatStream(w, a)
	case stream:
		sink = relay.NewCompletionStream(w, a)
	case chat:
		sink = relay.NewChatCollect(w, a)
	default:
		sink = relay.NewCompletionCollect(w, a)
	}
	res := relay.Run(r.Context(), job, sink, c.start)

	u := &store.Usage{
		RequestID: c.id, AccountID: c.key.AccountID, KeyID: c.key.ID, Model: req.Model,
		NodeID: job.Offer.Node.ID, Endpoint: req.Kind, Stream: stream,
		PromptTokens: res.Usage.PromptTokens, CompletionTokens: res.Usage.CompletionTokens,
		TTFT: res.TTFT, Duration: g.cfg.Now().Sub(c.start), CreatedAt: c.start,
	}
	var reqErr error
	switch res.Outcome {
	case relay.OK:
		u.Outcome = store.OutcomeOK
	case relay.Cancelled:
		u.Outcome, u.Error = store.OutcomeCancelled, "buyer disconnected"
	case relay.Failed:
		u.Outcome, u.Error = store.OutcomeError, res.Err.Error()
	case relay.Refused:
		u.Outcome, u.Error = store.OutcomeError, res.Err.Error()
		reqErr = refusal(job, res.Err)
		var ae *api.Error
		if errors.As(reqErr, &ae) && ae.Status == http.StatusBadRequest {
			u.Outcome = store.OutcomeRejected
		}
	}
	g.usage.add(u)
	if res.Outcome != relay.OK {
		g.log.Debug("request ended early", logRequestID, c.id, logNode, job.Offer.Node.ID, "outcome", u.Outcome, "err", res.Err)
	}
	return reqErr
}

// dispatch picks a node and sends it the job.
func (g *Gateway) dispatch(req *protocol.Request) (*fleet.Job, error) {
	var lastErr error
	for range maxDispatchAttempts {
		offers := g.cfg.Fleet.Offers(req.Model)
		if len(offers) == 0 {
			if lastErr != nil {
				break
			}
			return nil, &api.Error{Status: http.StatusNotFound, Type: api.TypeInvalidRequest, Param: "model", Code: api.CodeModelNotFound,
				Message: fmt.Sprintf("The model '%s' does not exist or no node serves it now. GET /v1/models lists the models served on the network.", req.Model)}
		}
		offer, np := matcher.Pick(req.Model, offers)
		if np != nil {
			return nil, &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: api.CodeNoProviderAvailable,
				Message: fmt.Sprintf("No node can take this request now (%s). Retry shortly.", np)}
		}
		job, err := g.cfg.Fleet.Dispatch(offer, req)
		if err == nil {
			return job, nil
		}
		lastErr = err
	}
	return nil, &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: api.CodeNoProviderAvailable,
		Message: fmt.Sprintf("No node could take this request: %v. Retry shortly.", lastErr)}
}

// refusal turns a job's failure before its first token into the buyer's error.
func refusal(job *fleet.Job, err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Status >= 400 && pe.Status < 500 && pe.Status != http.StatusNotFound && pe.Status != http.StatusTooManyRequests {
		status := http.StatusBadRequest
		if pe.Status == http.StatusRequestEntityTooLarge {
			status = pe.Status
		}
		return &api.Error{Status: status, Type: api.TypeInvalidRequest, Code: "rejected_by_engine",
			Message: "The node's inference engine rejected the request: " + pe.Message}
	}
	return &api.Error{Status: http.StatusBadGateway, Type: api.TypeServer, Code: api.CodeProviderError,
		Message: fmt.Sprintf("Node %s failed before answering: %v.", job.Offer.Node.ID, err)}
}
