package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/money"
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

// checkpointEvery is how often a running request's delivered bill is checkpointed.
const checkpointEvery = 2 * time.Second

// maxDispatchAttempts bounds how many nodes a request is offered to when nodes vanish between
// being picked and receiving the job.
const maxDispatchAttempts = 3

// serve runs a validated request on a node, relays the answer and bills it.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, c *call, req *protocol.Request, stream bool, opts *api.StreamOptions) error {
	promptBytes := len(req.Messages) + len(req.Prompt)
	bounds := ledger.Bounds{PromptTokens: ledger.PromptBound(promptBytes), PromptEstimate: ledger.EstimateTokens(promptBytes)}
	job, ask, err := g.dispatch(r.Context(), c, req, &bounds)
	if err != nil {
		return err
	}
	node := job.Offer.Node
	w.Header().Set(HeaderNode, node.ID)

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
	work := func(u protocol.Usage, delivered int) ledger.Work {
		return ledger.Work{NodeID: node.ID, ProviderID: node.AccountID, Ask: ask,
			PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, DeliveredBytes: delivered}
	}
	var bill *ledger.Bill
	price := func(u protocol.Usage, delivered int) (protocol.Usage, money.Nanos) {
		bill = g.cfg.Ledger.Price(c.id, bounds, []ledger.Work{work(u, delivered)})
		return protocol.Usage{PromptTokens: bill.PromptTokens, CompletionTokens: bill.CompletionTokens}, bill.Cost()
	}
	u := &store.Usage{
		RequestID: c.id, AccountID: c.key.AccountID, KeyID: c.key.ID, Model: req.Model,
		NodeID: node.ID, Region: node.Region, Endpoint: req.Kind, Stream: stream, CreatedAt: c.start,
	}
	// During a long answer, the bill of what was delivered so far is checkpointed, so that a
	// crash is followed by a settlement of that rather than by nothing.
	lastCheckpoint := c.start
	progress := func(delivered int) {
		now := g.cfg.Now()
		if now.Sub(lastCheckpoint) < checkpointEvery {
			return
		}
		lastCheckpoint = now
		soFar := g.cfg.Ledger.Price(c.id, bounds, []ledger.Work{work(protocol.Usage{
			PromptTokens: bounds.PromptEstimate, CompletionTokens: ledger.EstimateTokens(delivered)}, delivered)})
		if err := g.cfg.Ledger.Checkpoint(r.Context(), soFar, u); err != nil && r.Context().Err() == nil {
			g.log.Warn("checkpoint request", logRequestID, c.id, "err", err)
		}
	}
	res := relay.Run(r.Context(), job, sink, c.start, price, progress)

	u.FinishReason, u.TTFT, u.Duration = res.FinishReason, res.TTFT, g.cfg.Now().Sub(c.start)
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
	if bill == nil && res.Outcome != relay.Refused {
		// Cut short: the buyer pays for what was delivered. A node stopped before it reported
		// usage read the prompt all the same: bill the coordinator's estimate of it.
		used := res.Usage
		if used.PromptTokens == 0 {
			used.PromptTokens = bounds.PromptEstimate
		}
		bill = g.cfg.Ledger.Price(c.id, bounds, []ledger.Work{work(used, res.Delivered)})
	}
	if bill == nil {
		bill = g.cfg.Ledger.Price(c.id, bounds, nil) // refused before anything was delivered: nothing to pay
	}
	if len(bill.Clamped) > 0 {
		g.log.Warn("node claimed more tokens than it delivered; billed the coordinator's estimate", logRequestID, c.id, logNode, node.ID,
			"claimed_prompt", res.Usage.PromptTokens, "claimed_completion", res.Usage.CompletionTokens,
			"billed_prompt", bill.PromptTokens, "billed_completion", bill.CompletionTokens)
	}
	u.PromptTokens, u.CompletionTokens = bill.PromptTokens, bill.CompletionTokens
	g.cfg.Ledger.SettleLater(bill, u)
	if res.Outcome != relay.OK {
		g.log.Debug("request ended early", logRequestID, c.id, logNode, node.ID, "outcome", u.Outcome, "err", res.Err)
	}
	return reqErr
}

