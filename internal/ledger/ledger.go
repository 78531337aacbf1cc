// Package ledger prices requests and moves the money: it places a hold for the most a request
// can cost before it runs, bills what was delivered when it ends, and settles the bill in the
// store in batches (group commit), each settlement still atomic; on a store whose writes run
// one at a time (SQLite), the holds, settlements and checkpoints queued together commit in one
// transaction. It also releases providers'
// pending earnings when their settlement delay has passed, and closes holds left open by a
// crash.
//
// It imports store and money; it must not import the gateway, fleet or relay.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shareai/shareai/internal/metrics"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// Config configures a Ledger.
type Config struct {
	Store store.Store
	// FeeBasisPoints is the platform fee added to the node's ask, in 1/100 of a percent
	// (500 = 5%).
	FeeBasisPoints int
	// DefaultMaxTokens bounds the completion of a request without max_tokens, for its hold and
	// its bill. Default 4096.
	DefaultMaxTokens int
	// SettlementDelay is how long providers' earnings stay pending (and can be clawed back)
	// before they become available. Default 72h.
	SettlementDelay time.Duration
	// Metrics counts holds and settlements; nil: counted nowhere.
	Metrics *metrics.Coordinator
	Log     *slog.Logger
	Now     func() time.Time

	// Replica names the coordinator replica the ledger places holds for, and whose holds it
	// recovers; "": holds placed without a name, and Recover closes every open hold.
	Replica string
	// Shared says other replicas share the store (a PostgreSQL database, or replicas joined
	// by a bus): Recover then closes only the replica's own holds, the unowned ones and those
	// of replicas whose lease expired, and RunLease also sweeps for expired peers. False: the
	// replica is alone, and Recover closes every open hold, as a single process always did.
	Shared bool
	// LeaseTTL is how long a replica's lease lasts from its last renewal: a replica silent
	// for longer is dead to its peers, which close its open holds. Default 15s. Keep clocks
	// in sync well within it.
	LeaseTTL time.Duration
	// LeaseRenew is how often RunLease renews the lease. Default LeaseTTL/3.
	LeaseRenew time.Duration
	// LazyFor is how long a hold may stay unwritten, held in memory, when the ledger is alone
	// on a store with SerialWrites (SQLite): a request that settles sooner writes its hold
	// once, closed, in its settlement's transaction, and a crash loses with the hold only its
	// request, which recovery would void; one that runs longer has it written open within
	// about 1.5×LazyFor, to be recovered as before. Default 100ms; negative: every hold is
	// written at once.
	LazyFor time.Duration
	// GroupCommit is how long, on a store with SerialWrites (SQLite), queued settlements and
	// checkpoints wait for others to share their commit, when nothing else waits for it: a
	// commit's WAL frames and sync then serve several requests even one request at a time (c=1:
	// about 30% less CPU a request in BenchmarkPath). A crash loses what waited with the commit it was waiting
	// for, as it loses a commit in progress: such a request's hold, open or lazy, is recovered
	// as if it had never settled (settled at its checkpoint, or voided). A hold and a
	// settlement a caller waits for (Settle) commit at once, as does Flush. Default 40ms
	// (against 10ms: 5–10% less CPU a request, and a lower p99 at c=1); negative: never wait.
	GroupCommit time.Duration
}

// Ledger bills requests.
type Ledger struct {
	cfg Config
	log *slog.Logger
	// The queues of holds, settlements and checkpoints. With a store whose writes run one at a
	// time (SQLite), they are one queue, each batch of which commits in one transaction
	// (store.Commit): the holds waiting, the settlements and checkpoints queued, all together.
	// Otherwise (PostgreSQL) each commits its own batches, side by side with the others'.
	holds, settles, checkpoints *batcher[write]

	leaseMu sync.Mutex  // guards the lease against renewal racing its release at Close
	leased  atomic.Bool // the lease was renewed once since New
	closed  bool        // by leaseMu: released

	lazy     bool          // holds are placed Lazy
	stopLazy chan struct{} // closed by Close: writeLazy stops
	stopOnce sync.Once
	lazyDone chan struct{} // closed when writeLazy has stopped
}

