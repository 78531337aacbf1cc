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

// checkpointEvery is how often a running request's delivered bill is checkpointed.
const checkpointEvery = 2 * time.Second

// firstCheckpointAfter is how long after its first piece a stream's first checkpoint waits:
// an answer that comes all at once, as most do, has ended by then, and its settlement says
// more, with no checkpoint written and dropped on the way (nor, on SQLite alone, its lazy
// hold written open for it).
const firstCheckpointAfter = 20 * time.Millisecond

// maxFruitless bounds how many jobs in a row may fail a request without adding to its answer:
// a node vanishing between being picked and receiving the job, failing before its first token,
// or failing mid-answer before delivering anything each costs one. A node that delivered part
// of the answer before failing made progress, and the count starts again; maxJobs bounds all.
const (
	maxFruitless = 6
	maxJobs      = 64
)

// Serve runs a request on a node, relays the answer to its sink and bills it. The node is the
// best for the buyer's routing preferences among those serving the model, or the fallback
// models in order. A node that fails before its first token is replaced by another, up to
// maxFruitless in a row, without the buyer noticing; one that fails mid-answer is continued
// by another from exactly where it stopped. The error is the buyer's (an *api.Error, whose
// cause it wraps), for an answer that did not start; an answer that started and could not be
// finished ends in its sink, and Outcome.Usage says so. The Outcome is never nil.
func (c *Core) Serve(ctx context.Context, r *Request) (*Outcome, error) {
	if err := c.Prepare(r); err != nil {
		return &Outcome{}, err
	}
	ctx, _, release := c.abortable(ctx)
	defer release()
	err := c.serve(ctx, r)
	out := &Outcome{Usage: r.usage, Bill: r.bill, Claimed: r.claimed, Queued: r.queued}
	if r.Defer && !r.kept && r.bill != nil && !r.Unbilled {
		out.settle = func(maxCompletion int, line *store.LineResult) { c.settleDeferred(ctx, r, maxCompletion, line) }
	}
	return out, err
}

