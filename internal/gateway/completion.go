package gateway

import (
	"bytes"
	"cmp"
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
	return g.serve(w, r, c, req, body.Stream, body.StreamOptions, body.Routing, body.User)
}

// checkpointEvery is how often a running request's delivered bill is checkpointed.
const checkpointEvery = 2 * time.Second

// maxNodes bounds how many jobs a request may take: a node vanishing between being picked and
// receiving the job, failing before its first token, or failing mid-answer (when another node
// continues) each costs one.
const maxNodes = 6

// serve runs a validated request on a node, relays the answer and bills it. The node is the
// best for the buyer's routing preferences among those serving the model, or the fallback
// models in order. A node that fails before its first token is replaced by another, up to
// maxNodes, without the buyer noticing.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, c *call, req *protocol.Request, stream bool, opts *api.StreamOptions, rt api.Routing, user string) error {
	prefs, err := matcher.ParsePrefs(rt.Provider)
	if err != nil {
		var fe *matcher.FieldError
		if errors.As(err, &fe) {
			return api.BadRequest(fe.Field, api.CodeInvalidValue, "Invalid '%s': %s.", fe.Field, fe.Msg)
		}
		return api.BadRequest("provider", api.CodeInvalidValue, "Invalid 'provider': %v.", err)
	}
	requestSort := prefs.Sort
	if prefs, rt, err = g.keyRules(c.key, req.Model, prefs, rt); err != nil {
		return err
	}
	session := affinityKey(c, r, user)
	promptBytes := len(req.Messages) + len(req.Prompt)
	t := &try{
		bounds:      ledger.Bounds{PromptTokens: ledger.PromptBound(promptBytes), PromptEstimate: ledger.EstimateTokens(promptBytes)},
		avoid:       map[string]bool{},
		prefs:       prefs,
		requestSort: requestSort,
		models:      modelsToTry(req.Model, rt.Models),
		session:     g.affinity.get(session),
	}
	u := &store.Usage{
		RequestID: c.id, AccountID: c.key.AccountID, KeyID: c.key.ID,
		Endpoint: req.Kind, Stream: stream, CreatedAt: c.start,
	}
	st := &relay.State{Start: c.start}
	var sink relay.Sink
	for {
		job, err := g.dispatch(r.Context(), c, req, t)
		if err != nil {
			if !st.Started {
				return err
			}
			// The answer started and no node can finish it: say so, never end it as complete.
			return g.fail(c, t, sink, u, fmt.Errorf("no node could continue the answer: %w", err))
		}
		if !st.Started {
			// The answer names the model that serves it: the first choice or a fallback.
			sink = newSink(w, c, req, stream, opts)
			w.Header().Set(HeaderNode, job.Offer.Node.ID)
		}
		node := job.Offer.Node
		u.Model, u.NodeID, u.Region = req.Model, node.ID, node.Region
		res, bill := g.relay(r, c, job, t, st, sink, u)
		switch {
		case res.Outcome == relay.Refused && nodeFailed(res.Err):
			job.Offer.Observe(false, 0, 0) // it counts against the node
			if t.jobs < maxNodes {
				// Nothing has reached the buyer: the next node starts the answer afresh.
				g.log.Info("node failed before answering; trying another", logRequestID, c.id, logNode, node.ID, "err", res.Err)
				t.failure = fmt.Errorf("node %s failed before answering: %w", node.ID, res.Err)
				continue
			}
		case res.Outcome == relay.Failed:
			job.Offer.Observe(false, 0, 0)
			t.parts = append(t.parts, t.work(job, t.cutShort(res), res.Delivered))
			if why := continuable(req, st); why != "" {
				return g.fail(c, t, sink, u, fmt.Errorf("node %s failed mid-answer (%v), and %s", node.ID, res.Err, why))
			}
			// Another node continues from exactly where this one stopped. Nodes that failed
			// earlier may take it again: a dropped node that reconnected is as good as any.
			t.avoid = map[string]bool{node.ID: true}
			g.log.Info("node failed mid-answer; continuing on another", logRequestID, c.id, logNode, node.ID, "err", res.Err, "delivered", st.Delivered)
			req = continuation(t.original(req), st.Text.String())
			t.continuing = true
			t.failure = fmt.Errorf("node %s failed mid-answer: %w", node.ID, res.Err)
			continue
		case res.Outcome == relay.OK:
			g.affinity.put(session, node.ID)
		}
		return g.finish(c, job, t, st, res, bill, u)
	}
}

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