// New returns a ledger. Call Close to settle what is queued.
func New(cfg Config) *Ledger {
	if cfg.DefaultMaxTokens <= 0 {
		cfg.DefaultMaxTokens = 4096
	}
	if cfg.SettlementDelay <= 0 {
		cfg.SettlementDelay = 72 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewCoordinator(nil)
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.LeaseRenew <= 0 {
		cfg.LeaseRenew = cfg.LeaseTTL / 3
	}
	l := &Ledger{cfg: cfg, log: cfg.Log}
	switch {
	case cfg.Store == nil:
	case cfg.Store.SerialWrites():
		if cfg.GroupCommit == 0 {
			l.cfg.GroupCommit = 40 * time.Millisecond
		}
		q := newBatcher(l.commit, max(l.cfg.GroupCommit, 0))
		l.holds, l.settles, l.checkpoints = q, q, q
		if !cfg.Shared && cfg.LazyFor >= 0 {
			if cfg.LazyFor == 0 {
				l.cfg.LazyFor = 100 * time.Millisecond
			}
			l.lazy, l.stopLazy, l.lazyDone = true, make(chan struct{}), make(chan struct{})
			go l.writeLazy()
		}
	default:
		l.holds, l.settles, l.checkpoints = newBatcher(l.commit, 0), newBatcher(l.commit, 0), newBatcher(l.commit, 0)
	}
	return l
}

// Replica returns the name of the replica the ledger places holds for.
func (l *Ledger) Replica() string { return l.cfg.Replica }

// write is an item of the ledger's queues: a hold to place, a settlement, a checkpoint, the
// lazy holds placed before a time to write open, or a flush (nothing to write: its caller
// waits for what was queued before it). Exactly one is set.
type write struct {
	hold       *store.Hold
	settlement *store.Settlement
	checkpoint *checkpoint
	lazyBefore time.Time
	flush      bool
}

// Flush commits the holds, settlements and checkpoints queued before it, ending their group
// commit's wait, and returns once they have committed (their own errors go where they always
// go): for a caller that must see all the ledger has been given done, such as a benchmark that
// reads the CPU it took.
func (l *Ledger) Flush(ctx context.Context) error {
	if l.holds == nil {
		return nil
	}
	for _, q := range slices.Compact([]*batcher[write]{l.holds, l.settles, l.checkpoints}) {
		if err := q.do(ctx, write{flush: true}); err != nil {
			return err
		}
	}
	return nil
}

// writeLazy has the lazy holds older than LazyFor written open, every LazyFor/2, until Close.
func (l *Ledger) writeLazy() {
	defer close(l.lazyDone)
	t := time.NewTicker(l.cfg.LazyFor / 2)
	defer t.Stop()
	for {
		select {
		case <-l.stopLazy:
			return
		case <-t.C:
			l.holds.queue(write{lazyBefore: l.cfg.Now().Add(-l.cfg.LazyFor)}, func(err error) {
				if err != nil && !errors.Is(err, errClosed) {
					l.log.Warn("write holds open", "err", err)
				}
			})
		}
	}
}

// commit commits a batch of writes in one store.Commit, counting the holds and settlements and
// the money they move. The replica's lease is taken before its first hold, so that no hold of
// a live replica ever looks like a dead one's. A settlement of a hold closed already
// (store.ErrClosed) moved nothing and is not counted; a checkpoint whose request has ended is
// dropped, the request's settlement saying more.
func (l *Ledger) commit(ctx context.Context, ws []write) []error {
	errs := make([]error, len(ws))
	var w store.Writes
	var holds, settlements, checkpoints []int // their places in ws
	for i, x := range ws {
		switch {
		case x.hold != nil:
			w.Holds = append(w.Holds, x.hold)
			holds = append(holds, i)
		case x.settlement != nil:
			w.Settlements = append(w.Settlements, x.settlement)
			settlements = append(settlements, i)
		case x.flush:
		case !x.lazyBefore.IsZero():
			if x.lazyBefore.After(w.WriteLazy) {
				w.WriteLazy = x.lazyBefore
			}
			checkpoints = append(checkpoints, i) // its error is the checkpoints'
		case x.checkpoint.ended == nil || !x.checkpoint.ended():
			w.Checkpoints = append(w.Checkpoints, x.checkpoint.s)
			checkpoints = append(checkpoints, i)
		}
	}
	if len(holds) > 0 && l.cfg.Replica != "" && !l.leased.Load() {
		if err := l.RenewLease(ctx); err != nil {
			for _, i := range holds {
				errs[i] = err
				l.cfg.Metrics.HoldPlaced("error")
			}
			w.Holds, holds = nil, nil
		}
	}
	holdErrs, settleErrs, checkpointErr := l.cfg.Store.Commit(ctx, &w)
	for j, err := range holdErrs {
		errs[holds[j]] = err
		l.holdPlaced(err)
	}
	for j, err := range settleErrs {
		errs[settlements[j]] = err
		switch s := w.Settlements[j]; {
		case err == nil:
			l.cfg.Metrics.Settled(s.Debit, s.Fee, s.Subsidy)
		case !errors.Is(err, store.ErrClosed):
			l.cfg.Metrics.SettleFailed()
		}
	}
	for _, i := range checkpoints {
		errs[i] = checkpointErr
	}
	return errs
}

// Close places and settles what is queued, and stops. It releases the replica's lease: holds
// still open then (requests that outlived the drain) are its peers' to close, or its own at
// its next start.
func (l *Ledger) Close() {
	if l.holds == nil {
		return
	}
	if l.lazy {
		l.stopOnce.Do(func() { close(l.stopLazy) })
		<-l.lazyDone
	}
	l.holds.close()
	l.checkpoints.close()
	l.settles.close()
	l.leaseMu.Lock()
	defer l.leaseMu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	if l.cfg.Replica != "" && l.leased.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.cfg.Store.ReleaseLease(ctx, l.cfg.Replica); err != nil {
			l.log.Warn("release the replica's lease: peers take its open holds once it expires", "err", err)
		}
	}
}

