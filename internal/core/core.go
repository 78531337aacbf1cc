// Package core runs one billed request, whoever asks: hold, match, queue, dispatch, relay,
// retries and mid-stream failover, checkpoints, price, receipts and settlement. It knows
// nothing of HTTP: a caller hands it who pays, the job, the routing preferences and where the
// answer goes (Request), and gets the outcome and the bill (Outcome). The buyer API (gateway)
// calls it after authentication, decoding and rate limits; the console's playground calls it
// for the signed-in buyer's account; the prober for its probes, pinned to the node it checks.
//
// It must not be imported by the agent.
package core

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/meter"
	"github.com/shareai/shareai/internal/metrics"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/roulette"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tier"
	"github.com/shareai/shareai/internal/tracing"
)

// Log keys.
const (
	logRequestID = "request_id"
	logNode      = "node"
)

// Config configures a Core.
type Config struct {
	Store  store.Store
	Fleet  *fleet.Fleet
	Ledger *ledger.Ledger
	Log    *slog.Logger
	// StallTimeout is the most a node may stay silent in an answer before another takes over
	// (between pieces the limit adapts to the node's pace, from 1 s). Default 30s.
	StallTimeout time.Duration
	// ReceiptKey is the key the coordinator countersigns jobs' receipts with. Nil: a key made
	// for this core alone, which buyers cannot pin across restarts.
	ReceiptKey ed25519.PrivateKey
	// Metrics counts matches, failovers and the queue; nil: counted nowhere.
	Metrics *metrics.Coordinator
	// TracerProvider records the spans of requests' matches and jobs (trace.go); nil: none.
	TracerProvider trace.TracerProvider
	// Queue bounds how requests wait for a free slot (queue.go); zero fields: the defaults.
	Queue queue.Config
	// TierPrices are the tiers' price multipliers on nodes' asks; zero: tier.DefaultMultipliers.
	TierPrices tier.Multipliers
	// BatchPrice is batch lines' price multiplier on nodes' asks (Request.Batch), in basis
	// points; 0: DefaultBatchPrice.
	BatchPrice int64
	// Meter counts the tokens of the answers nodes deliver, to check their usage claims; nil:
	// a meter of the core's own.
	Meter *meter.Meter
	Now   func() time.Time
}

// Core runs requests. Call Close, before the ledger's, to store the receipts queued and hand
// their requests' bills to the ledger.
type Core struct {
	cfg      Config
	log      *slog.Logger
	affinity affinity
	roulette roulette.Rotations
	cands    candidates
	notary   *notary
	queue    *queue.Queue[*fleet.Offer, *matcher.Candidate]
	bronze   bronzeJobs // what gold may preempt
	batch    bronzeJobs // batch lines' jobs: what any live request may preempt
	said     said       // when nodes' error words were last recorded
	meter    *meter.Meter
	tracer   trace.Tracer
	tracing  bool // whether tracer records
	// stopping is cancelled by Abort: requests' contexts follow it.
	stopping context.Context
	stopAll  context.CancelCauseFunc
	inflight sync.WaitGroup // requests being served
}

// New returns a core over cfg's fleet, ledger and store.
func New(cfg Config) *Core {
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.ReceiptKey == nil {
		_, cfg.ReceiptKey, _ = ed25519.GenerateKey(rand.Reader)
	}
	if cfg.TierPrices == (tier.Multipliers{}) {
		cfg.TierPrices = tier.DefaultMultipliers
	}
	if cfg.BatchPrice <= 0 {
		cfg.BatchPrice = DefaultBatchPrice
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewCoordinator(nil)
	}
	if cfg.Meter == nil {
		cfg.Meter = meter.New()
	}
	c := &Core{cfg: cfg, log: cfg.Log, meter: cfg.Meter, tracing: tracing.Enabled(cfg.TracerProvider),
		tracer: tracing.Tracer(cfg.TracerProvider, "github.com/shareai/shareai/internal/core")}
	c.notary = newNotary(cfg.ReceiptKey, cfg.Store, func(b *ledger.Bill, u *store.Usage) { c.cfg.Ledger.SettleLater(b, u) }, cfg.Log, cfg.Now)
	c.stopping, c.stopAll = context.WithCancelCause(context.Background())
	c.affinity.now = cfg.Now
	c.queue = queue.New[*fleet.Offer, *matcher.Candidate](cfg.Queue)
	if cfg.Fleet != nil {
		cfg.Fleet.SetHandoff(c.handoff)
	}
	return c
}

// Close stores the receipts queued and hands their requests' bills to the ledger. Call it once
// no request is served any more, before the ledger's Close.
func (c *Core) Close() { c.notary.close() }

// ReceiptKey is the public half of the key the core countersigns receipts with.
func (c *Core) ReceiptKey() ed25519.PublicKey { return c.cfg.ReceiptKey.Public().(ed25519.PublicKey) }

// TierPrices are the tiers' price multipliers the core bills at.
func (c *Core) TierPrices() tier.Multipliers { return c.cfg.TierPrices }