// serve is Serve's loop over the request's jobs: one until the answer ends, more after
// failures and preemptions.
func (c *Core) serve(ctx context.Context, r *Request) error {
	req := r.Job
	st := &relay.State{Start: r.Start}
	var sink relay.Sink
	for {
		var (
			job  *fleet.Job
			sent *protocol.Request
			err  error
		)
		aside.Run(func() { job, sent, err = c.dispatch(ctx, r, req) })
		if err != nil {
			if !st.Started {
				c.keepReceipts(ctx, r, nil) // of the jobs that refused it; dispatch voided the hold
				return err
			}
			// The answer started and no node can finish it: say so, never end it as complete.
			return c.fail(ctx, r, sink, fmt.Errorf("no node could continue the answer: %w", err))
		}
		req = sent
		r.ran = append(r.ran, job)
		node := job.Offer.Node
		if !st.Started {
			// The answer names the model that serves it, and the node: this one, until the
			// answer starts (a node may fail before its first token).
			sink = r.Answer(Begin{Answer: r.answer(req.Model), Node: node.ID, Queued: r.queued})
			// Time to first token counts from the end of the wait in the queue.
			st.Start = r.Start.Add(r.queued)
		}
		u := r.usage
		u.Model, u.NodeID, u.Region = req.Model, node.ID, node.Region
		res, bill := c.relayJob(ctx, r, job, st, sink)
		endJob(r.span, job, res)
		r.claimed = res.Usage
		switch {
		case errors.Is(res.Err, relay.ErrPreempted) && (res.Outcome == relay.Refused || res.Outcome == relay.Failed):
			// A gold request took the slot: not the node's fault. The answer pauses and
			// continues exactly, on this node or another, once a slot frees.
			r.fruitless--
			r.paused = c.cfg.Now()
			r.avoid = map[string]bool{}
			r.failure = fmt.Errorf("node %s was preempted", node.ID)
			if res.Outcome == relay.Failed {
				r.parts = append(r.parts, c.cutShort(r, st, job, res))
				if why := continuable(req, st); why != "" {
					return c.fail(ctx, r, sink, fmt.Errorf("the answer was preempted, and %s", why))
				}
				req = continuation(r.original(req), st.Text.String())
				r.continuing = true
			}
			c.log.Info("bronze answer preempted; it continues once a slot frees", logRequestID, r.ID, logNode, node.ID, "delivered", st.Delivered)
			continue
		case res.Outcome == relay.Refused && nodeFailed(res.Err):
			c.nodeSaid(ctx, r, node, res.Err)
			r.observe(job, false, 0, 0) // it counts against the node
			if node.Gone() {
				// Its connection dropped: once back, it is as good as any node.
				delete(r.avoid, node.ID)
			}
			if r.canRetry() {
				// Nothing has reached the buyer: the next node starts the answer afresh.
				c.log.Info("node failed before answering; trying another", logRequestID, r.ID, logNode, node.ID, "err", res.Err)
				c.cfg.Metrics.Failover("before_first_token")
				r.failure = nodeFailure(node.ID, "failed before answering", res.Err)
				continue
			}
		case res.Outcome == relay.Failed:
			c.nodeSaid(ctx, r, node, res.Err)
			r.observe(job, false, 0, 0)
			r.parts = append(r.parts, c.cutShort(r, st, job, res))
			if res.Delivered > 0 {
				r.fruitless = 0 // the answer grew: a node that fails now starts a new count
			}
			if why := r.continuable(req, st); why != "" {
				return c.fail(ctx, r, sink, &nodeError{msg: fmt.Sprintf("node %s failed mid-answer (%s), and %s", node.ID, shown(res.Err), why), cause: res.Err})
			}
			// Another node continues from exactly where this one stopped. Nodes that failed
			// earlier may take it again: a dropped node that reconnected is as good as any,
			// this one too once it is back.
			r.avoid = map[string]bool{}
			if !node.Gone() {
				r.avoid[node.ID] = true
			}
			c.log.Info("node failed mid-answer; continuing on another", logRequestID, r.ID, logNode, node.ID, "err", res.Err, "delivered", st.Delivered)
			c.cfg.Metrics.Failover("mid_stream")
			req = continuation(r.original(req), st.Text.String())
			r.continuing = true
			r.failure = nodeFailure(node.ID, "failed mid-answer", res.Err)
			continue
		case res.Outcome == relay.Cancelled && aborted(ctx):
			// Not the node's fault: the coordinator's drain deadline passed.
			return c.abort(ctx, r, st, sink, func() { r.parts = append(r.parts, c.cutShort(r, st, job, res)) })
		case res.Outcome == relay.OK:
			c.affinity.put(r.sessionKey, node.ID)
		}
		return c.finish(ctx, r, job, st, res, bill)
	}
}

// continuable says why the request's answer, started, cannot go on on another node, or "".
func (r *Request) continuable(req *protocol.Request, st *relay.State) string {
	if r.Offer != nil {
		return "the request is pinned to its node"
	}
	return continuable(req, st)
}

// answer names the request's answer, served by model.
func (r *Request) answer(model string) relay.Answer {
	a := relay.Answer{Model: model, Created: r.Start.Unix(), ServiceTier: r.tier.OpenAI()}
	suffix := strings.TrimPrefix(r.ID, "req_")
	if r.Job.Kind == protocol.KindChat {
		a.ID = "chatcmpl-" + suffix
	} else {
		a.ID = "cmpl-" + suffix
	}
	return a
}