// Ask is a node's price for a model: USD per million input and output tokens, as nano-dollars.
type Ask struct {
	Input, Output money.Price
}

// Bounds are the most a request can use: its prompt's tokens (an upper bound, not an estimate)
// and its completion's.
type Bounds struct {
	PromptTokens     int
	CompletionTokens int
	// PromptEstimate is the coordinator's own estimate of the prompt's tokens, billed instead
	// of a node's claim beyond PromptTokens.
	PromptEstimate int
}

// EstimateTokens is the coordinator's estimate of the tokens in n bytes of text: about four
// bytes a token, and at least one token for any text.
func EstimateTokens(n int) int {
	if n <= 0 {
		return 0
	}
	return (n + 3) / 4
}

// PromptBound is an upper bound of a prompt's tokens from the size of the request's messages
// (as JSON) or prompt: a token is at least one byte of text, and the JSON around each message
// outweighs the few tokens a chat template adds.
func PromptBound(promptBytes int) int { return promptBytes + 16 }

// CompletionBound is max_tokens, or the ledger's default when absent, within the context.
func (l *Ledger) CompletionBound(maxTokens, contextLength int) int {
	n := maxTokens
	if n <= 0 {
		n = l.cfg.DefaultMaxTokens
		if contextLength > 0 {
			n = min(n, contextLength)
		}
	}
	return n
}

// BuyerPrice is what a buyer pays per million tokens at a price p (an ask at the request's
// tier): p and the platform fee on it.
func (l *Ledger) BuyerPrice(p money.Price) money.Price {
	return p + money.Price(money.Fee(money.Nanos(p), l.cfg.FeeBasisPoints))
}

// MaxCost is the most a request within b can cost on a node with ask a, fee included.
func (l *Ledger) MaxCost(a Ask, b Bounds) money.Nanos {
	net := a.Input.Cost(b.PromptTokens) + a.Output.Cost(b.CompletionTokens)
	return net + money.Fee(net, l.cfg.FeeBasisPoints)
}

// Hold reserves the most a request can cost; it returns a *store.LimitError when the balance
// or a spend cap does not allow it.
func (l *Ledger) Hold(ctx context.Context, requestID string, key *store.Key, amount money.Nanos) error {
	h := &store.Hold{
		RequestID: requestID, AccountID: key.AccountID, KeyID: key.ID, Amount: amount, CreatedAt: l.cfg.Now(),
		Replica: l.cfg.Replica,
	}
	if l.lazy {
		// Alone on its store, the ledger's Recover voids every open hold with no checkpoint:
		// the store may keep the hold unwritten for LazyFor (writeLazy), and it decides it
		// without a write transaction, so not in the queue, behind a commit.
		if l.holds.isClosed() {
			return errClosed
		}
		h.Lazy = true
		err := l.cfg.Store.PlaceHold(ctx, h)
		l.holdPlaced(err)
		return err
	}
	return l.holds.do(ctx, write{hold: h})
}

// holdPlaced counts a hold placed, refused or failed.
func (l *Ledger) holdPlaced(err error) {
	switch {
	case err == nil:
		l.cfg.Metrics.HoldPlaced("placed")
	case errors.As(err, new(*store.LimitError)):
		l.cfg.Metrics.HoldPlaced("refused")
	default:
		l.cfg.Metrics.HoldPlaced("error")
	}
}

