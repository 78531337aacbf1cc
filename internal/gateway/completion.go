package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/aside"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/meter"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tier"
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

// checkpointEvery is how often a running request's delivered bill is checkpointed.
const checkpointEvery = 2 * time.Second

// maxFruitless bounds how many jobs in a row may fail a request without adding to its answer:
// a node vanishing between being picked and receiving the job, failing before its first token,
// or failing mid-answer before delivering anything each costs one. A node that delivered part
// of the answer before failing made progress, and the count starts again; maxJobs bounds all.
const (
	maxFruitless = 6
	maxJobs      = 64
)

// serve runs a validated request on a node, relays the answer and bills it. The node is the
// best for the buyer's routing preferences among those serving the model, or the fallback
// models in order. A node that fails before its first token is replaced by another, up to
// maxFruitless in a row, without the buyer noticing.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, c *call, req *protocol.Request, stream bool, opts *api.StreamOptions, rt api.Routing, user string) error {
	t, err := g.newTry(r, c, req, rt, user)
	if err != nil {
		return err
	}
	// The key's rate limits (limits.go): admitted before the hold, given back when it ends. A
	// request reserves its prompt and its max_tokens; one without max_tokens its prompt only,
	// since the default bound (4096) would refuse it outright under a small limit: its
	// completion counts once billed.
	reserve := t.bounds.PromptEstimate
	if req.MaxTokens > 0 {
		reserve += g.cfg.Ledger.CompletionBound(req.MaxTokens, 0)
	}
	admitted, err := g.limits.admit(w.Header(), c.key, reserve)
	if err != nil {
		if ae, ok := err.(*api.Error); ok {
			g.cfg.Metrics.RateLimited(ae.Type) // requests (per minute, or concurrent) or tokens
		}
		return err
	}
	defer func() { admitted.done(t.billed) }()
	u := &store.Usage{
		RequestID: c.id, AccountID: c.key.AccountID, KeyID: c.key.ID,
		Endpoint: req.Kind, Stream: stream, CreatedAt: c.start, ServiceTier: t.tier.String(),
	}
	c.usage = u
	t.stream = stream
	defer g.cfg.Metrics.RequestStarted(stream)()
	st := &relay.State{Start: c.start}
	var sink relay.Sink
	for {
		var (
			job  *fleet.Job
			sent *protocol.Request
		)
		aside.Run(func() { job, sent, err = g.dispatch(r.Context(), c, req, t) })
		if err != nil {
			if !st.Started {
				g.keepReceipts(c, t, nil, nil) // of the jobs that refused it; dispatch voided the hold
				return err
			}
			// The answer started and no node can finish it: say so, never end it as complete.
			return g.fail(c, t, sink, u, fmt.Errorf("no node could continue the answer: %w", err))
		}
		req = sent
		t.ran = append(t.ran, job)
		if !st.Started {
			// The answer names the model that serves it: the first choice or a fallback.
			sink = newSink(w, c, req, stream, opts, t.tier)
			w.Header().Set(HeaderNode, job.Offer.Node.ID)
			w.Header().Set(HeaderQueueTime, t.queued.Round(time.Millisecond).String())
			// Time to first token counts from the end of the wait in the queue.
			st.Start = c.start.Add(t.queued)
		}
		node := job.Offer.Node
		u.Model, u.NodeID, u.Region = req.Model, node.ID, node.Region
		res, bill := g.relayJob(r, c, job, t, st, sink, u)
		endJob(t.span, job, res)
		switch {
		case errors.Is(res.Err, relay.ErrPreempted) && (res.Outcome == relay.Refused || res.Outcome == relay.Failed):
			// A gold request took the slot: not the node's fault. The answer pauses and
			// continues exactly, on this node or another, once a slot frees.
			t.fruitless--
			t.paused = g.cfg.Now()
			t.avoid = map[string]bool{}
			t.failure = fmt.Errorf("node %s was preempted", node.ID)
			if res.Outcome == relay.Failed {
				t.parts = append(t.parts, g.cutShort(t, st, job, res))
				if why := continuable(req, st); why != "" {
					return g.fail(c, t, sink, u, fmt.Errorf("the answer was preempted, and %s", why))
				}
				req = continuation(t.original(req), st.Text.String())
				t.continuing = true
			}
			g.log.Info("bronze answer preempted; it continues once a slot frees", logRequestID, c.id, logNode, node.ID, "delivered", st.Delivered)
			continue
		case res.Outcome == relay.Refused && nodeFailed(res.Err):
			job.Offer.Observe(false, 0, 0) // it counts against the node
			if node.Gone() {
				// Its connection dropped: once back, it is as good as any node.
				delete(t.avoid, node.ID)
			}
			if t.canRetry() {
				// Nothing has reached the buyer: the next node starts the answer afresh.
				g.log.Info("node failed before answering; trying another", logRequestID, c.id, logNode, node.ID, "err", res.Err)
				g.cfg.Metrics.Failover("before_first_token")
				t.failure = fmt.Errorf("node %s failed before answering: %w", node.ID, res.Err)
				continue
			}
		case res.Outcome == relay.Failed:
			job.Offer.Observe(false, 0, 0)
			t.parts = append(t.parts, g.cutShort(t, st, job, res))
			if res.Delivered > 0 {
				t.fruitless = 0 // the answer grew: a node that fails now starts a new count
			}
			if why := continuable(req, st); why != "" {
				return g.fail(c, t, sink, u, fmt.Errorf("node %s failed mid-answer (%v), and %s", node.ID, res.Err, why))
			}
			// Another node continues from exactly where this one stopped. Nodes that failed
			// earlier may take it again: a dropped node that reconnected is as good as any,
			// this one too once it is back.
			t.avoid = map[string]bool{}
			if !node.Gone() {
				t.avoid[node.ID] = true
			}
			g.log.Info("node failed mid-answer; continuing on another", logRequestID, c.id, logNode, node.ID, "err", res.Err, "delivered", st.Delivered)
			g.cfg.Metrics.Failover("mid_stream")
			req = continuation(t.original(req), st.Text.String())
			t.continuing = true
			t.failure = fmt.Errorf("node %s failed mid-answer: %w", node.ID, res.Err)
			continue
		case res.Outcome == relay.Cancelled && aborted(r.Context()):
			// Not the node's fault: the coordinator's drain deadline passed.
			return g.abort(c, t, st, sink, u, func() { t.parts = append(t.parts, g.cutShort(t, st, job, res)) })
		case res.Outcome == relay.OK:
			g.affinity.put(t.sessionKey, node.ID)
		}
		return g.finish(c, job, t, st, res, bill, u)
	}
}

