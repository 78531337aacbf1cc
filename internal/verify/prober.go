package verify

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/reputation"
	"github.com/shareai/shareai/internal/store"
)

// Config configures a Prober.
type Config struct {
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

// Prober verifies nodes: a new node gets onboarding checks before live traffic, every live or
// quarantined node gets canary probes at random times, and each node's score and level follow
// its record by the rules of docs/reputation.md.
//
// A check is a job like any buyer's (same frames, a realistic chat, temperature 0, a fixed
// seed), whose answer is compared with the known answer when the model's output is known
// exactly (the simulated engine), or else with the answer of a verified node of another
// provider serving the same model and quantization. Probes are billed like real requests to
// the platform's account, so the node is paid for them.
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
	due     map[string]time.Time     // next check of each node
	retry   map[string]time.Duration // backoff of a node whose checks could not be made
	last    map[string]time.Time     // an account's last selftest
	prompts int                      // probes sent: picks the next prompt
	warned  time.Time                // when unpaid probes were last warned about
	counter int
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
	return &Prober{cfg: cfg, log: cfg.Log, busy: map[string]bool{}, due: map[string]time.Time{},
		retry: map[string]time.Duration{}, last: map[string]time.Time{}, started: cfg.Now()}
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

// startChecks starts the checks due: onboarding for new nodes, probes for the others.
func (p *Prober) startChecks(ctx context.Context) {
	now := p.cfg.Now()
	for _, n := range p.cfg.Fleet.Nodes() {
		level := n.Level()
		if level == store.LevelSuspended || n.Paused() != "" {
			continue
		}
		p.mu.Lock()
		due, known := p.due[n.ID]
		if !known {
			due = now // a new node is onboarded at once; another node's first probe comes later
			if level != store.LevelNew {
				due = now.Add(p.nextGap())
			}
			p.due[n.ID] = due
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
			made := false
			if level == store.LevelNew {
				made = p.onboard(ctx, n)
			} else {
				_, made = p.check(ctx, n, store.CheckProbe)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			delete(p.busy, n.ID)
			switch {
			case made && n.Level() != store.LevelNew:
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

// nextGap is a random time to a node's next probe, ProbeEvery on average: half of it, and an
// exponential wait around the other half, so that probes come at no predictable time but not
// in bursts.
func (p *Prober) nextGap() time.Duration {
	half := float64(p.cfg.ProbeEvery) / 2
	return time.Duration(half + mrand.ExpFloat64()*half)
}

// onboard runs the onboarding checks of a new node, at once; the rules then make it verified
// (enough passed in a row), leave it new to be checked again, or quarantine it (too many
// failed). Checks that could not be made are made later.
func (p *Prober) onboard(ctx context.Context, n *fleet.Node) (made bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		madeN atomic.Int32
	)
	for range max(p.cfg.Rules.OnboardingChecks, 1) {
		wg.Go(func() {
			if _, ok := p.check(ctx, n, store.CheckOnboarding); ok {
				madeN.Add(1)
			}
			if n.Level() != store.LevelNew {
				cancel() // decided: the checks still running are of no use
			}
		})
	}
	wg.Wait()
	return madeN.Load() > 0
}

// check sends one check to the node and records its result; ok is false when no check could
// be made (the node busy, gone, or no slot).
func (p *Prober) check(ctx context.Context, n *fleet.Node, kind string) (passed, ok bool) {
	c, ok := p.checkOnce(ctx, n, kind)
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

// checkOnce sends one check to the node and judges the answer, recording nothing.
func (p *Prober) checkOnce(ctx context.Context, n *fleet.Node, kind string) (store.NodeCheck, bool) {
	if len(n.Offers) == 0 {
		return store.NodeCheck{}, false
	}
	p.mu.Lock()
	p.counter++
	p.prompts++
	i, prompt := p.counter, p.prompts+mrand.IntN(NumProbes) // every model gets every prompt
	p.mu.Unlock()
	offer := n.Offers[i%len(n.Offers)]
	req := Probe(prompt, offer.Model)
	if !offer.Acquire() {
		return store.NodeCheck{}, false // busy with buyers' jobs: probe later
	}
	got, err := p.run(ctx, offer, req, kind == store.CheckProbe)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Debug("check not made", "node", n.ID, "err", err)
		}
		return store.NodeCheck{}, false
	}
	c := store.NodeCheck{NodeID: n.ID, At: p.cfg.Now(), Kind: kind, Model: offer.Model}
	var conclusive bool
	c.Passed, c.Detail, conclusive = p.judge(ctx, n, offer, req, got, kind)
	return c, conclusive
}

// selftestEvery is how often one provider account may run a selftest.
const selftestEvery = time.Minute

// Selftest checks a node as a new node's onboarding would, without recording anything or
// changing its level: what 'shareai provider selftest' shows its provider. It makes a check
// per onboarding check of the rules, retrying one that could not be made a few times.
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
	want := max(p.cfg.Rules.OnboardingChecks, 1)
	for tries := 0; len(res.Checks) < want && tries < 3*want && ctx.Err() == nil; tries++ {
		c, ok := p.checkOnce(ctx, n, store.CheckOnboarding)
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

// judge compares an answer with the known answer, or with a reference node's. conclusive is
// false when there was nothing to compare with: a probe then counts as not made. An
// onboarding check with no reference anywhere passes a well-formed answer, so that the first
// node of a model can start; later probes compare it with the nodes that come after. A
// selftest compares with known answers only, and says no more than whether a check passed.
func (p *Prober) judge(ctx context.Context, n *fleet.Node, offer *fleet.Offer, req *protocol.Request, got, kind string) (passed bool, detail string, conclusive bool) {
	if want, ok := KnownAnswer(req); ok {
		if AgreeExact(got, want) {
			return true, "the known answer", true
		}
		_, sim := Agree(got, want)
		if n.Selftest {
			return false, "unlike the known answer", true
		}
		return false, fmt.Sprintf("unlike the known answer (similarity %.2f)", sim), true
	}
	if n.Selftest {
		return strings.TrimSpace(got) != "", "a well-formed answer; a selftest compares with known answers only", true
	}
	ref := p.reference(n, offer)
	if ref == nil {
		if kind == store.CheckProbe || p.serves(n, offer.Model) {
			return false, "", false // no node free to compare with now: probe again later
		}
		if strings.TrimSpace(got) == "" {
			return false, "an empty answer", true
		}
		return true, "a well-formed answer; no other node serves the model yet", true
	}
	want, err := p.run(ctx, ref, req, kind == store.CheckProbe) // reference took ref's slot
	if err != nil {
		return false, "", false
	}
	agree, sim := Agree(got, want)
	if agree {
		return true, fmt.Sprintf("like another node's answer (similarity %.2f)", sim), true
	}
	return false, fmt.Sprintf("unlike another node's answer (similarity %.2f)", sim), true
}

// serves says whether a verified or trusted node of another provider serves model.
func (p *Prober) serves(n *fleet.Node, model string) bool {
	for _, o := range p.cfg.Fleet.Offers(model) {
		if p.canReference(n, o) {
			return true
		}
	}
	return false
}

func (p *Prober) canReference(n *fleet.Node, o *fleet.Offer) bool {
	l := o.Node.Level()
	return o.Node != n && o.Node.AccountID != n.AccountID && (l == store.LevelVerified || l == store.LevelTrusted)
}

// reference is a verified or trusted node of another provider serving the same model, with a
// free slot taken: one of the same quantization if any, else one of another (a node cannot
// escape comparison by naming its quantization uniquely); nil when none is free.
func (p *Prober) reference(n *fleet.Node, offer *fleet.Offer) *fleet.Offer {
	offers := p.cfg.Fleet.Offers(offer.Model)
	for _, sameQuant := range []bool{true, false} {
		for _, o := range offers {
			if !p.canReference(n, o) || strings.EqualFold(o.Quantization, offer.Quantization) != sameQuant {
				continue
			}
			if o.Acquire() {
				return o
			}
		}
	}
	return nil
}

// run sends req to the offer's node as a job and returns the answer's text. The caller has
// taken a slot of the offer; the job frees it. A paid job is billed like a buyer's request to
// the platform's account, so the node earns what it would for a buyer.
func (p *Prober) run(ctx context.Context, o *fleet.Offer, req *protocol.Request, paid bool) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CheckTimeout)
	defer cancel()
	var (
		bill func(end *protocol.End, delivered int, err error)
		err  error
	)
	if paid {
		if bill, err = p.pay(ctx, o, req); err != nil {
			o.Release()
			return "", err
		}
	}
	job, err := p.cfg.Fleet.Dispatch(ctx, o, req)
	if err != nil {
		if bill != nil {
			bill(nil, 0, err)
		}
		return "", err
	}
	text, end, delivered, err := collect(ctx, job)
	if bill != nil {
		bill(end, delivered, err)
	}
	switch {
	case err != nil:
		return "", err
	case end.Error != nil:
		return "", fmt.Errorf("node %s: %s", o.Node.ID, end.Error.Message)
	}
	return text, nil
}

// pay holds a probe's most possible cost on the platform's account, and returns what bills it
// when the job ends (or voids the hold when no job ran).
func (p *Prober) pay(ctx context.Context, o *fleet.Offer, req *protocol.Request) (func(*protocol.End, int, error), error) {
	key, err := p.platformKey(ctx)
	if err != nil {
		return nil, err
	}
	var id [10]byte
	rand.Read(id[:])
	requestID := fmt.Sprintf("probe_%x", id)
	bounds := ledger.Bounds{PromptTokens: ledger.PromptBound(len(req.Messages)), PromptEstimate: ledger.EstimateTokens(len(req.Messages))}
	bounds.CompletionTokens = p.cfg.Ledger.CompletionBound(req.MaxTokens, o.ContextLength)
	ask := p.probeAsk(o)
	if err := p.hold(ctx, key, requestID, p.cfg.Ledger.MaxCost(ask, bounds)); errors.Is(err, errUnfunded) {
		p.warnUnfunded()
		return nil, nil // the probe runs unpaid
	} else if err != nil {
		return nil, err
	}
	start := p.cfg.Now()
	return func(end *protocol.End, delivered int, err error) {
		u := &store.Usage{RequestID: requestID, AccountID: key.AccountID, KeyID: key.ID, Model: req.Model,
			NodeID: o.Node.ID, Region: o.Node.Region, Endpoint: req.Kind, CreatedAt: start,
			Outcome: store.OutcomeOK, Duration: p.cfg.Now().Sub(start)}
		if end == nil && delivered == 0 {
			u.Outcome, u.Error = store.OutcomeError, fmt.Sprint(err)
			if verr := p.cfg.Ledger.Void(context.WithoutCancel(ctx), requestID, u); verr != nil {
				p.log.Warn("void a probe's hold", "err", verr)
			}
			return
		}
		work := ledger.Work{NodeID: o.Node.ID, ProviderID: o.Node.AccountID, Ask: ask, DeliveredBytes: delivered}
		if end != nil {
			work.PromptTokens, work.CompletionTokens = end.Usage.PromptTokens, end.Usage.CompletionTokens
		}
		if err != nil || end == nil || end.Error != nil {
			u.Outcome = store.OutcomeError
		}
		b := p.cfg.Ledger.Price(requestID, bounds, []ledger.Work{work})
		u.PromptTokens, u.CompletionTokens = b.PromptTokens, b.CompletionTokens
		p.cfg.Ledger.SettleLater(b, u)
	}, nil
}

// collect reads a job to its end: the answer's text, the end, and the bytes delivered.
func collect(ctx context.Context, job *fleet.Job) (string, *protocol.End, int, error) {
	var b strings.Builder
	delivered := 0
	for {
		fr, err := job.Next(ctx)
		if err != nil {
			job.Cancel()
			return b.String(), nil, delivered, err
		}
		if fr.Delta != nil {
			b.WriteString(fr.Delta.Text)
			delivered += len(fr.Delta.Text) + len(fr.Delta.Reasoning) + len(fr.Delta.ToolCalls)
		}
		if fr.Type == protocol.TypeEnd {
			return b.String(), fr.End, delivered, nil
		}
	}
}

// hold reserves a probe's most possible cost on the platform's account, funding it from the
// platform's fees (or, when they fall short, from the outside world: the operator's money, a
// deposit with ref platform-funding:…) when its balance is short.
func (p *Prober) hold(ctx context.Context, key *store.Key, requestID string, amount money.Nanos) error {
	err := p.cfg.Ledger.Hold(ctx, requestID, key, amount)
	var le *store.LimitError
	if !errors.As(err, &le) {
		return err
	}
	// Top up from the fees: enough for many probes if they have it, else for this one.
	for _, topUp := range []money.Nanos{amount * 100, amount * 10, amount} {
		var ref [8]byte
		rand.Read(ref[:])
		err = p.cfg.Store.FundFromFees(ctx, key.AccountID, topUp, fmt.Sprintf("probes:%x", ref), p.cfg.Now())
		if !errors.Is(err, store.ErrInsufficient) {
			break
		}
	}
	switch {
	case errors.Is(err, store.ErrInsufficient):
		return errUnfunded
	case err != nil:
		return fmt.Errorf("fund the probes: %w", err)
	}
	return p.cfg.Ledger.Hold(ctx, requestID, key, amount)
}

// errUnfunded: the platform's fees cannot pay a probe now.
var errUnfunded = errors.New("the platform's fees cannot pay the probes")

// warnUnfunded says, at most every 10 minutes, that probes run unpaid.
func (p *Prober) warnUnfunded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := p.cfg.Now(); now.Sub(p.warned) > 10*time.Minute {
		p.warned = now
		p.log.Warn("probes run unpaid: the platform's fee income does not cover them yet")
	}
}

// DefaultProbePriceCap bounds what a probe pays a node per million tokens, in and out, when no
// other node's ask to compare with exists.
const DefaultProbePriceCap = money.Price(money.USD)

// probeAsk is what a probe pays the node: its ask, but no more than the median ask of the
// verified nodes serving the model (or the cap, without them), so that a node cannot ask a
// fortune to be paid it by the probes.
func (p *Prober) probeAsk(o *fleet.Offer) ledger.Ask {
	var ins, outs []float64
	for _, peer := range p.cfg.Fleet.Offers(o.Model) {
		if l := peer.Node.Level(); peer.Node != o.Node && (l == store.LevelVerified || l == store.LevelTrusted) {
			ins, outs = append(ins, float64(peer.InputPrice)), append(outs, float64(peer.OutputPrice))
		}
	}
	capIn, capOut := p.cfg.ProbePriceCap, p.cfg.ProbePriceCap
	if len(ins) > 0 {
		capIn, capOut = money.Price(median(ins)), money.Price(median(outs))
	}
	return ledger.Ask{Input: min(money.Price(o.InputPrice), capIn), Output: min(money.Price(o.OutputPrice), capOut)}
}