// DefaultBatchPrice is batch lines' default price multiplier: half the ask.
const DefaultBatchPrice = 5000

// BatchPrice is batch lines' price multiplier on nodes' asks, in basis points.
func (c *Core) BatchPrice() int64 { return c.cfg.BatchPrice }

// Request is one request to run, and, once Serve has it, its state from node to node: the
// parameters serve, dispatch, relay and finish share.
type Request struct {
	// ID names the request: its hold, usage record, receipts and answer ids (req_…).
	ID string
	// Account pays the request, through Key when it is not nil: the key's caps, model list,
	// routing defaults and tier then apply too (the key's rate limits are its caller's).
	// Without a key (the console's playground) only the account's caps apply.
	Account string
	Key     *store.Key
	// Job is the buyer's request, validated (api.ChatRequest.Job): never changed.
	Job *protocol.Request
	// Routing is the buyer's routing preferences: the provider object, fallback models and
	// service tier.
	Routing api.Routing
	// Session names the buyer's conversation, for affinity within the account; "" none.
	Session string
	// Stream says the answer is streamed: delivered, checkpointed and billed as it comes.
	Stream bool
	// Start is when the request arrived; zero: when Serve is called.
	Start time.Time
	// Answer is called when a node takes the request, before any of its answer, until the
	// answer has started (a node that fails before its first token is replaced): it returns
	// where the answer is written.
	Answer func(Begin) relay.Sink

	// Offer pins the request to one offer, a slot of which the caller has taken (the prober's
	// checks): no match, no queue, no retry on another node and no failover.
	Offer *fleet.Offer
	// Ask, when set, is what the request pays per million tokens instead of the node's ask at
	// the request's tier (the probes' ask, capped).
	Ask *ledger.Ask
	// Unbilled requests hold nothing and leave no bill, usage or receipt (onboarding checks).
	Unbilled bool
	// Fund, when set, is asked to top the account up when a hold finds its balance short
	// (the platform's probes, paid from its fees); the hold is then tried again. When it
	// returns ErrUnfunded, the request runs unbilled.
	Fund func(ctx context.Context, need money.Nanos) error
	// Defer leaves the bill unsettled when the answer ends: the caller must call
	// Outcome.Settle, once it has judged the answer. (An answer that failed mid-way with no
	// node to continue it, or aborted at shutdown, is settled at once.)
	Defer bool
	// StallTimeout, when set, is the most the node may stay silent before its first token,
	// and the ceiling after it, instead of the core's (a check that asks a cold model for
	// thousands of tokens).
	StallTimeout time.Duration
	// Batch runs a batch line (internal/batch): bronze work at the batch price, in idle
	// capacity only. Its first job never waits: when the model's queue has waiters or no
	// slot is free, Serve returns ErrNoCapacity at once, holding nothing. Any live request
	// that waits may preempt it; preempted or failed over, it continues exactly, waiting
	// after every live request and for as long as ctx allows (not the queue's timeout).
	Batch bool

	prepared    bool
	usage       *store.Usage
	prefs       matcher.Prefs
	requestSort string   // the sort the request itself asked for, before the key's defaults
	models      []string // to try in order: the arm drawn (roulette.go), the requested one, then fallbacks
	arm         string   // the arm drawn, when the request has a split
	sessionKey  string   // the buyer's session within the account, for affinity
	session     string   // the node this buyer's session last used, if any
	bounds      ledger.Bounds
	held        money.Nanos     // the hold placed, raised for a dearer node unless holdFixed
	holdFixed   bool            // the buyer's limits refused to raise the hold
	jobs        int             // jobs the request has taken
	fruitless   int             // jobs in a row that failed without adding to the answer
	avoid       map[string]bool // nodes not to try: those that refused it, or just failed it
	ask         ledger.Ask      // of the node of the current attempt, fixed when it took it
	askWindow   string          // where ask comes from: the ask schedule's window ("" flat)
	surge       int64           // and the surge multiplier, basis points
	failure     error           // why the last node failed
	// parts are the work of nodes that failed mid-answer, each paid for what it delivered.
	parts      []ledger.Work
	continuing bool              // the answer started: only nodes that continue can take it
	first      *protocol.Request // the request before any continuation
	ran        []*fleet.Job      // the jobs sent, in order, for their receipts
	bill       *ledger.Bill      // once billed
	kept       bool              // its receipts and bill are handed on (keepReceipts)
	works      []ledger.Work     // what bill priced
	claimed    protocol.Usage    // the last node's usage claim
	span       trace.Span        // of the job now running
	// from and asideFrom are where the current job's answer starts in the relay's State.Text
	// and State.Aside, for the coordinator's count of its tokens.
	from, asideFrom int
	checkpointed    time.Time // when the request's bill was last checkpointed
	firstDelivered  time.Time // when the answer's first piece was delivered, for checkpoint
	// running and runningAside count the current job's text and the rest of its answer as
	// checkpoints see them grow.
	running, runningAside meter.Running
	// promptWords is the job's words with a template's slack, promptBound the most tokens it
	// may be billed, and stopBound its longest stop string's tokens, each -1 until counted
	// (checkPrompt); promptMedia says whether it holds images or audio, once counted.
	promptWords, promptBound, stopBound int
	promptMedia                         bool
	ended                               atomic.Bool // the request has ended: a checkpoint still queued is dropped
	tier                                tier.Tier   // the service tier it runs at
	queued                              time.Duration
	// paused is when a preempted answer stopped, until a node takes it over.
	paused time.Time
}