// newTry reads a request's routing preferences, with its key's rules, into the state its
// attempts share. It is a function of its own so that its locals (the preferences are large)
// are not in serve's stack frame, which stays on the stack of every answer held open.
//
//go:noinline
func (g *Gateway) newTry(r *http.Request, c *call, req *protocol.Request, rt api.Routing, user string) (*try, error) {
	prefs, err := matcher.ParsePrefs(rt.Provider)
	if err != nil {
		var fe *matcher.FieldError
		if errors.As(err, &fe) {
			return nil, api.BadRequest(fe.Field, api.CodeInvalidValue, "Invalid '%s': %s.", fe.Field, fe.Msg)
		}
		return nil, api.BadRequest("provider", api.CodeInvalidValue, "Invalid 'provider': %v.", err)
	}
	requestSort := prefs.Sort
	if prefs, rt, err = g.keyRules(c.key, req.Model, prefs, rt); err != nil {
		return nil, err
	}
	tr, err := tier.Parse(cmp.Or(rt.ServiceTier, c.key.ServiceTier)) // the request's, or its key's default
	if err != nil {
		return nil, api.BadRequest("service_tier", api.CodeInvalidValue, "Invalid 'service_tier': %v.", err)
	}
	promptBytes := len(req.Messages) + len(req.Prompt)
	session := affinityKey(c, r, user)
	return &try{
		bounds: ledger.Bounds{PromptEstimate: ledger.EstimateTokens(promptBytes),
			// A template prints the tools and the response format into the prompt too, and
			// an image's tokens are far more than its URL's bytes.
			PromptTokens: ledger.PromptBound(promptBytes+len(req.Tools)+len(req.ToolChoice)+len(req.ResponseFormat)) +
				promptSlack + promptSlackTools*min(len(req.Tools), 1) + mediaTokens*mediaParts(req.Messages)},
		avoid:       map[string]bool{},
		prefs:       prefs,
		requestSort: requestSort,
		models:      modelsToTry(req.Model, rt.Models),
		sessionKey:  session,
		session:     g.affinity.get(session),
		prompt:      req,
		promptWords: -1,
		promptBound: -1,
		stopBound:   -1,
		tier:        tr,
	}, nil
}

