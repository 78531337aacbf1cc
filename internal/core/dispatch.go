package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tier"
	"github.com/shareai/shareai/internal/tracing"
)

// keyRules applies the API key's rules: its routing preferences are the defaults of the
// request's, and when it lists models, the request may use only those, and they are the
// fallbacks of a request that names none.
func (c *Core) keyRules(k *store.Key, model string, prefs matcher.Prefs, rt api.Routing) (matcher.Prefs, api.Routing, error) {
	if len(k.Routing) > 0 {
		defaults, err := matcher.ParsePrefs(k.Routing)
		if err != nil {
			return prefs, rt, fmt.Errorf("routing defaults of key %s: %w", k.ID, err)
		}
		prefs = prefs.Merge(defaults)
	}
	if len(k.Models) == 0 {
		return prefs, rt, nil
	}
	for _, m := range append([]string{model}, rt.Models...) {
		if err := c.allowed(k, "model", m); err != nil {
			return prefs, rt, err
		}
	}
	if len(rt.Models) == 0 {
		rt.Models = k.Models
	}
	return prefs, rt, nil
}

// modelsToTry is the requested model, then the fallback models, without repeats.
func modelsToTry(model string, fallbacks []string) []string {
	ms := []string{model}
	for _, m := range fallbacks {
		if m != "" && !slices.Contains(ms, m) {
			ms = append(ms, m)
		}
	}
	return ms
}

// Model suffixes that choose a sort, as OpenRouter's do.
var sortSuffixes = map[string]string{":floor": "price", ":nitro": "throughput"}

// ResolveModel returns the model a request for model looks for: model without a sort suffix
// (resolveModel).
func (c *Core) ResolveModel(model string) string {
	base, _ := c.resolveModel(model)
	return base
}

// resolveModel returns the model to look for and the sort its suffix asks for: "m:floor" is
// m sorted by price unless a model is really named "m:floor".
func (c *Core) resolveModel(model string) (string, string) {
	if c.index(model).Len() > 0 {
		return model, ""
	}
	for suffix, sort := range sortSuffixes {
		if base, ok := strings.CutSuffix(model, suffix); ok {
			return base, sort
		}
	}
	return model, ""
}

// dispatch picks a node not to avoid, holds the most the request can cost (on the first
// attempt), and sends it the job. It tries the models in order, and when every node that fits
// is busy, it waits in the queue for the first model with busy nodes; the request it returns
// is the one it sent, naming the model that serves (req itself is never changed: a job sent
// earlier may still be reading it). When no node can take it, the hold is voided, unless the
// answer has started (r.continuing): the caller then bills what was delivered.
func (c *Core) dispatch(ctx context.Context, r *Request, req *protocol.Request) (*fleet.Job, *protocol.Request, error) {
	var lastErr error
	for r.canRetry() {
		cand, model, err := c.pick(ctx, r, req)
		if err != nil {
			if r.held > 0 && !r.continuing {
				c.voidHold(ctx, r, "no node could take the request")
			}
			return nil, nil, err
		}
		offer := fleet.OfferOf(cand)
		if r.Offer == nil {
			c.cfg.Metrics.Matched()
		}
		if r.held == 0 {
			if err := c.hold(ctx, r, req, cand); err != nil {
				offer.Release()
				return nil, nil, err
			}
		}
		r.jobs++
		r.fruitless++
		r.avoid[offer.Node.ID] = true
		sent := req
		if req.Model != model {
			// A fallback model: a new request, since a job already sent may still hold req.
			fallback := *req
			fallback.Model = model
			sent = &fallback
		}
		jctx, jspan := c.startJob(ctx, offer, sent, r)
		job, err := c.cfg.Fleet.Dispatch(jctx, offer, sent)
		if err == nil {
			r.ask, r.askWindow, r.surge, r.span = c.askOf(cand, r), cand.AskWindow, cand.Surge, jspan
			if r.Ask != nil {
				r.askWindow, r.surge = "", 0 // the caller's ask, not the node's
			}
			if !r.paused.IsZero() {
				c.cfg.Metrics.Resumed(c.cfg.Now().Sub(r.paused).Seconds())
				r.paused = time.Time{}
			}
			return job, sent, nil
		}
		tracing.Fail(jspan, err)
		jspan.End()
		lastErr = err
		if offer.Node.Gone() {
			// It dropped between the pick and the job: no attempt spent, and once back it
			// is as good as any node.
			r.fruitless--
			delete(r.avoid, offer.Node.ID)
		}
	}
	if r.held > 0 && !r.continuing {
		// Nothing was delivered. (An answer cut short is billed for what it delivered: the
		// caller settles the hold.)
		c.voidHold(ctx, r, "no node could take the request")
	}
	r.failure = cmp.Or(lastErr, r.failure)
	return nil, nil, c.noneLeft(r)
}