// Raise raises a request's hold to amount, for a retry on a dearer node; it returns a
// *store.LimitError when the balance or a spend cap does not allow it.
func (l *Ledger) Raise(ctx context.Context, requestID string, amount money.Nanos) error {
	return l.cfg.Store.RaiseHold(ctx, requestID, amount)
}

// Work is what one node did for a request, as the node claims it.
type Work struct {
	NodeID     string
	ProviderID string
	Ask        Ask
	// AskWindow and Surge say where Ask comes from, for the provider's report: the node's ask
	// schedule window ("" the flat ask) and the surge multiplier in basis points (0: ×1).
	AskWindow string
	Surge     int64
	// PromptTokens the node read and CompletionTokens it generated, as it reports them.
	PromptTokens     int
	CompletionTokens int
	// DeliveredBytes is the size of the text and tool calls the coordinator relayed from the
	// node: no node is paid for tokens it did not deliver.
	DeliveredBytes int
	// Overclaimed says the node claimed well more tokens than the coordinator counted in what
	// it read and delivered (the counts are billed then): it is flagged in the settlement. A
	// claim Price's own bounds cut is not flagged.
	Overclaimed bool
}

// Bill is what a request costs.
type Bill struct {
	Settlement *store.Settlement
	// Clamped lists the nodes whose claims were out of bounds and cut down.
	Clamped []string
	// PromptTokens and CompletionTokens are the billed counts.
	PromptTokens, CompletionTokens int
}

// Cost returns what the buyer pays.
func (b *Bill) Cost() money.Nanos { return b.Settlement.Debit }

// Price bills a request from the work of its nodes. A node's claim is trusted within what is
// plausible: a prompt within the prompt bound, a completion within max_tokens and within the
// text it delivered (a token is at least a byte). An implausible claim is replaced by the
// coordinator's estimate (and never more than the bound), and the node is reported in Clamped.
// The buyer pays the prompt once, to the first node, and each node's completion. A node that
// continues another's answer also read the prompt (and the partial answer) again: the platform
// pays it for that, not the buyer.
func (l *Ledger) Price(requestID string, b Bounds, work []Work) *Bill {
	bill := &Bill{Settlement: &store.Settlement{RequestID: requestID, At: l.cfg.Now()}}
	s := bill.Settlement
	s.ReleaseAt = s.At.Add(l.cfg.SettlementDelay)
	completionLeft := b.CompletionTokens
	var net, subsidy money.Nanos
	before := 0 // bytes delivered by the nodes before this one
	for i, w := range work {
		prompt, completion := w.PromptTokens, w.CompletionTokens
		var reread money.Nanos
		if i > 0 {
			// A continuation's prompt reading is the platform's cost: within the prompt and
			// the partial answer, at most a token a byte.
			reread = w.Ask.Input.Cost(min(max(prompt, 0), b.PromptTokens+before+16))
			prompt = 0
		}
		before += w.DeliveredBytes
		clamped := false
		if prompt > b.PromptTokens || prompt < 0 {
			prompt, clamped = min(max(b.PromptEstimate, 0), b.PromptTokens), true
		}
		// A token is at least one byte; an engine may add one end-of-text token.
		if completion > w.DeliveredBytes+1 || completion < 0 {
			completion, clamped = EstimateTokens(w.DeliveredBytes), true
		}
		if completion > completionLeft {
			completion, clamped = max(completionLeft, 0), true
		}
		if clamped || w.Overclaimed {
			bill.Clamped = append(bill.Clamped, w.NodeID)
		}
		if w.Overclaimed {
			// Only the caller's count tells an inflated claim from one its bounds cut (a
			// prompt with an image is larger than its bytes say).
			s.Flagged = append(s.Flagged, w.NodeID)
		}
		completionLeft -= completion
		bill.PromptTokens += prompt
		bill.CompletionTokens += completion
		earned := w.Ask.Input.Cost(prompt) + w.Ask.Output.Cost(completion)
		net += earned
		subsidy += reread
		earned += reread
		if earned > 0 {
			s.Parts = append(s.Parts, store.Part{NodeID: w.NodeID, ProviderID: w.ProviderID, Earned: earned, AskWindow: w.AskWindow, Surge: w.Surge})
		}
	}
	s.Fee = money.Fee(net, l.cfg.FeeBasisPoints)
	s.Debit = net + s.Fee
	s.Subsidy = subsidy
	return bill
}