// try is what a request's attempts on successive nodes share.
type try struct {
	prefs       matcher.Prefs
	requestSort string   // the sort the request itself asked for, before the key's defaults
	models      []string // to try in order: the requested one, then fallbacks
	sessionKey  string   // the buyer's session, for affinity
	session     string   // the node this buyer's session last used, if any
	bounds      ledger.Bounds
	held        money.Nanos     // the hold placed, raised for a dearer node unless holdFixed
	holdFixed   bool            // the buyer's limits refused to raise the hold
	jobs        int             // jobs the request has taken
	fruitless   int             // jobs in a row that failed without adding to the answer
	avoid       map[string]bool // nodes not to try: those that refused it, or just failed it
	ask         ledger.Ask      // of the node of the current attempt
	failure     error           // why the last node failed
	// parts are the work of nodes that failed mid-answer, each paid for what it delivered.
	parts      []ledger.Work
	continuing bool              // the answer started: only nodes that continue can take it
	first      *protocol.Request // the request before any continuation
	ran        []*fleet.Job      // the jobs sent, in order, for their receipts
	billed     int               // the tokens billed (prompt + completion), once billed
	span       trace.Span        // of the job now running
	stream     bool              // the answer is streamed: delivered as it comes
	// from and asideFrom are where the current job's answer starts in the relay's State.Text
	// and State.Aside, for the coordinator's count of its tokens.
	from, asideFrom int
	checkpointed    time.Time // when the request's bill was last checkpointed
	// running and runningAside count the current job's text and the rest of its answer as
	// checkpoints see them grow.
	running, runningAside meter.Running
	// prompt is the buyer's request, whose prompt nodes' claims are checked against
	// (checkPrompt): promptWords is its words with a template's slack, promptBound the most
	// tokens it may be billed, and stopBound its longest stop string's tokens, each -1 until
	// counted; promptMedia says whether it holds images or audio, once counted.
	prompt                              *protocol.Request
	promptWords, promptBound, stopBound int
	promptMedia                         bool
	ended                               atomic.Bool // the request has ended: a checkpoint still queued is dropped
	tier                                tier.Tier   // the service tier it runs at
	queued                              time.Duration
	// paused is when a preempted answer stopped, until a node takes it over.
	paused time.Time
}

// canRetry says whether the request may take another job.
func (t *try) canRetry() bool { return t.fruitless < maxFruitless && t.jobs < maxJobs }