// dispatch picks a node, holds the most the request can cost there, and sends it the job.
func (g *Gateway) dispatch(ctx context.Context, c *call, req *protocol.Request, bounds *ledger.Bounds) (*fleet.Job, ledger.Ask, error) {
	var (
		lastErr error
		held    money.Nanos // once held, only nodes within the hold are tried
	)
	for range maxDispatchAttempts {
		offers := g.cfg.Fleet.Offers(req.Model)
		if len(offers) == 0 && lastErr == nil {
			return nil, ledger.Ask{}, &api.Error{Status: http.StatusNotFound, Type: api.TypeInvalidRequest, Param: "model", Code: api.CodeModelNotFound,
				Message: fmt.Sprintf("The model '%s' does not exist or no node serves it now. GET /v1/models lists the models served on the network.", req.Model)}
		}
		if held > 0 {
			offers = slices.DeleteFunc(offers, func(o *fleet.Offer) bool { return g.maxCost(o, req, *bounds) > held })
		}
		offer, np := matcher.Pick(req.Model, offers)
		if np != nil {
			if lastErr != nil {
				break
			}
			return nil, ledger.Ask{}, &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: api.CodeNoProviderAvailable,
				Message: fmt.Sprintf("No node can take this request now (%s). Retry shortly.", np)}
		}
		if held == 0 {
			bounds.CompletionTokens = g.cfg.Ledger.CompletionBound(req.MaxTokens, offer.ContextLength)
			amount := g.maxCost(offer, req, *bounds)
			if err := g.cfg.Ledger.Hold(ctx, c.id, c.key, amount); err != nil {
				offer.Release()
				return nil, ledger.Ask{}, holdError(err)
			}
			held = max(amount, 1)
		}
		job, err := g.cfg.Fleet.Dispatch(offer, req)
		if err == nil {
			return job, askOf(offer), nil
		}
		lastErr = err
	}
	if held > 0 {
		u := &store.Usage{RequestID: c.id, AccountID: c.key.AccountID, KeyID: c.key.ID, Model: req.Model, Endpoint: req.Kind,
			Outcome: store.OutcomeError, Error: "no node could take the request", CreatedAt: c.start}
		if err := g.cfg.Ledger.Void(context.WithoutCancel(ctx), c.id, u); err != nil {
			g.log.Error("void hold", logRequestID, c.id, "err", err)
		}
	}
	return nil, ledger.Ask{}, &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: api.CodeNoProviderAvailable,
		Message: fmt.Sprintf("No node could take this request: %v. Retry shortly.", lastErr)}
}

func askOf(o *fleet.Offer) ledger.Ask {
	return ledger.Ask{Input: money.Price(o.InputPrice), Output: money.Price(o.OutputPrice)}
}

func (g *Gateway) maxCost(o *fleet.Offer, req *protocol.Request, b ledger.Bounds) money.Nanos {
	b.CompletionTokens = g.cfg.Ledger.CompletionBound(req.MaxTokens, o.ContextLength)
	return g.cfg.Ledger.MaxCost(askOf(o), b)
}

// holdError turns a refused hold into the buyer's 402.
func holdError(err error) error {
	le, ok := errors.AsType[*store.LimitError](err)
	if !ok {
		return fmt.Errorf("hold: %w", err)
	}
	if le.Cap == nil {
		return &api.Error{Status: http.StatusPaymentRequired, Type: api.TypeInsufficientQuota, Code: api.CodeInsufficientCredits,
			Message: fmt.Sprintf("Insufficient credits: $%s available, and this request may cost up to $%s. Add credits, or lower max_tokens.", le.Available, le.Need)}
	}
	scope := "account"
	if strings.HasPrefix(le.Cap.Scope, "key:") {
		scope = "API key"
	}
	return &api.Error{Status: http.StatusPaymentRequired, Type: api.TypeInsufficientQuota, Code: api.CodeSpendLimitExceeded,
		Message: fmt.Sprintf("The %s %s spend limit of $%s is reached: $%s left, and this request may cost up to $%s. The limit resets at %s.",
			le.Cap.Period, scope, le.Cap.Limit, le.Available, le.Need, le.ResetsAt.UTC().Format(time.RFC3339))}
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