// Prepare reads a request's routing preferences, with its key's rules, into the state its
// attempts share, and makes its usage record: it returns the buyer's error (400, 403) of
// preferences that cannot be met. Serve calls it when the caller did not; a caller calls it
// first to know what the request reserves (Reserve). It is a function of its own so that its
// locals (the preferences are large) are not in serve's stack frame, which stays on the stack
// of every answer held open.
//
//go:noinline
func (c *Core) Prepare(r *Request) error {
	if r.prepared {
		return nil
	}
	if r.Start.IsZero() {
		r.Start = c.cfg.Now()
	}
	if r.Key != nil {
		r.Account = r.Key.AccountID
	}
	prefs, err := matcher.ParsePrefs(r.Routing.Provider)
	if err != nil {
		if fe, ok := errors.AsType[*matcher.FieldError](err); ok {
			return api.BadRequest(fe.Field, api.CodeInvalidValue, "Invalid '%s': %s.", fe.Field, fe.Msg)
		}
		return api.BadRequest("provider", api.CodeInvalidValue, "Invalid 'provider': %v.", err)
	}
	requestSort := prefs.Sort
	rt := r.Routing
	var keyTier, keyID string
	if r.Key != nil {
		if prefs, rt, err = c.keyRules(r.Key, r.Job.Model, prefs, rt); err != nil {
			return err
		}
		keyTier, keyID = r.Key.ServiceTier, r.Key.ID
	}
	tr, err := tier.Parse(cmp.Or(rt.ServiceTier, keyTier)) // the request's, or its key's default
	if err != nil {
		return api.BadRequest("service_tier", api.CodeInvalidValue, "Invalid 'service_tier': %v.", err)
	}
	if r.Batch {
		tr = tier.Bronze // batch work is bronze, whatever the line or its key says
	}
	req := r.Job
	promptBytes := len(req.Messages) + len(req.Prompt)
	r.bounds = ledger.Bounds{PromptEstimate: ledger.EstimateTokens(promptBytes),
		// A template prints the tools and the response format into the prompt too, and
		// an image's tokens are far more than its URL's bytes.
		PromptTokens: ledger.PromptBound(promptBytes+len(req.Tools)+len(req.ToolChoice)+len(req.ResponseFormat)) +
			promptSlack + promptSlackTools*min(len(req.Tools), 1) + mediaTokens*mediaParts(req.Messages)}
	r.avoid = map[string]bool{}
	r.prefs, r.requestSort = prefs, requestSort
	models, split, err := c.drawArm(r, rt.Models)
	if err != nil {
		return err
	}
	r.models = models
	if r.Session != "" {
		r.sessionKey = r.Account + "\x00" + r.Session
		r.session = c.affinity.get(r.sessionKey)
	}
	r.promptWords, r.promptBound, r.stopBound = -1, -1, -1
	r.tier = tr
	r.usage = &store.Usage{RequestID: r.ID, AccountID: r.Account, KeyID: keyID,
		Endpoint: req.Kind, Stream: r.Stream, CreatedAt: r.Start, ServiceTier: tr.String(), Split: split}
	r.prepared = true
	return nil
}

// canRetry says whether the request may take another job.
func (r *Request) canRetry() bool {
	return r.fruitless < maxFruitless && r.jobs < maxJobs && (r.Offer == nil || r.jobs == 0)
}

// observe records how a job went in its offer's measurements (reliability, time to first
// token, output rate), which rank nodes and buyers see: for buyers' requests, not for checks
// pinned to a node, whose prompts and timing are the prober's.
func (r *Request) observe(job *fleet.Job, ok bool, ttft time.Duration, tps float64) {
	if r.Offer == nil {
		job.Offer.Observe(ok, ttft, tps)
	}
}

// price prices the work of the request's nodes, and keeps what it priced.
func (c *Core) price(r *Request, works []ledger.Work) *ledger.Bill {
	r.works = works
	r.bill = c.cfg.Ledger.Price(r.ID, r.bounds, works)
	return r.bill
}