// Settle settles a bill, recording the request's usage in the same transaction. It returns
// once the settlement has committed.
func (l *Ledger) Settle(ctx context.Context, bill *Bill, u *store.Usage) error {
	s := bill.Settlement
	u.Cost = s.Debit
	s.Usage = u
	err := l.settles.do(ctx, write{settlement: s})
	if errors.Is(err, store.ErrClosed) {
		return nil // settled already: settling is idempotent
	}
	if err != nil {
		l.log.Error("settle request", "request_id", s.RequestID, "err", err)
	}
	return err
}

// SettleLater queues a bill for the next settlement batch and returns at once: the buyer's
// connection need not wait for the commit. Its errors are logged. A crash before the commit
// leaves the hold open, and the next start voids it; Close commits what is queued.
func (l *Ledger) SettleLater(bill *Bill, u *store.Usage) {
	s := bill.Settlement
	u.Cost = s.Debit
	s.Usage = u
	l.settles.queue(write{settlement: s}, func(err error) {
		if s.Line != nil && s.Line.Committed != nil {
			s.Line.Committed(err) // the batch runner: its line's result is written, or not
		}
		if err != nil && !errors.Is(err, store.ErrClosed) && !errors.Is(err, store.ErrStale) {
			l.log.Error("settle request", "request_id", s.RequestID, "err", err)
		}
	})
}

// Void closes a hold without charging, recording the request's usage.
func (l *Ledger) Void(ctx context.Context, requestID string, u *store.Usage) error {
	return l.Settle(ctx, &Bill{Settlement: &store.Settlement{RequestID: requestID, At: l.cfg.Now()}}, u)
}

// Checkpoint records the bill of what a running request has delivered so far, for Recover,
// with the request's usage record as it stands. It returns once the checkpoint has committed.
func (l *Ledger) Checkpoint(ctx context.Context, bill *Bill, u *store.Usage) error {
	return l.checkpoints.do(ctx, write{checkpoint: &checkpoint{s: checkpointOf(bill, u)}})
}

// CheckpointLater queues a checkpoint of what a running request has delivered so far and
// returns at once; checkpoints queued together commit in one transaction. A checkpoint still
// queued when ended reports true is dropped: the request's settlement says more. Its errors
// are logged.
func (l *Ledger) CheckpointLater(bill *Bill, u *store.Usage, ended func() bool) {
	s := checkpointOf(bill, u)
	l.checkpoints.queue(write{checkpoint: &checkpoint{s: s, ended: ended}}, func(err error) {
		if err != nil && !errors.Is(err, errClosed) {
			l.log.Warn("checkpoint request", "request_id", s.RequestID, "err", err)
		}
	})
}

// checkpoint is a queued checkpoint, with how to tell that its request has ended since.
type checkpoint struct {
	s     *store.Settlement
	ended func() bool // nil: never
}

func checkpointOf(bill *Bill, u *store.Usage) *store.Settlement {
	s := *bill.Settlement
	rec := *u
	rec.PromptTokens, rec.CompletionTokens, rec.Cost = bill.PromptTokens, bill.CompletionTokens, s.Debit
	s.Usage = &rec
	return &s
}

// Recovered counts the holds Recover closed.
type Recovered struct {
	Settled int // at their last checkpoint
	Voided  int // with nothing recorded as delivered
}

// Recover closes the holds a crash left open: a hold with a checkpoint is settled at the bill of
// what was delivered by then, and one without is voided (nothing recorded as delivered, nothing
// charged). Call it at start, before the first hold.
//
// With no Replica, or a store not Shared, it closes every open hold. Otherwise it first renews
// the replica's lease, then closes only the replica's own holds (left by its previous run under
// the same name), the holds placed without a replica, and those of peers whose lease has
// expired, which it claims first; a live replica's holds are never touched.
func (l *Ledger) Recover(ctx context.Context) (Recovered, error) {
	if l.cfg.Replica == "" || !l.cfg.Shared {
		holds, err := l.cfg.Store.OpenHolds(ctx)
		if err != nil {
			return Recovered{}, err
		}
		return l.closeHolds(ctx, holds)
	}
	if err := l.RenewLease(ctx); err != nil {
		return Recovered{}, err
	}
	holds, err := l.cfg.Store.ClaimHolds(ctx, l.cfg.Replica, l.cfg.Now(), true)
	if err != nil {
		return Recovered{}, err
	}
	return l.closeHolds(ctx, holds)
}