// fail ends an answer that started but cannot be finished, and bills what was delivered.
func (g *Gateway) fail(c *call, t *try, sink relay.Sink, u *store.Usage, err error) error {
	if werr := sink.Fail(err); werr == nil {
		sink.Flush()
	}
	u.Outcome, u.Error, u.Duration = store.OutcomeError, err.Error(), g.cfg.Now().Sub(c.start)
	bill := g.cfg.Ledger.Price(c.id, t.bounds, t.parts)
	u.PromptTokens, u.CompletionTokens = bill.PromptTokens, bill.CompletionTokens
	g.cfg.Ledger.SettleLater(bill, u)
	return nil
}

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

// try is what a request's attempts on successive nodes share.
type try struct {
	prefs       matcher.Prefs
	requestSort string   // the sort the request itself asked for, before the key's defaults
	models      []string // to try in order: the requested one, then fallbacks
	session     string   // the node this buyer's session last used, if any
	bounds      ledger.Bounds
	held        money.Nanos     // once held, only nodes whose cost fits the hold are tried
	jobs        int             // jobs the request has taken
	avoid       map[string]bool // nodes not to try: those that refused it, or just failed it
	ask         ledger.Ask      // of the node of the current attempt
	failure     error           // why the last node failed
	// parts are the work of nodes that failed mid-answer, each paid for what it delivered.
	parts      []ledger.Work
	continuing bool              // the answer started: only nodes that continue can take it
	first      *protocol.Request // the request before any continuation
}

// original returns the buyer's request, as it was before any continuation.
func (t *try) original(req *protocol.Request) *protocol.Request {
	if t.first == nil {
		t.first = req
	}
	return t.first
}

// cutShort is the usage of a node that failed mid-answer: what it reported, or else the
// coordinator's estimate (its prompt, and the tokens in what it delivered).
func (t *try) cutShort(res relay.Result) protocol.Usage {
	u := res.Usage
	if u.PromptTokens == 0 {
		u.PromptTokens = t.bounds.PromptEstimate
	}
	if u.CompletionTokens == 0 {
		u.CompletionTokens = res.Pieces // what its engine gave, piece by piece
	}
	if u.CompletionTokens == 0 {
		u.CompletionTokens = ledger.EstimateTokens(res.Delivered)
	}
	return u
}

func newSink(w http.ResponseWriter, c *call, req *protocol.Request, stream bool, opts *api.StreamOptions) relay.Sink {
	a := relay.Answer{Model: req.Model, Created: c.start.Unix(), IncludeUsage: opts != nil && opts.IncludeUsage}
	chat := req.Kind == protocol.KindChat
	suffix := strings.TrimPrefix(c.id, "req_")
	if chat {
		a.ID = "chatcmpl-" + suffix
	} else {
		a.ID = "cmpl-" + suffix
	}
	switch {
	case stream && chat:
		return relay.NewChatStream(w, a)
	case stream:
		return relay.NewCompletionStream(w, a)
	case chat:
		return relay.NewChatCollect(w, a)
	}
	return relay.NewCompletionCollect(w, a)
}

// work is what the node of a job did, as it claims.
func (t *try) work(job *fleet.Job, u protocol.Usage, delivered int) ledger.Work {
	n := job.Offer.Node
	return ledger.Work{NodeID: n.ID, ProviderID: n.AccountID, Ask: t.ask,
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, DeliveredBytes: delivered}
}

// relay relays one node's answer to the buyer. It returns the answer's bill when the answer
// ended whole (the bill is priced before its end is written), nil otherwise.
func (g *Gateway) relay(r *http.Request, c *call, job *fleet.Job, t *try, st *relay.State, sink relay.Sink, u *store.Usage) (relay.Result, *ledger.Bill) {
	var bill *ledger.Bill
	price := func(used protocol.Usage, delivered int) (protocol.Usage, money.Nanos) {
		bill = g.cfg.Ledger.Price(c.id, t.bounds, append(slices.Clip(t.parts), t.work(job, used, delivered)))
		return protocol.Usage{PromptTokens: bill.PromptTokens, CompletionTokens: bill.CompletionTokens}, bill.Cost()
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
		for _, p := range t.parts {
			delivered -= p.DeliveredBytes // delivered by the nodes before this one
		}
		soFar := g.cfg.Ledger.Price(c.id, t.bounds, append(slices.Clip(t.parts), t.work(job, protocol.Usage{
			PromptTokens: t.bounds.PromptEstimate, CompletionTokens: ledger.EstimateTokens(delivered)}, delivered)))
		if err := g.cfg.Ledger.Checkpoint(r.Context(), soFar, u); err != nil && r.Context().Err() == nil {
			g.log.Warn("checkpoint request", logRequestID, c.id, "err", err)
		}
	}
	res := relay.Run(r.Context(), job, sink, st, relay.Options{Bill: price, Progress: progress, StallCeiling: g.cfg.StallTimeout})
	return res, bill
}