// work is what the node of a job did: the usage it claims, its completion bounded by the
// coordinator's count of the answer it delivered and its prompt by the count of the prompt
// (meter.Check, checkPrompt). A claim over a count is cut down to it; when the job ended
// whole (complete) and the claim is well over, the node is flagged too: a job cut short may
// have generated tokens that never reached the buyer, and they are not billed, but they are
// no sign of a dishonest node. A completion the node never reported is its pieces, or else
// the count.
func (c *Core) work(r *Request, st *relay.State, job *fleet.Job, used protocol.Usage, pieces, delivered int, complete bool) ledger.Work {
	n, model := job.Offer.Node, job.Offer.Model
	w := ledger.Work{NodeID: n.ID, ProviderID: n.AccountID, Ask: r.ask, AskWindow: r.askWindow, Surge: r.surge,
		PromptTokens: used.PromptTokens, CompletionTokens: used.CompletionTokens, DeliveredBytes: delivered}
	text, aside := st.Text.String()[r.from:], st.Aside.String()[r.asideFrom:]
	special := 1 + r.stopTokens(c, model) // an end-of-text token, or the stop string matched
	if aside != "" {
		special += 8 // the tags around reasoning and tool calls
	}
	if w.CompletionTokens <= 0 && delivered > 0 {
		w.CompletionTokens = pieces
		if pieces <= 0 {
			w.CompletionTokens = c.meter.Bound(model, text) + c.meter.Bound(model, aside)
		}
	}
	claim := w.CompletionTokens
	v := c.meter.Check(model, claim, special, text, aside)
	w.CompletionTokens = v.Billed
	// The prompt: the first node's, which the buyer pays, or a continuing node's, which also
	// read the answer so far (the platform pays that).
	extra := 0
	if len(r.parts) > 0 {
		extra = promptPerMessage
		for _, p := range r.parts {
			extra += p.CompletionTokens
		}
	}
	pv := c.checkPrompt(r, model, w.PromptTokens, extra)
	w.PromptTokens = pv.Billed
	w.Overclaimed = complete && (v.Inflated || pv.Inflated)
	if complete && !v.Inflated && !pv.Inflated && trusted(n.Level()) && aside == "" && r.Offer == nil {
		// An honest answer of a verified node to a buyer teaches the meter the model's ratio,
		// where its family's tokenizer is unknown (a check's prompts are not buyers').
		c.meter.Learn(model, n.AccountID, claim, text)
	}
	return w
}

// stopTokens is the most tokens of one of the request's stop strings: an engine that stops
// on one counts its tokens, which are not delivered.
func (r *Request) stopTokens(c *Core, model string) int {
	if r.stopBound < 0 {
		r.stopBound = 0
		for _, s := range r.Job.Stop {
			r.stopBound = max(r.stopBound, c.meter.Bound(model, s))
		}
	}
	return r.stopBound
}

// trusted says whether a node of a level (store.Level*) has passed verification.
func trusted(level string) bool { return level == store.LevelVerified || level == store.LevelTrusted }

// relayJob relays one node's answer to the sink, a bronze job preemptible meanwhile.
func (c *Core) relayJob(ctx context.Context, r *Request, job *fleet.Job, st *relay.State, sink relay.Sink) (relay.Result, *ledger.Bill) {
	switch {
	case r.Batch:
		defer c.batch.running(job)()
	case r.tier == tier.Bronze:
		defer c.bronze.running(job)()
	}
	return c.relay(ctx, r, job, st, sink)
}

// relay relays one node's answer to the sink. It returns the answer's bill when the answer
// ended whole (the bill is priced before its end is written), nil otherwise.
func (c *Core) relay(ctx context.Context, r *Request, job *fleet.Job, st *relay.State, sink relay.Sink) (relay.Result, *ledger.Bill) {
	r.from, r.asideFrom, r.running, r.runningAside = st.Text.Len(), st.Aside.Len(), meter.Running{}, meter.Running{}
	var bill *ledger.Bill
	price := func(used protocol.Usage, pieces, delivered int) (protocol.Usage, money.Nanos) {
		bill = c.price(r, append(slices.Clip(r.parts), c.work(r, st, job, used, pieces, delivered, true)))
		return protocol.Usage{PromptTokens: bill.PromptTokens, CompletionTokens: bill.CompletionTokens}, bill.Cost()
	}
	res := relay.Run(ctx, job, sink, st, relay.Options{Bill: price, Progress: func(_, pieces int) { c.checkpoint(r, st, job, pieces) },
		StallCeiling: cmp.Or(r.StallTimeout, c.cfg.StallTimeout)})
	return res, bill
}

