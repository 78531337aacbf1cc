package gateway

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
	"github.com/shareai/shareai/internal/tracing"
)

// keyRules applies the API key's rules: its routing preferences are the defaults of the
// request's, and when it lists models, the request may use only those, and they are the
// fallbacks of a request that names none.
func (g *Gateway) keyRules(k *store.Key, model string, prefs matcher.Prefs, rt api.Routing) (matcher.Prefs, api.Routing, error) {
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
		if base, _ := g.resolveModel(m); !slices.Contains(k.Models, m) && !slices.Contains(k.Models, base) {
			return prefs, rt, &api.Error{Status: http.StatusForbidden, Type: api.TypePermission, Param: "model", Code: api.CodeModelNotAllowed,
				Message: fmt.Sprintf("This API key may use only these models: %s; not '%s'.", strings.Join(k.Models, ", "), m)}
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

// resolveModel returns the model to look for and the sort its suffix asks for: "m:floor" is
// m sorted by price unless a model is really named "m:floor".
func (g *Gateway) resolveModel(model string) (string, string) {
	if g.index(model).Len() > 0 {
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
// answer has started (t.continuing): the caller then bills what was delivered.
func (g *Gateway) dispatch(ctx context.Context, c *call, req *protocol.Request, t *try) (*fleet.Job, *protocol.Request, error) {
	var lastErr error
	for t.canRetry() {
		cand, model, err := g.pick(ctx, c, req, t)
		if err != nil {
			if t.held > 0 && !t.continuing {
				g.voidHold(ctx, c, req, "no node could take the request")
			}
			return nil, nil, err
		}
		offer := fleet.OfferOf(cand)
		g.cfg.Metrics.Matched()
		if t.held == 0 {
			if err := g.hold(ctx, c, req, t, offer); err != nil {
				offer.Release()
				return nil, nil, err
			}
		}
		t.jobs++
		t.fruitless++
		t.avoid[offer.Node.ID] = true
		sent := req
		if req.Model != model {
			// A fallback model: a new request, since a job already sent may still hold req.
			r := *req
			r.Model = model
			sent = &r
		}
		jctx, jspan := g.startJob(ctx, offer, sent, t)
		job, err := g.cfg.Fleet.Dispatch(jctx, offer, sent)
		if err == nil {
			t.ask, t.span = g.askOf(offer, t), jspan
			if !t.paused.IsZero() {
				g.cfg.Metrics.Resumed(g.cfg.Now().Sub(t.paused).Seconds())
				t.paused = time.Time{}
			}
			return job, sent, nil
		}
		tracing.Fail(jspan, err)
		jspan.End()
		lastErr = err
		if offer.Node.Gone() {
			// It dropped between the pick and the job: no attempt spent, and once back it
			// is as good as any node.
			t.fruitless--
			delete(t.avoid, offer.Node.ID)
		}
	}
	if t.held > 0 && !t.continuing {
		// Nothing was delivered. (An answer cut short is billed for what it delivered: the
		// caller settles the hold.)
		g.voidHold(ctx, c, req, "no node could take the request")
	}
	t.failure = cmp.Or(lastErr, t.failure)
	return nil, nil, g.noneLeft(t)
}

// pick takes a slot for the request on the best node of the first of its models that has one
// free, and returns it with that model; the models before it, which no node could take, are
// not tried again. When every node that fits is busy, it waits in the queue of the first model
// whose nodes are. An answer already started is continued by its own model or not at all.
func (g *Gateway) pick(ctx context.Context, c *call, req *protocol.Request, t *try) (matcher.Candidate, string, error) {
	s := g.scan(ctx, c, req, t)
	if s.err == nil {
		return s.cand, s.model, nil
	}
	if s.waitOn < 0 {
		if t.continuing {
			t.failure = addFailure(t.failure, s.err)
		}
		if t.jobs == 0 {
			return matcher.Candidate{}, "", s.refusal
		}
		return matcher.Candidate{}, "", g.noneLeft(t)
	}
	t.models = t.models[s.waitOn:]
	model := s.waitModel
	cand, err := g.wait(ctx, c, t, model, s.waitReq, req, func() (matcher.Candidate, error) { return g.take(ctx, c, s.waitReq, g.index(model), req, t) })
	if _, ok := errors.AsType[*matcher.NoProvider](err); ok {
		// The nodes changed while it waited: none that fits is busy any more.
		if t.jobs == 0 {
			return matcher.Candidate{}, "", noNode(model, g.index(model).Len(), err)
		}
		t.failure = addFailure(t.failure, err)
		return matcher.Candidate{}, "", g.noneLeft(t)
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
func (g *Gateway) scan(ctx context.Context, c *call, req *protocol.Request, t *try) scanned {
	s := scanned{waitOn: -1}
	for i, name := range t.models {
		model, sort := g.resolveModel(name)
		ix := g.index(model)
		mreq := g.matchRequest(t, model, sort)
		mspan := g.startMatch(ctx, model, ix.Len())
		cand, err := g.take(ctx, c, mreq, ix, req, t)
		endMatch(mspan, cand, err)
		if err == nil {
			t.models = t.models[i:]
			return scanned{cand: cand, model: model}
		}
		if np, ok := errors.AsType[*matcher.NoProvider](err); ok {
			g.cfg.Metrics.NoProvider(np.Reasons)
		}
		s.err = err
		if s.refusal == nil {
			s.refusal = noNode(model, ix.Len(), err)
		}
		if s.waitOn < 0 && g.waitable(model, err) {
			s.waitOn, s.waitModel, s.waitReq = i, model, mreq
		}
		if t.continuing {
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
func (g *Gateway) noneLeft(t *try) error {
	msg := "no node is left to try"
	if t.failure != nil {
		msg = t.failure.Error()
	}
	return &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: api.CodeNoProviderAvailable,
		Message: fmt.Sprintf("No node could take this request: %s. Retry shortly.", msg)}
}

// matchRequest is what the matcher decides a request's node on, for one of its models.
func (g *Gateway) matchRequest(t *try, model, sort string) matcher.Request {
	prefs := t.prefs
	if sort != "" && t.requestSort == "" {
		prefs.Sort = sort // the model's suffix wins over a key's default sort
	}
	if t.session != "" && len(prefs.Order) == 0 {
		// Affinity: the node the session used last comes first while it is eligible.
		prefs.Order = []string{t.session}
	}
	return matcher.Request{Model: model, Prefs: prefs, Excluded: t.avoid, Continuation: t.continuing,
		Tier: t.tier, Multiplier: g.cfg.TierPrices.Of(t.tier)}
}

// match takes a slot on the best node for mreq among ix's, or says why none has one free.
func match(mreq matcher.Request, ix *matcher.Index) (matcher.Candidate, error) {
	if matcher.Walkable(mreq.Prefs) {
		return ix.Pick(mreq)
	}
	return matcher.Match(mreq, ix.Candidates()).Pick()
}

// hold reserves the most the request may cost on the node picked.
func (g *Gateway) hold(ctx context.Context, c *call, req *protocol.Request, t *try, offer *fleet.Offer) error {
	t.bounds.CompletionTokens = g.cfg.Ledger.CompletionBound(req.MaxTokens, offer.ContextLength)
	amount := g.maxCost(offer, req, t)
	// A hold once queued commits whether or not the request is still there: wait for it, and
	// void it when the request ended meanwhile, so that none is left open.
	if err := g.cfg.Ledger.Hold(context.WithoutCancel(ctx), c.id, c.key, amount); err != nil {
		return holdError(err)
	}
	t.held = max(amount, 1)
	if ctx.Err() != nil {
		g.voidHold(ctx, c, req, "the request ended before a node took it")
		if aborted(ctx) {
			return errShuttingDown
		}
		return errBuyerGone
	}
	if g.tracing {
		c.span.AddEvent("hold", trace.WithAttributes(tracing.HoldNanos.Int64(int64(amount))))
	}
	return nil
}

// take takes a slot on the best node for mreq among ix's. Once a hold is placed, a node
// dearer than it gets the hold raised to its cost, within the buyer's balance and spend caps,
// as a card's incremental authorization: a retry is never refused only because the first
// choice was the cheapest. When the buyer's limits refuse the raise, the slot is freed and
// this and later attempts take only nodes whose cost fits the hold.
func (g *Gateway) take(ctx context.Context, c *call, mreq matcher.Request, ix *matcher.Index, req *protocol.Request, t *try) (matcher.Candidate, error) {
	if t.held > 0 && t.holdFixed {
		return g.matchWithin(mreq, ix, req, t)
	}
	cand, err := match(mreq, ix)
	if err != nil || t.held == 0 || cand.Slot == nil {
		return cand, err
	}
	cost := g.maxCost(fleet.OfferOf(cand), req, t)
	if cost <= t.held {
		return cand, nil
	}
	if err := g.cfg.Ledger.Raise(context.WithoutCancel(ctx), c.id, cost); err != nil {
		fleet.OfferOf(cand).Release()
		if _, ok := errors.AsType[*store.LimitError](err); !ok {
			g.log.Error("raise hold", logRequestID, c.id, "err", err)
		}
		t.holdFixed = true
		return g.matchWithin(mreq, ix, req, t)
	}
	t.held = cost
	if g.tracing {
		c.span.AddEvent("hold raised", trace.WithAttributes(tracing.HoldNanos.Int64(int64(cost))))
	}
	return cand, nil
}

// matchWithin is match among the nodes whose cost fits the request's hold.
func (g *Gateway) matchWithin(mreq matcher.Request, ix *matcher.Index, req *protocol.Request, t *try) (matcher.Candidate, error) {
	cands := slices.DeleteFunc(slices.Clone(ix.Candidates()), func(c matcher.Candidate) bool { return g.maxCost(fleet.OfferOf(c), req, t) > t.held })
	return matcher.Match(mreq, cands).Pick()
}

// voidHold closes the request's hold without charge, recording why in its usage.
func (g *Gateway) voidHold(ctx context.Context, c *call, req *protocol.Request, why string) {
	u := &store.Usage{RequestID: c.id, AccountID: c.key.AccountID, KeyID: c.key.ID, Model: req.Model, Endpoint: req.Kind,
		Outcome: store.OutcomeError, Error: why, CreatedAt: c.start}
	if err := g.cfg.Ledger.Void(context.WithoutCancel(ctx), c.id, u); err != nil {
		g.log.Error("void hold", logRequestID, c.id, "err", err)
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

// askOf is what the request pays per million tokens on an offer: its ask at the request's tier.
func (g *Gateway) askOf(o *fleet.Offer, t *try) ledger.Ask {
	m := g.cfg.TierPrices
	return ledger.Ask{Input: m.Price(money.Price(o.InputPrice), t.tier), Output: m.Price(money.Price(o.OutputPrice), t.tier)}
}

// maxCost is the most the request may cost on an offer, fee included.
func (g *Gateway) maxCost(o *fleet.Offer, req *protocol.Request, t *try) money.Nanos {
	b := t.bounds
	b.CompletionTokens = g.cfg.Ledger.CompletionBound(req.MaxTokens, o.ContextLength)
	return g.cfg.Ledger.MaxCost(g.askOf(o, t), b)
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
