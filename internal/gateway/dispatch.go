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

// dispatch picks a node not to avoid, holds the most the request can cost there (on the first
// attempt), and sends it the job. It tries the models in order; the request it returns is the
// one it sent, naming the model that serves (req itself is never changed: a job sent earlier
// may still be reading it). When no node can take it, the hold is voided, unless the answer
// has started (t.continuing): the caller then bills what was delivered.
func (g *Gateway) dispatch(ctx context.Context, c *call, req *protocol.Request, t *try) (*fleet.Job, *protocol.Request, error) {
	var (
		lastErr error
		refusal error // why the first model found no node
	)
	for t.canRetry() && len(t.models) > 0 {
		model, sort := g.resolveModel(t.models[0])
		ix := g.index(model)
		prefs := t.prefs
		if sort != "" && t.requestSort == "" {
			prefs.Sort = sort // the model's suffix wins over a key's default sort
		}
		if t.session != "" && len(prefs.Order) == 0 {
			// Affinity: the node the session used last comes first while it is eligible.
			prefs.Order = []string{t.session}
		}
		mreq := matcher.Request{Model: model, Prefs: prefs, Excluded: t.avoid, Continuation: t.continuing}
		var (
			cand matcher.Candidate
			err  error
		)
		mspan := g.startMatch(ctx, model, ix.Len())
		switch {
		case t.held > 0:
			// A later attempt: only nodes whose cost fits the hold placed for the first.
			cands := slices.DeleteFunc(slices.Clone(ix.Candidates()), func(c matcher.Candidate) bool { return g.maxCost(c.Offer, req, t.bounds) > t.held })
			ranking := matcher.Match(mreq, cands)
			cand, err = ranking.Pick()
		case matcher.Walkable(prefs):
			cand, err = ix.Pick(mreq)
		default:
			ranking := matcher.Match(mreq, ix.Candidates())
			cand, err = ranking.Pick()
		}
		endMatch(mspan, cand, err)
		if err != nil {
			if np, ok := errors.AsType[*matcher.NoProvider](err); ok {
				g.cfg.Metrics.NoProvider(np.Reasons)
			}
			if refusal == nil && t.jobs == 0 {
				refusal = noNode(model, ix.Len(), err)
			}
			if t.continuing {
				t.failure = fmt.Errorf("%v (%w)", t.failure, err)
				break // an answer is continued by the same model or not at all
			}
			t.models = t.models[1:] // the next fallback model, if any
			continue
		}
		offer := cand.Offer
		g.cfg.Metrics.Matched()
		if t.held == 0 {
			t.bounds.CompletionTokens = g.cfg.Ledger.CompletionBound(req.MaxTokens, offer.ContextLength)
			amount := g.maxCost(offer, req, t.bounds)
			// A hold once queued commits whether or not the request is still there: wait for
			// it, and void it when the request ended meanwhile, so that none is left open.
			if err := g.cfg.Ledger.Hold(context.WithoutCancel(ctx), c.id, c.key, amount); err != nil {
				offer.Release()
				return nil, nil, holdError(err)
			}
			if ctx.Err() != nil {
				offer.Release()
				g.voidHold(ctx, c, req, "the request ended before a node took it")
				if aborted(ctx) {
					return nil, nil, errShuttingDown
				}
				return nil, nil, errBuyerGone
			}
			t.held = max(amount, 1)
			if g.tracing {
				c.span.AddEvent("hold", trace.WithAttributes(tracing.HoldNanos.Int64(int64(amount))))
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
			t.ask, t.span = askOf(offer), jspan
			return job, sent, nil
		}
		tracing.Fail(jspan, err)
		jspan.End()
		lastErr = err
	}
	if refusal != nil && t.held == 0 {
		return nil, nil, refusal
	}
	if t.held > 0 && !t.continuing {
		// Nothing was delivered. (An answer cut short is billed for what it delivered: the
		// caller settles the hold.)
		g.voidHold(ctx, c, req, "no node could take the request")
	}
	msg := "no node is left to try"
	if err := cmp.Or(lastErr, t.failure); err != nil {
		msg = err.Error()
	}
	return nil, nil, &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: api.CodeNoProviderAvailable,
		Message: fmt.Sprintf("No node could take this request: %s. Retry shortly.", msg)}
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