// finish records how the request ended and queues its bill: what was delivered, or nothing.
func (g *Gateway) finish(c *call, job *fleet.Job, t *try, st *relay.State, res relay.Result, bill *ledger.Bill, u *store.Usage) error {
	u.FinishReason, u.TTFT, u.Duration = res.FinishReason, st.TTFT, g.cfg.Now().Sub(c.start)
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
	switch {
	case bill != nil:
	case res.Outcome == relay.Refused:
		bill = g.cfg.Ledger.Price(c.id, t.bounds, nil) // nothing was delivered: nothing to pay
	default:
		// Cut short: the buyer pays for what was delivered. A node stopped before it reported
		// usage read the prompt all the same: bill the coordinator's estimate of it.
		used := res.Usage
		if used.PromptTokens == 0 {
			used.PromptTokens = t.bounds.PromptEstimate
		}
		bill = g.cfg.Ledger.Price(c.id, t.bounds, append(t.parts, t.work(job, used, res.Delivered)))
	}
	if len(bill.Clamped) > 0 {
		g.log.Warn("node claimed more tokens than it delivered; billed the coordinator's estimate", logRequestID, c.id, logNode, job.Offer.Node.ID,
			"claimed_prompt", res.Usage.PromptTokens, "claimed_completion", res.Usage.CompletionTokens,
			"billed_prompt", bill.PromptTokens, "billed_completion", bill.CompletionTokens)
	}
	u.PromptTokens, u.CompletionTokens = bill.PromptTokens, bill.CompletionTokens
	if res.Outcome == relay.OK && len(t.parts) == 0 {
		var tps float64 // the output rate after the first token, of the tokens billed
		if gen := u.Duration - st.TTFT; gen > 0 && bill.CompletionTokens > 1 {
			tps = float64(bill.CompletionTokens-1) / gen.Seconds()
		}
		job.Offer.Observe(true, st.TTFT, tps)
	} else if res.Outcome == relay.OK {
		job.Offer.Observe(true, 0, 0)
	}
	g.cfg.Ledger.SettleLater(bill, u)
	if res.Outcome != relay.OK {
		g.log.Debug("request ended early", logRequestID, c.id, logNode, job.Offer.Node.ID, "outcome", u.Outcome, "err", res.Err)
	}
	return reqErr
}

// nodeFailed tells a node's own failure (it vanished, its engine broke or is overloaded) from
// the engine refusing the request itself, which another node would refuse too.
func nodeFailed(err error) bool {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		return true
	}
	return !requestRefused(pe)
}

func requestRefused(pe *protocol.Error) bool {
	return pe.Status >= 400 && pe.Status < 500 && pe.Status != http.StatusNotFound && pe.Status != http.StatusTooManyRequests
}

// dispatch picks a node not to avoid, holds the most the request can cost there (on the first
// attempt), and sends it the job. It tries the models in order, and sets req.Model to the one
// that serves. When no node can take it, the hold is voided.
func (g *Gateway) dispatch(ctx context.Context, c *call, req *protocol.Request, t *try) (*fleet.Job, error) {
	var (
		lastErr error
		refusal error // why the first model found no node
	)
	for t.jobs < maxNodes && len(t.models) > 0 {
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
		if err != nil {
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
		if t.held == 0 {
			t.bounds.CompletionTokens = g.cfg.Ledger.CompletionBound(req.MaxTokens, offer.ContextLength)
			amount := g.maxCost(offer, req, t.bounds)
			if err := g.cfg.Ledger.Hold(ctx, c.id, c.key, amount); err != nil {
				offer.Release()
				return nil, holdError(err)
			}
			t.held = max(amount, 1)
		}
		t.jobs++
		t.avoid[offer.Node.ID] = true
		req.Model = model
		job, err := g.cfg.Fleet.Dispatch(offer, req)
		if err == nil {
			t.ask = askOf(offer)
			return job, nil
		}
		lastErr = err
	}
	if refusal != nil && t.held == 0 {
		return nil, refusal
	}
	if t.held > 0 {
		u := &store.Usage{RequestID: c.id, AccountID: c.key.AccountID, KeyID: c.key.ID, Model: req.Model, Endpoint: req.Kind,
			Outcome: store.OutcomeError, Error: "no node could take the request", CreatedAt: c.start}
		if err := g.cfg.Ledger.Void(context.WithoutCancel(ctx), c.id, u); err != nil {
			g.log.Error("void hold", logRequestID, c.id, "err", err)
		}
	}
	msg := "no node is left to try"
	if err := cmp.Or(lastErr, t.failure); err != nil {
		msg = err.Error()
	}
	return nil, &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Code: api.CodeNoProviderAvailable,
		Message: fmt.Sprintf("No node could take this request: %s. Retry shortly.", msg)}
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

// refusal turns a job's failure before its first token into the buyer's error.
func refusal(job *fleet.Job, err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) && requestRefused(pe) {
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