// checkpoint records, at a stream's first piece and then every checkpointEvery, the bill of
// what the buyer has received so far, so that a crash is followed by a settlement of that
// rather than by nothing: the prompt as estimated, and the completion tokens delivered (the
// pieces the node sent, within the coordinator's count of their text). It queues the
// checkpoint and returns at once. A non-streamed answer reaches the buyer whole, at its end:
// until then nothing was delivered to checkpoint.
func (c *Core) checkpoint(r *Request, st *relay.State, job *fleet.Job, pieces int) {
	if !r.Stream || r.Unbilled {
		return
	}
	now := c.cfg.Now()
	if r.firstDelivered.IsZero() {
		r.firstDelivered = now
	}
	switch {
	case r.checkpointed.IsZero() && now.Sub(r.firstDelivered) < firstCheckpointAfter:
		return
	case !r.checkpointed.IsZero() && now.Sub(r.checkpointed) < checkpointEvery:
		return
	}
	r.checkpointed = now
	// The pieces delivered, within the count of their text: counted as it grows (r.running),
	// so that a long answer's checkpoints do not count it again and again.
	text, aside := st.Text.String()[r.from:], st.Aside.String()[r.asideFrom:]
	completion := pieces
	if completion <= 0 || completion > meter.Words(text)+meter.Words(aside)+1 { // none said, or maybe too many
		bound := r.running.Bound(c.meter, job.Offer.Model, text) + r.runningAside.Bound(c.meter, job.Offer.Model, aside) + 1
		if completion <= 0 || completion > bound {
			completion = bound
		}
	}
	n := job.Offer.Node
	w := ledger.Work{NodeID: n.ID, ProviderID: n.AccountID, Ask: r.ask, AskWindow: r.askWindow, Surge: r.surge, PromptTokens: r.bounds.PromptEstimate,
		CompletionTokens: completion, DeliveredBytes: len(text) + len(aside)}
	soFar := c.cfg.Ledger.Price(r.ID, r.bounds, append(slices.Clip(r.parts), w))
	c.cfg.Ledger.CheckpointLater(soFar, r.usage, r.ended.Load)
}

// finish records how the request ended and queues its bill: what was delivered, or nothing.
func (c *Core) finish(ctx context.Context, r *Request, job *fleet.Job, st *relay.State, res relay.Result, bill *ledger.Bill) error {
	u := r.usage
	u.FinishReason, u.TTFT, u.Duration, u.QueueTime = res.FinishReason, st.TTFT, c.cfg.Now().Sub(r.Start), r.queued
	var reqErr error
	switch res.Outcome {
	case relay.OK:
		u.Outcome = store.OutcomeOK
	case relay.Cancelled:
		u.Outcome, u.Error = store.OutcomeCancelled, "buyer disconnected"
	case relay.Failed:
		u.Outcome, u.Error = store.OutcomeError, shown(res.Err)
	case relay.Refused:
		u.Outcome, u.Error = store.OutcomeError, shown(res.Err)
		reqErr = refusal(job, res.Err)
		if ae, ok := errors.AsType[*api.Error](reqErr); ok && ae.Status == http.StatusBadRequest {
			u.Outcome = store.OutcomeRejected
		}
	}
	switch {
	case bill != nil:
	case res.Outcome == relay.Refused:
		bill = c.price(r, nil) // nothing was delivered: nothing to pay
	default:
		// Cut short: the buyer pays for what was delivered. A node stopped before it reported
		// usage read the prompt all the same: bill the coordinator's estimate of it.
		used := res.Usage
		if used.PromptTokens == 0 {
			used.PromptTokens = r.bounds.PromptEstimate
		}
		bill = c.price(r, append(r.parts, c.work(r, st, job, used, res.Pieces, res.Delivered, false)))
	}
	if len(bill.Clamped) > 0 {
		c.log.Warn("node claimed more tokens than it delivered; billed the coordinator's count", logRequestID, r.ID, logNode, job.Offer.Node.ID,
			"claimed_prompt", res.Usage.PromptTokens, "claimed_completion", res.Usage.CompletionTokens,
			"billed_prompt", bill.PromptTokens, "billed_completion", bill.CompletionTokens)
	}
	u.PromptTokens, u.CompletionTokens = bill.PromptTokens, bill.CompletionTokens
	if res.Outcome == relay.OK && len(r.parts) == 0 {
		var tps float64 // the output rate after the first token, of the tokens billed
		if gen := u.Duration - r.queued - st.TTFT; gen > 0 && bill.CompletionTokens > 1 {
			tps = float64(bill.CompletionTokens-1) / gen.Seconds()
		}
		r.observe(job, true, st.TTFT, tps)
	} else if res.Outcome == relay.OK {
		r.observe(job, true, 0, 0)
	}
	if res.Outcome == relay.Refused && !nodeFailed(res.Err) {
		c.nodeSaid(ctx, r, job.Offer.Node, res.Err) // the engine's words on a request it refused
	}
	if !r.Defer {
		c.keepReceipts(ctx, r, bill) // then settles
	}
	if res.Outcome != relay.OK {
		c.log.Debug("request ended early", logRequestID, r.ID, logNode, job.Offer.Node.ID, "outcome", u.Outcome, "err", res.Err)
	}
	return reqErr
}