// Begin is what the answer's sink is made with, when a node takes the request.
type Begin struct {
	// Answer names the answer in OpenAI's shape: its id (chatcmpl-…, cmpl-…), the model that
	// serves it (the requested one or a fallback), when it was created and its service tier.
	Answer relay.Answer
	Node   string        // the node that took it
	Queued time.Duration // how long it waited in the queue for a slot
}

// Reserve is the tokens a key's rate limits reserve for the request until it is billed: its
// prompt, and its max_tokens when it sets one (a request without, its prompt only: the
// default bound would refuse it outright under a small limit, and its completion counts once
// billed). Valid once Prepare has returned.
func (r *Request) Reserve(l *ledger.Ledger) int {
	n := r.bounds.PromptEstimate
	if r.Job.MaxTokens > 0 {
		n += l.CompletionBound(r.Job.MaxTokens, 0)
	}
	return n
}

// Tier is the service tier the request runs at, once prepared.
func (r *Request) Tier() tier.Tier { return r.tier }

// Outcome is how a request ended: its usage record, as billed, and its bill.
type Outcome struct {
	// Usage is the request's usage record: outcome, model, node, tokens billed, timings.
	Usage *store.Usage
	// Bill is what the request was priced; nil when no node took it. An unbilled request's
	// is settled nowhere.
	Bill *ledger.Bill
	// Claimed is the usage the last node claimed, before the coordinator's checks.
	Claimed protocol.Usage
	// Queued is how long the request waited in the queue for slots.
	Queued time.Duration
	settle func(maxCompletion int, line *store.LineResult)
}

// Billed is the tokens billed (prompt and completion), 0 before any.
func (o *Outcome) Billed() int {
	if o == nil || o.Bill == nil {
		return 0
	}
	return o.Bill.PromptTokens + o.Bill.CompletionTokens
}

// Settle settles a Defer request's bill, once: as priced when maxCompletion < 0, else with at
// most maxCompletion completion tokens of the last node's, a claim above that flagged in the
// settlement as an over-claim (store.Node.Overclaims). It does nothing for other requests.
func (o *Outcome) Settle(maxCompletion int) { o.SettleWith(maxCompletion, nil) }

// SettleWith is Settle for a batch line: the settlement carries the line's result, which the
// store writes in the settlement's own transaction, only while the line still runs under the
// request's id (store.Settlement.Line). It reports whether there was a bill to settle: when
// not (no node took the request, or it was settled at once), the caller writes the result.
func (o *Outcome) SettleWith(maxCompletion int, line *store.LineResult) bool {
	if o == nil || o.settle == nil {
		return false
	}
	o.settle(maxCompletion, line)
	o.settle = nil
	return true
}

// Abort ends every request still running with a clear error (an error event on a stream, a
// 503 otherwise), each billed for what was delivered, and makes Serve return: the coordinator
// calls it when its drain deadline passes, so that no buyer sees an answer merely cut off.
func (c *Core) Abort() { c.stopAll(ErrShuttingDown) }

// Wait waits until no request is being served, or ctx is done: every request has then handed
// its bill to the ledger.
func (c *Core) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		c.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Track returns ctx as Abort cancels it, and as cancel does (the caller's own reason to end
// the request, such as its buyer going away), and counts a request in flight (Wait) until
// release is called: a caller calls it when the request arrives, so that a shutdown's drain
// covers its authentication and decoding too, before Serve (which tracks the request itself
// too).
func (c *Core) Track(ctx context.Context) (_ context.Context, cancel context.CancelCauseFunc, release func()) {
	return c.abortable(ctx)
}

// abortable returns ctx as Abort and cancel cancel it, and counts the request in flight until
// release is called. A context it returned already (Track's, then Serve's) is returned as it
// is, with its cancel: one layer of cancellation, and one registration with c.stopping,
// serves the request.
func (c *Core) abortable(ctx context.Context) (_ context.Context, cancel context.CancelCauseFunc, release func()) {
	c.inflight.Add(1)
	if t, ok := ctx.Value(abortKey{}).(*tracked); ok && t.core == c {
		return ctx, t.cancel, c.inflight.Done
	}
	ctx, cancel = context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.stopping, func() { cancel(context.Cause(c.stopping)) })
	return context.WithValue(ctx, abortKey{}, &tracked{c, cancel}), cancel, func() {
		stop()
		cancel(nil)
		c.inflight.Done()
	}
}

// tracked is the value of abortKey in a context abortable returned: its core, and what
// cancels it.
type tracked struct {
	core   *Core
	cancel context.CancelCauseFunc
}

// abortKey marks a context abortable returned (a *tracked).
type abortKey struct{}