// pick takes a slot for the request on the best node of the first of its models that has one
// free, and returns it with that model; the models before it, which no node could take, are
// not tried again. When every node that fits is busy, it waits in the queue of the first model
// whose nodes are. An answer already started is continued by its own model or not at all.
func (c *Core) pick(ctx context.Context, r *Request, req *protocol.Request) (matcher.Candidate, string, error) {
	if r.Offer != nil {
		return r.Offer.Candidate(), r.Offer.Model, nil // its slot taken by the caller
	}
	if c.liveWaiting(r) {
		return matcher.Candidate{}, "", ErrNoCapacity
	}
	s := c.scan(ctx, r, req)
	if s.err == nil {
		return s.cand, s.model, nil
	}
	if s.waitOn >= 0 && r.Batch && r.jobs == 0 {
		return matcher.Candidate{}, "", ErrNoCapacity // a batch line's first job never waits
	}
	if s.waitOn < 0 {
		if r.continuing {
			r.failure = addFailure(r.failure, s.err)
		}
		if r.jobs == 0 {
			return matcher.Candidate{}, "", s.refusal
		}
		return matcher.Candidate{}, "", c.noneLeft(r)
	}
	r.models = r.models[s.waitOn:]
	model := s.waitModel
	cand, err := c.wait(ctx, r, model, s.waitReq, req, func() (matcher.Candidate, error) { return c.take(ctx, r, s.waitReq, c.index(model), req) })
	if _, ok := errors.AsType[*matcher.NoProvider](err); ok {
		// The nodes changed while it waited: none that fits is busy any more.
		if r.jobs == 0 {
			return matcher.Candidate{}, "", noNode(model, c.index(model).Len(), err)
		}
		r.failure = addFailure(r.failure, err)
		return matcher.Candidate{}, "", c.noneLeft(r)
	}
	return cand, model, err
}

// scanned is what scan found.
type scanned struct {
	cand      matcher.Candidate
	model     string
	err       error           // why the last model tried found no node
	refusal   error           // the buyer's error of the first model, which found no node
	waitOn    int             // index of the first model whose nodes are busy; -1: none
	waitModel string          // that model, resolved
	waitReq   matcher.Request // its decision's request
}

// scan tries the request's models in order for a node with a free slot; the models before the
// one that has it are not tried again.
func (c *Core) scan(ctx context.Context, r *Request, req *protocol.Request) scanned {
	s := scanned{waitOn: -1}
	for i, name := range r.models {
		model, sort := c.resolveModel(name)
		ix := c.index(model)
		mreq := c.matchRequest(r, model, sort)
		mspan := c.startMatch(ctx, model, ix.Len())
		cand, err := c.take(ctx, r, mreq, ix, req)
		endMatch(mspan, cand, err)
		if err == nil {
			r.models = r.models[i:]
			return scanned{cand: cand, model: model}
		}
		if np, ok := errors.AsType[*matcher.NoProvider](err); ok {
			c.cfg.Metrics.NoProvider(np.Reasons)
		}
		s.err = err
		if s.refusal == nil {
			s.refusal = noNode(model, ix.Len(), err)
		}
		if s.waitOn < 0 && c.waitable(model, err) {
			s.waitOn, s.waitModel, s.waitReq = i, model, mreq
		}
		if r.continuing {
			break
		}
	}
	return s
}

// addFailure adds why no node was left to why the last one failed, if it did.
func addFailure(failure, err error) error {
	if failure == nil {
		return err
	}
	return fmt.Errorf("%v (%w)", failure, err)
}

