package verify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shareai/shareai/internal/core"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/reputation"
	"github.com/shareai/shareai/internal/store"
)

// Config configures a Prober.
type Config struct {
	// Core runs the checks' requests, each pinned to the node it checks.
	Core   *core.Core
	Fleet  *fleet.Fleet
	Store  store.Store
	Ledger *ledger.Ledger
	Rules  reputation.Rules
	// ProbeEvery is the mean time between two canary probes of one node; the times are
	// random, so that a node cannot tell a probe by when it comes. Default 10 minutes.
	ProbeEvery time.Duration
	// Tick is how often the prober looks for nodes to check. Default 1s.
	Tick time.Duration
	// CheckTimeout bounds one check: a node that stalls fails to be checked (and is checked
	// again later), it does not fail the check. Default 1 minute.
	CheckTimeout time.Duration
	// ProbePriceCap bounds what a probe pays per million tokens when no other node's ask is
	// there to compare with. Default DefaultProbePriceCap.
	ProbePriceCap money.Price
	// ScoreEvery is how often every connected node's score is recomputed and stored, and the
	// levels an operator set in the database are taken in. Default 1 minute.
	ScoreEvery time.Duration
	Log        *slog.Logger
	Now        func() time.Time
}

// PlatformAccount is the account that pays the probes: the platform's own, funded from its
// fees.
const PlatformAccount = "shareai-platform"

// PlatformAccountID is the platform account's id, by which it is always found.
const PlatformAccountID = "acct_platform"

// Prober verifies nodes, each model of a node on its own: a model not verified yet on a node
// (every model of a new node) gets onboarding checks before live traffic, every other model
// gets canary probes at random times, and the levels of each model and of each node, and the
// node's score, follow its record by the rules of docs/reputation.md.
//
// A check is a job like any buyer's (same frames, a realistic chat, temperature 0, a fixed
// seed), judged as check.go says: against the known answer when the model's output is known
// exactly (the simulated engine), by reference-free tests when no node of another provider
// serves the model to buyers yet, or else against the answer of such a node, of the same
// quantization if any. Probes are billed like real requests to the platform's account, so the
// node is paid for them; onboarding checks are not.
type Prober struct {
	cfg   Config
	log   *slog.Logger
	keyMu sync.Mutex
	key   *store.Key // the platform account's, which pays the probes; made on first use
	// started is when this coordinator started: a node's uptime counts only from then, so
	// that the coordinator's own restart costs no node anything.
	started time.Time

	applyMu sync.Mutex // serializes level decisions
	mu      sync.Mutex
	busy    map[string]bool          // nodes being checked now
	seen    map[string]*fleet.Node   // each node's session when last looked at
	due     map[string]time.Time     // next check of each node
	retry   map[string]time.Duration // backoff of a node whose checks could not be made
	last    map[string]time.Time     // an account's last selftest
	turn    map[string]int           // a node's probes so far: picks the model of its next one
	prompts int                      // probes sent: picks the next prompt
	thinks  map[string]bool          // node and model seen reasoning: reference-free checks give it room
	cuts    map[string]int           // node and model: reference-free checks in a row cut short
	warned  time.Time                // when unpaid probes were last warned about
	wg      sync.WaitGroup
}