func newSink(w http.ResponseWriter, c *call, req *protocol.Request, stream bool, opts *api.StreamOptions, tr tier.Tier) relay.Sink {
	a := relay.Answer{Model: req.Model, Created: c.start.Unix(), IncludeUsage: opts != nil && opts.IncludeUsage, ServiceTier: tr.OpenAI()}
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

// work is what the node of a job did: the usage it claims, its completion bounded by the
// coordinator's count of the answer it delivered and its prompt by the count of the prompt
// (meter.Check, checkPrompt). A claim over a count is cut down to it; when the job ended
// whole (complete) and the claim is well over, the node is flagged too: a job cut short may
// have generated tokens that never reached the buyer, and they are not billed, but they are
// no sign of a dishonest node. A completion the node never reported is its pieces, or else
// the count.
func (g *Gateway) work(t *try, st *relay.State, job *fleet.Job, used protocol.Usage, pieces, delivered int, complete bool) ledger.Work {
	n, model := job.Offer.Node, job.Offer.Model
	w := ledger.Work{NodeID: n.ID, ProviderID: n.AccountID, Ask: t.ask,
		PromptTokens: used.PromptTokens, CompletionTokens: used.CompletionTokens, DeliveredBytes: delivered}
	text, aside := st.Text.String()[t.from:], st.Aside.String()[t.asideFrom:]
	special := 1 + t.stopTokens(g, model) // an end-of-text token, or the stop string matched
	if aside != "" {
		special += 8 // the tags around reasoning and tool calls
	}
	if w.CompletionTokens <= 0 && delivered > 0 {
		w.CompletionTokens = pieces
		if pieces <= 0 {
			w.CompletionTokens = g.meter.Bound(model, text) + g.meter.Bound(model, aside)
		}
	}
	claim := w.CompletionTokens
	v := g.meter.Check(model, claim, special, text, aside)
	w.CompletionTokens = v.Billed
	// The prompt: the first node's, which the buyer pays, or a continuing node's, which also
	// read the answer so far (the platform pays that).
	extra := 0
	if len(t.parts) > 0 {
		extra = promptPerMessage
		for _, p := range t.parts {
			extra += p.CompletionTokens
		}
	}
	pv := g.checkPrompt(t, model, w.PromptTokens, extra)
	w.PromptTokens = pv.Billed
	w.Overclaimed = complete && (v.Inflated || pv.Inflated)
	if complete && !v.Inflated && !pv.Inflated && trusted(n.Level()) && aside == "" {
		// An honest answer of a verified node teaches the meter the model's ratio, where its
		// family's tokenizer is unknown.
		g.meter.Learn(model, n.AccountID, claim, text)
	}
	return w
}

// stopTokens is the most tokens of one of the request's stop strings: an engine that stops
// on one counts its tokens, which are not delivered.
func (t *try) stopTokens(g *Gateway, model string) int {
	if t.stopBound < 0 {
		t.stopBound = 0
		for _, s := range t.prompt.Stop {
			t.stopBound = max(t.stopBound, g.meter.Bound(model, s))
		}
	}
	return t.stopBound
}

// trusted says whether a node of a level (store.Level*) has passed verification.
func trusted(level string) bool { return level == store.LevelVerified || level == store.LevelTrusted }

// relayJob relays one node's answer to the buyer, a bronze job preemptible meanwhile.
func (g *Gateway) relayJob(r *http.Request, c *call, job *fleet.Job, t *try, st *relay.State, sink relay.Sink, u *store.Usage) (relay.Result, *ledger.Bill) {
	if t.tier == tier.Bronze {
		defer g.bronze.running(job)()
	}
	return g.relay(r, c, job, t, st, sink, u)
}

// relay relays one node's answer to the buyer. It returns the answer's bill when the answer
// ended whole (the bill is priced before its end is written), nil otherwise.
func (g *Gateway) relay(r *http.Request, c *call, job *fleet.Job, t *try, st *relay.State, sink relay.Sink, u *store.Usage) (relay.Result, *ledger.Bill) {
	t.from, t.asideFrom, t.running, t.runningAside = st.Text.Len(), st.Aside.Len(), meter.Running{}, meter.Running{}
	var bill *ledger.Bill
	price := func(used protocol.Usage, pieces, delivered int) (protocol.Usage, money.Nanos) {
		bill = g.cfg.Ledger.Price(c.id, t.bounds, append(slices.Clip(t.parts), g.work(t, st, job, used, pieces, delivered, true)))
		return protocol.Usage{PromptTokens: bill.PromptTokens, CompletionTokens: bill.CompletionTokens}, bill.Cost()
	}
	res := relay.Run(r.Context(), job, sink, st, relay.Options{Bill: price, Progress: func(_, pieces int) { g.checkpoint(c, t, st, job, u, pieces) },
		StallCeiling: g.cfg.StallTimeout})
	return res, bill
}

// checkpoint records, at a stream's first piece and then every checkpointEvery, the bill of
// what the buyer has received so far, so that a crash is followed by a settlement of that
// rather than by nothing: the prompt as estimated, and the completion tokens delivered (the
// pieces the node sent, within the coordinator's count of their text). It queues the
// checkpoint and returns at once. A non-streamed answer reaches the buyer whole, at its end:
// until then nothing was delivered to checkpoint.
func (g *Gateway) checkpoint(c *call, t *try, st *relay.State, job *fleet.Job, u *store.Usage, pieces int) {
	if !t.stream {
		return
	}
	now := g.cfg.Now()
	if !t.checkpointed.IsZero() && now.Sub(t.checkpointed) < checkpointEvery {
		return
	}
	t.checkpointed = now
	// The pieces delivered, within the count of their text: counted as it grows (t.running),
	// so that a long answer's checkpoints do not count it again and again.
	text, aside := st.Text.String()[t.from:], st.Aside.String()[t.asideFrom:]
	completion := pieces
	if completion <= 0 || completion > meter.Words(text)+meter.Words(aside)+1 { // none said, or maybe too many
		bound := t.running.Bound(g.meter, job.Offer.Model, text) + t.runningAside.Bound(g.meter, job.Offer.Model, aside) + 1
		if completion <= 0 || completion > bound {
			completion = bound
		}
	}
	n := job.Offer.Node
	w := ledger.Work{NodeID: n.ID, ProviderID: n.AccountID, Ask: t.ask, PromptTokens: t.bounds.PromptEstimate,
		CompletionTokens: completion, DeliveredBytes: len(text) + len(aside)}
	soFar := g.cfg.Ledger.Price(c.id, t.bounds, append(slices.Clip(t.parts), w))
	g.cfg.Ledger.CheckpointLater(soFar, u, t.ended.Load)
}

// finish records how the request ended and queues its bill: what was delivered, or nothing.
func (g *Gateway) finish(c *call, job *fleet.Job, t *try, st *relay.State, res relay.Result, bill *ledger.Bill, u *store.Usage) error {
	u.FinishReason, u.TTFT, u.Duration, u.QueueTime = res.FinishReason, st.TTFT, g.cfg.Now().Sub(c.start), t.queued
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
		bill = g.cfg.Ledger.Price(c.id, t.bounds, append(t.parts, g.work(t, st, job, used, res.Pieces, res.Delivered, false)))
	}
	if len(bill.Clamped) > 0 {
		g.log.Warn("node claimed more tokens than it delivered; billed the coordinator's count", logRequestID, c.id, logNode, job.Offer.Node.ID,
			"claimed_prompt", res.Usage.PromptTokens, "claimed_completion", res.Usage.CompletionTokens,
			"billed_prompt", bill.PromptTokens, "billed_completion", bill.CompletionTokens)
	}
	u.PromptTokens, u.CompletionTokens = bill.PromptTokens, bill.CompletionTokens
	t.billed = bill.PromptTokens + bill.CompletionTokens
	if res.Outcome == relay.OK && len(t.parts) == 0 {
		var tps float64 // the output rate after the first token, of the tokens billed
		if gen := u.Duration - t.queued - st.TTFT; gen > 0 && bill.CompletionTokens > 1 {
			tps = float64(bill.CompletionTokens-1) / gen.Seconds()
		}
		job.Offer.Observe(true, st.TTFT, tps)
	} else if res.Outcome == relay.OK {
		job.Offer.Observe(true, 0, 0)
	}
	g.keepReceipts(c, t, bill, u) // then settles
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