// settleDeferred settles a Defer request's bill (Outcome.Settle): with the last node's
// completion cut to maxCompletion, and the node flagged, when it claimed more.
func (c *Core) settleDeferred(ctx context.Context, r *Request, maxCompletion int, line *store.LineResult) {
	bill := r.bill
	if n := len(r.works); maxCompletion >= 0 && n > 0 && r.works[n-1].CompletionTokens > maxCompletion {
		works := slices.Clone(r.works)
		last := &works[n-1]
		last.CompletionTokens = maxCompletion
		bill = c.price(r, works)
		if !slices.Contains(bill.Settlement.Flagged, last.NodeID) {
			bill.Settlement.Flagged = append(bill.Settlement.Flagged, last.NodeID)
		}
		r.usage.PromptTokens, r.usage.CompletionTokens = bill.PromptTokens, bill.CompletionTokens
	}
	bill.Settlement.Line = line
	c.keepReceipts(ctx, r, bill)
}

// nodeFailed tells a node's own failure (it vanished, its engine broke or is overloaded) from
// the engine refusing the request itself, which another node would refuse too.
func nodeFailed(err error) bool {
	pe, ok := errors.AsType[*protocol.Error](err)
	return !ok || !requestRefused(pe)
}

func requestRefused(pe *protocol.Error) bool {
	return pe.Status >= 400 && pe.Status < 500 && pe.Status != http.StatusNotFound && pe.Status != http.StatusTooManyRequests
}

// refusal turns a job's failure before its first token into the buyer's error. The engine's
// own words are a stranger's machine's (a stack trace, "CUDA out of memory", a path): they
// are kept as the error's cause, for the log and the usage record, and never shown.
func refusal(job *fleet.Job, err error) error {
	if pe, ok := errors.AsType[*protocol.Error](err); ok && requestRefused(pe) {
		status, msg := http.StatusBadRequest, "The node's inference engine rejected the request as invalid: check that the prompt fits the model's context, and the parameters its engine supports."
		if pe.Status == http.StatusRequestEntityTooLarge {
			status, msg = pe.Status, "The node's inference engine rejected the request as too large for it: shorten the prompt or lower max_tokens."
		}
		return &api.Error{Status: status, Type: api.TypeInvalidRequest, Code: "rejected_by_engine", Message: msg, Cause: err}
	}
	return &api.Error{Status: http.StatusBadGateway, Type: api.TypeServer, Code: api.CodeProviderError,
		Message: fmt.Sprintf("Node %s failed before answering. Retry the request.", job.Offer.Node.ID), Cause: err}
}