// noneLeft is the error of a request no node is left to take, after some failed it.
func (c *Core) noneLeft(r *Request) error {
	msg := "no node is left to try"
	if r.failure != nil {
		msg = r.failure.Error()
	}
	return &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: api.CodeNoProviderAvailable,
		Message: fmt.Sprintf("No node could take this request: %s. Retry shortly.", msg), Cause: r.failure}
}

// matchRequest is what the matcher decides a request's node on, for one of its models.
func (c *Core) matchRequest(r *Request, model, sort string) matcher.Request {
	prefs := r.prefs
	if sort != "" && r.requestSort == "" {
		prefs.Sort = sort // the model's suffix wins over a key's default sort
	}
	if r.session != "" && len(prefs.Order) == 0 {
		// Affinity: the node the session used last comes first while it is eligible.
		prefs.Order = []string{r.session}
	}
	return matcher.Request{Model: model, Prefs: prefs, Excluded: r.avoid, Continuation: r.continuing,
		Tier: r.tier, Multiplier: c.multiplier(r), Batch: r.Batch}
}

// match takes a slot on the best node for mreq among ix's, or says why none has one free: by
// the default auction's walk when the preferences keep its order, else by the ranking's walk
// of the index's order for them.
func match(mreq matcher.Request, ix *matcher.Index) (matcher.Candidate, error) {
	if matcher.Walkable(mreq.Prefs) && !mreq.Batch { // batch work ranks idle nodes first
		return ix.Pick(mreq)
	}
	return ix.Take(mreq)
}

// hold reserves the most the request may cost on the node picked, funding the account first
// when it is short and the request says how (Request.Fund). An unbilled request holds nothing.
func (c *Core) hold(ctx context.Context, r *Request, req *protocol.Request, cand matcher.Candidate) error {
	r.bounds.CompletionTokens = c.cfg.Ledger.CompletionBound(req.MaxTokens, fleet.OfferOf(cand).ContextLength)
	if r.Unbilled {
		return nil // priced all the same, for the caller's outcome, and settled nowhere
	}
	amount := c.maxCost(cand, req, r)
	// A hold once queued commits whether or not the request is still there: wait for it, and
	// void it when the request ended meanwhile, so that none is left open.
	err := c.cfg.Ledger.Hold(context.WithoutCancel(ctx), r.ID, r.payer(), amount)
	if _, short := errors.AsType[*store.LimitError](err); short && r.Fund != nil {
		switch ferr := r.Fund(ctx, amount); {
		case errors.Is(ferr, ErrUnfunded):
			r.Unbilled = true
			return nil
		case ferr != nil:
			return fmt.Errorf("fund the hold: %w", ferr)
		}
		err = c.cfg.Ledger.Hold(context.WithoutCancel(ctx), r.ID, r.payer(), amount)
	}
	if err != nil {
		return holdError(err)
	}
	r.held = max(amount, 1)
	if ctx.Err() != nil {
		c.voidHold(ctx, r, "the request ended before a node took it")
		if aborted(ctx) {
			return ErrShuttingDown
		}
		return ErrBuyerGone
	}
	if c.tracing {
		trace.SpanFromContext(ctx).AddEvent("hold", trace.WithAttributes(tracing.HoldNanos.Int64(int64(amount))))
	}
	return nil
}

// payer is the key a hold is placed on: the request's, or for an account paying directly
// one of no key (no key's caps apply).
func (r *Request) payer() *store.Key {
	if r.Key != nil {
		return r.Key
	}
	return &store.Key{AccountID: r.Account}
}