// New returns a prober; Run starts it.
func New(cfg Config) *Prober {
	if cfg.ProbeEvery <= 0 {
		cfg.ProbeEvery = 10 * time.Minute
	}
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.ProbePriceCap <= 0 {
		cfg.ProbePriceCap = DefaultProbePriceCap
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = time.Minute
	}
	if cfg.ScoreEvery <= 0 {
		cfg.ScoreEvery = time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Prober{cfg: cfg, log: cfg.Log, busy: map[string]bool{}, seen: map[string]*fleet.Node{}, due: map[string]time.Time{},
		retry: map[string]time.Duration{}, last: map[string]time.Time{}, turn: map[string]int{}, started: cfg.Now(),
		thinks: map[string]bool{}, cuts: map[string]int{}}
}

// Run checks nodes until ctx is done, then waits for the checks in flight.
func (p *Prober) Run(ctx context.Context) error {
	t := time.NewTicker(p.cfg.Tick)
	defer t.Stop()
	var scored time.Time
	for {
		p.startChecks(ctx)
		if now := p.cfg.Now(); now.Sub(scored) >= p.cfg.ScoreEvery {
			scored = now
			if err := p.rescore(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("reputation: score nodes", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			p.wg.Wait()
			return nil
		case <-t.C:
		}
	}
}

// platformKey finds or makes, on the first paid probe, the platform's account and the key its
// probes are held on.
func (p *Prober) platformKey(ctx context.Context) (*store.Key, error) {
	p.keyMu.Lock()
	defer p.keyMu.Unlock()
	if p.key != nil {
		return p.key, nil
	}
	k, err := p.makePlatformKey(ctx)
	p.key = k
	return k, err
}

func (p *Prober) makePlatformKey(ctx context.Context) (*store.Key, error) {
	st := p.cfg.Store
	// By its fixed id, never by name: an account that took the name is not the platform's.
	acct, err := st.Account(ctx, PlatformAccountID)
	if errors.Is(err, store.ErrNotFound) {
		acct = &store.Account{ID: PlatformAccountID, Name: PlatformAccount, CreatedAt: p.cfg.Now()}
		if err = st.CreateAccount(ctx, acct); errors.Is(err, store.ErrConflict) {
			acct, err = st.Account(ctx, PlatformAccountID) // made meanwhile, or the name is taken
			if err == nil && acct.ID != PlatformAccountID {
				err = fmt.Errorf("the name %q belongs to another account", PlatformAccount)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("platform account: %w", err)
	}
	keys, err := st.Keys(ctx, acct.ID, store.KeyBuyer)
	if err != nil {
		return nil, fmt.Errorf("platform key: %w", err)
	}
	for _, k := range keys {
		if !k.Revoked() {
			return k, nil
		}
	}
	_, k := store.NewKey(acct.ID, store.KeyBuyer, "probes", p.cfg.Now())
	if err := st.CreateKey(ctx, k); err != nil {
		return nil, fmt.Errorf("platform key: %w", err)
	}
	return k, nil
}

// startChecks starts the checks due: onboarding for the models not verified yet on a node
// (all of them on a new node: every model proves itself again), probes for the others.
func (p *Prober) startChecks(ctx context.Context) {
	now := p.cfg.Now()
	for _, n := range p.cfg.Fleet.Local() {
		if n.Level() == store.LevelSuspended || n.Paused() != "" {
			continue
		}
		p.mu.Lock()
		due, scheduled := p.due[n.ID]
		if p.seen[n.ID] != n {
			// Seen for the first time, or connected again: onboard at once what needs it (new
			// models, new hardware). A node that reconnects keeps its next probe's time, so
			// that reconnecting puts no probe off.
			p.seen[n.ID] = n
			if !scheduled || n.Level() == store.LevelNew || len(unverified(n)) > 0 {
				due = now
				p.due[n.ID] = due
			}
		}
		start := !p.busy[n.ID] && !now.Before(due)
		if start {
			p.busy[n.ID] = true
		}
		p.mu.Unlock()
		if !start {
			continue
		}
		p.wg.Go(func() {
			made := true
			if n.Level() == store.LevelNew {
				if err := p.renew(ctx, n); err != nil && ctx.Err() == nil {
					p.log.Warn("reputation: renew a new node's models", "node", n.ID, "err", err)
				}
			}
			switch targets := unverified(n); {
			case len(targets) > 0:
				made = p.onboard(ctx, n, targets)
			case scheduled: // a node seen for the first time gets its first probe later
				_, made = p.check(ctx, n, p.probeOffer(n), store.CheckProbe)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			delete(p.busy, n.ID)
			switch {
			case made && len(unverified(n)) == 0:
				p.due[n.ID], p.retry[n.ID] = now.Add(p.nextGap()), 0
			case made:
				p.due[n.ID], p.retry[n.ID] = p.cfg.Now(), 0 // more onboarding checks to make
			default:
				// Busy, stalled or gone: try again soon, backing off while it lasts.
				p.retry[n.ID] = min(max(2*p.retry[n.ID], 10*p.cfg.Tick), time.Minute)
				p.due[n.ID] = p.cfg.Now().Add(p.retry[n.ID])
			}
		})
	}
}

// unverified returns the offers of models not verified yet on the node: they get onboarding
// checks.
func unverified(n *fleet.Node) []*fleet.Offer {
	var out []*fleet.Offer
	for _, o := range n.Offers {
		if o.OwnLevel() == store.LevelNew {
			out = append(out, o)
		}
	}
	return out
}

// probeOffer picks the offer a probe of the node checks: each model verified or quarantined
// on it in turn, so that a node failing on every model fails on its 4th probe, and one
// failing on one model in two does not. nil when there is none.
func (p *Prober) probeOffer(n *fleet.Node) *fleet.Offer {
	var offers []*fleet.Offer
	for _, o := range n.Offers {
		if o.OwnLevel() != store.LevelNew {
			offers = append(offers, o)
		}
	}
	if len(offers) == 0 {
		return nil
	}
	p.mu.Lock()
	i := p.turn[n.ID]
	p.turn[n.ID]++
	p.mu.Unlock()
	return offers[i%len(offers)]
}

// nextGap is a random time to a node's next probe, ProbeEvery on average: half of it, and an
// exponential wait around the other half, so that probes come at no predictable time but not
// in bursts.
func (p *Prober) nextGap() time.Duration {
	half := float64(p.cfg.ProbeEvery) / 2
	return time.Duration(half + mrand.ExpFloat64()*half)
}

// onboard runs the onboarding checks of the models not verified yet on a node, at once, all
// of them together; the rules then verify each model (enough passed in a row), leave it new
// to be checked again, or quarantine it (too many failed). Checks that could not be made are
// made later.
func (p *Prober) onboard(ctx context.Context, n *fleet.Node, offers []*fleet.Offer) (made bool) {
	var (
		wg    sync.WaitGroup
		madeN atomic.Int32
	)
	for _, o := range offers {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for range max(p.cfg.Rules.OnboardingChecks, 1) {
			wg.Go(func() {
				if _, ok := p.check(ctx, n, o, store.CheckOnboarding); ok {
					madeN.Add(1)
				}
				if o.OwnLevel() != store.LevelNew || n.Level() == store.LevelSuspended {
					cancel() // decided: the checks still running are of no use
				}
			})
		}
	}
	wg.Wait()
	return madeN.Load() > 0
}

// check sends one check of an offer to its node and records its result; ok is false when no
// check could be made (no offer, the node busy, gone, or no slot).
func (p *Prober) check(ctx context.Context, n *fleet.Node, o *fleet.Offer, kind string) (passed, ok bool) {
	if o == nil {
		return false, false
	}
	if kind == store.CheckProbe && o.OwnLevel() == store.LevelQuarantined {
		kind = store.CheckQuarantine // it decides only the model's release
	}
	c, ok := p.checkOnce(ctx, n, o, kind)
	if !ok {
		return false, false
	}
	if err := p.cfg.Store.AddNodeChecks(ctx, []store.NodeCheck{c}); err != nil {
		p.log.Warn("record a check", "node", n.ID, "err", err)
		return c.Passed, true
	}
	if !c.Passed {
		p.log.Warn("node failed a check", "node", n.ID, "kind", kind, "model", c.Model, "detail", c.Detail)
	}
	if err := p.apply(ctx, n); err != nil && ctx.Err() == nil {
		p.log.Warn("reputation: apply rules", "node", n.ID, "err", err)
	}
	return c.Passed, true
}

// selftestEvery is how often one provider account may run a selftest.
const selftestEvery = time.Minute

// Selftest checks a node as a new node's onboarding would, without recording anything or
// changing its level: what 'shareai provider selftest' shows its provider. It makes a check
// per onboarding check of the rules, and at least one of each model, retrying one that could
// not be made a few times. A selftest compares with known answers, or makes reference-free
// checks; never with other nodes.
func (p *Prober) Selftest(ctx context.Context, n *fleet.Node) *protocol.Selftest {
	p.mu.Lock()
	last, seen := p.last[n.AccountID]
	now := p.cfg.Now()
	if seen && now.Sub(last) < selftestEvery {
		p.mu.Unlock()
		return &protocol.Selftest{Checks: []protocol.SelftestCheck{{Detail: fmt.Sprintf(
			"one selftest a minute per provider account: try again in %s", (selftestEvery - now.Sub(last)).Round(time.Second))}}}
	}
	p.last[n.AccountID] = now
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	res := &protocol.Selftest{Passed: true}
	if len(n.Offers) == 0 {
		res.Passed = false
		return res
	}
	want := max(p.cfg.Rules.OnboardingChecks, len(n.Offers), 1)
	for tries := 0; len(res.Checks) < want && tries < 3*want && ctx.Err() == nil; tries++ {
		c, ok := p.checkOnce(ctx, n, n.Offers[len(res.Checks)%len(n.Offers)], store.CheckOnboarding)
		if !ok {
			continue
		}
		res.Checks = append(res.Checks, protocol.SelftestCheck{Model: c.Model, Passed: c.Passed, Detail: c.Detail})
		res.Passed = res.Passed && c.Passed
	}
	if len(res.Checks) < want {
		res.Passed = false
	}
	return res
}