// RecoverPeers closes the open holds of the replicas whose lease has expired (or that have
// none), claiming them first, as Recover does for its own: a dead replica's holds do not stay
// open until some replica restarts. It never touches this replica's own holds.
func (l *Ledger) RecoverPeers(ctx context.Context) (Recovered, error) {
	if l.cfg.Replica == "" {
		return Recovered{}, errors.New("recover peers' holds: the ledger has no replica name")
	}
	holds, err := l.cfg.Store.ClaimHolds(ctx, l.cfg.Replica, l.cfg.Now(), false)
	if err != nil {
		return Recovered{}, err
	}
	return l.closeHolds(ctx, holds)
}

// closeHolds settles holds at their checkpoints, or voids them. A hold settled meanwhile (a
// late settlement racing the recovery) is left as it was.
func (l *Ledger) closeHolds(ctx context.Context, holds []*store.Hold) (Recovered, error) {
	var r Recovered
	if len(holds) == 0 {
		return r, nil
	}
	batch := make([]*store.Settlement, len(holds))
	for i, h := range holds {
		s := h.Checkpoint
		if s == nil {
			s = &store.Settlement{RequestID: h.RequestID, Usage: &store.Usage{
				RequestID: h.RequestID, AccountID: h.AccountID, KeyID: h.KeyID, CreatedAt: h.CreatedAt,
				Error: "the coordinator stopped before the request ended, with nothing recorded as delivered",
			}}
		} else {
			if s.Usage == nil {
				s.Usage = &store.Usage{RequestID: h.RequestID, AccountID: h.AccountID, KeyID: h.KeyID, CreatedAt: h.CreatedAt}
			}
			s.Usage.Error = "the coordinator stopped before the request ended: billed what was delivered by its last checkpoint"
			s.Usage.Cost = s.Debit
		}
		s.At = l.cfg.Now()
		s.Usage.Outcome = store.OutcomeError
		batch[i] = s
	}
	for i, err := range l.cfg.Store.Settle(ctx, batch) {
		switch {
		case err == nil && batch[i].Debit > 0:
			r.Settled++
		case err == nil:
			r.Voided++
		case !errors.Is(err, store.ErrClosed):
			return r, fmt.Errorf("close hold %s: %w", holds[i].RequestID, err)
		}
	}
	return r, nil
}

// RenewLease renews the replica's lease for LeaseTTL from now. After Close it does nothing.
func (l *Ledger) RenewLease(ctx context.Context) error {
	l.leaseMu.Lock()
	defer l.leaseMu.Unlock()
	if l.closed || l.cfg.Replica == "" {
		return nil
	}
	now := l.cfg.Now()
	if err := l.cfg.Store.RenewLease(ctx, l.cfg.Replica, now, now.Add(l.cfg.LeaseTTL)); err != nil {
		return err
	}
	l.leased.Store(true)
	return nil
}

// RunLease renews the replica's lease every LeaseRenew until ctx is done; with Shared, it also
// closes the holds of dead peers every LeaseTTL (RecoverPeers). Errors are logged. Without a
// Replica it returns at once.
func (l *Ledger) RunLease(ctx context.Context) {
	if l.cfg.Replica == "" || l.cfg.Store == nil {
		return
	}
	renew := time.NewTicker(l.cfg.LeaseRenew)
	defer renew.Stop()
	var sweep <-chan time.Time
	if l.cfg.Shared {
		t := time.NewTicker(l.cfg.LeaseTTL)
		defer t.Stop()
		sweep = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			if err := l.RenewLease(ctx); err != nil && ctx.Err() == nil {
				l.log.Error("renew the replica's lease: peers take its open holds once it expires", "replica", l.cfg.Replica, "err", err)
			}
		case <-sweep:
			r, err := l.RecoverPeers(ctx)
			if err != nil && ctx.Err() == nil {
				l.log.Error("close holds of dead replicas", "err", err)
			} else if r.Settled+r.Voided > 0 {
				l.log.Warn("closed holds left open by dead replicas", "settled_at_checkpoint", r.Settled, "voided", r.Voided)
			}
		}
	}
}

// Run releases due earnings every interval until ctx is done.
func (l *Ledger) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if amount, err := l.cfg.Store.ReleaseEarnings(ctx, l.cfg.Now()); err != nil && ctx.Err() == nil {
			l.log.Error("release earnings", "err", err)
		} else if amount > 0 {
			l.log.Info("released earnings", "usd", amount.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