// take takes a slot on the best node for mreq among ix's. Once a hold is placed, a node
// dearer than it gets the hold raised to its cost, within the buyer's balance and spend caps,
// as a card's incremental authorization: a retry is never refused only because the first
// choice was the cheapest. When the buyer's limits refuse the raise, the slot is freed and
// this and later attempts take only nodes whose cost fits the hold.
func (c *Core) take(ctx context.Context, r *Request, mreq matcher.Request, ix *matcher.Index, req *protocol.Request) (matcher.Candidate, error) {
	if r.held > 0 && r.holdFixed {
		return c.matchWithin(mreq, ix, req, r)
	}
	cand, err := match(mreq, ix)
	if err != nil || r.held == 0 || cand.Slot == nil {
		return cand, err
	}
	cost := c.maxCost(cand, req, r)
	if cost <= r.held {
		return cand, nil
	}
	if err := c.cfg.Ledger.Raise(context.WithoutCancel(ctx), r.ID, cost); err != nil {
		fleet.OfferOf(cand).Release()
		if _, ok := errors.AsType[*store.LimitError](err); !ok {
			c.log.Error("raise hold", logRequestID, r.ID, "err", err)
		}
		r.holdFixed = true
		return c.matchWithin(mreq, ix, req, r)
	}
	r.held = cost
	if c.tracing {
		trace.SpanFromContext(ctx).AddEvent("hold raised", trace.WithAttributes(tracing.HoldNanos.Int64(int64(cost))))
	}
	return cand, nil
}

// matchWithin is match among the nodes whose cost fits the request's hold.
func (c *Core) matchWithin(mreq matcher.Request, ix *matcher.Index, req *protocol.Request, r *Request) (matcher.Candidate, error) {
	cands := slices.DeleteFunc(slices.Clone(ix.Candidates()), func(cand matcher.Candidate) bool { return c.maxCost(cand, req, r) > r.held })
	return matcher.Match(mreq, cands).Pick()
}

// voidHold closes the request's hold without charge, recording why in its usage.
func (c *Core) voidHold(ctx context.Context, r *Request, why string) {
	u := &store.Usage{RequestID: r.ID, AccountID: r.Account, KeyID: r.usage.KeyID, Model: cmp.Or(r.arm, r.Job.Model), Endpoint: r.Job.Kind,
		Outcome: store.OutcomeError, Error: why, CreatedAt: r.Start, Split: r.usage.Split}
	if r.failure != nil {
		u.Error += " (" + r.failure.Error() + ")" // as the buyer is told it: the nodes' own words are their events
	}
	if err := c.cfg.Ledger.Void(context.WithoutCancel(ctx), r.ID, u); err != nil {
		c.log.Error("void hold", logRequestID, r.ID, "err", err)
	}
}

// noNode is the buyer's error when no node serving model can take the request: 404 when none
// serves it, else 503 saying why each is not eligible.
func noNode(model string, serving int, err error) error {
	if serving == 0 {
		return &api.Error{Status: http.StatusNotFound, Type: api.TypeInvalidRequest, Param: "model", Code: api.CodeModelNotFound,
			Message: fmt.Sprintf("The model '%s' does not exist or no node serves it now. GET /v1/models lists the models served on the network.", model)}
	}
	e := &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: api.CodeNoProviderAvailable,
		Message: fmt.Sprintf("No node can take this request now (%v). Retry shortly, or relax the routing preferences.", err)}
	if np, ok := errors.AsType[*matcher.NoProvider](err); ok && !np.Busy() {
		e.Message = fmt.Sprintf("No node can take this request (%v): relax the routing preferences.", err)
		e.RetryAfter = -1 // waiting will not help
	}
	return e
}

// askOf is what the request pays per million tokens on a candidate: its ask in effect when the
// candidate was read (its schedule's window, times surge: fleet.Offer.Price), at the request's
// tier. It is the price the matcher checked max_price against, so the buyer's cap holds, and
// the request keeps it (r.ask) for its whole answer, whenever the ask changes: the price is
// fixed when the request takes the node. (The candidates are read again at an ask's change:
// candidates.go.)
func (c *Core) askOf(cand matcher.Candidate, r *Request) ledger.Ask {
	if r.Ask != nil {
		return *r.Ask
	}
	m := c.multiplier(r)
	return ledger.Ask{Input: tier.Scale(cand.InputPrice, m), Output: tier.Scale(cand.OutputPrice, m)}
}

// maxCost is the most the request may cost on a candidate, fee included.
func (c *Core) maxCost(cand matcher.Candidate, req *protocol.Request, r *Request) money.Nanos {
	b := r.bounds
	b.CompletionTokens = c.cfg.Ledger.CompletionBound(req.MaxTokens, fleet.OfferOf(cand).ContextLength)
	return c.cfg.Ledger.MaxCost(c.askOf(cand, r), b)
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
