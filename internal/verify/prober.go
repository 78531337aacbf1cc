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
	// ScoreEvery is how often every connected node's score is recomputed and stored, and the
	// levels an operator set in the database are taken in. Default 1 minute.
	ScoreEvery time.Duration
	Log        *slog.Logger
	Now        func() time.Time
}

// PlatformAccount is the account that pays the probes: the platform's own, funded from its
// fees.
const PlatformAccount = "shareai-platform"

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
	busy    map[string]bool      // nodes being checked now
	due     map[string]time.Time // next probe of each node
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
	return &Prober{cfg: cfg, log: cfg.Log, busy: map[string]bool{}, due: map[string]time.Time{}, started: cfg.Now()}
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
	acct, err := st.Account(ctx, PlatformAccount)
	if errors.Is(err, store.ErrNotFound) {
		acct = &store.Account{ID: "acct_platform", Name: PlatformAccount, CreatedAt: p.cfg.Now()}
		if err = st.CreateAccount(ctx, acct); errors.Is(err, store.ErrConflict) {
			acct, err = st.Account(ctx, PlatformAccount)
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
		if !known || level == store.LevelNew {
			due = now.Add(p.nextGap()) // the first probe comes a while after the node is verified
			p.due[n.ID] = due
		}
		start := !p.busy[n.ID] && (level == store.LevelNew || !now.Before(due))
		if start {
			p.busy[n.ID] = true
			p.due[n.ID] = now.Add(p.nextGap())
		}
		p.mu.Unlock()
		if !start {
			continue
		}
		p.wg.Go(func() {
			defer func() {
				p.mu.Lock()
				delete(p.busy, n.ID)
				p.mu.Unlock()
			}()
			if level == store.LevelNew {
				p.onboard(ctx, n)
			} else {
				p.check(ctx, n, store.CheckProbe)
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
func (p *Prober) onboard(ctx context.Context, n *fleet.Node) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range max(p.cfg.Rules.OnboardingChecks, 1) {
		wg.Go(func() {
			p.check(ctx, n, store.CheckOnboarding)
			if n.Level() != store.LevelNew {
				cancel() // decided: the checks still running are of no use
			}
		})
	}
	wg.Wait()
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
	i := p.counter
	p.mu.Unlock()
	offer := n.Offers[i%len(n.Offers)]
	req := Probe(i, offer.Model)
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
	c.Passed, c.Detail = p.judge(ctx, n, offer, req, got, kind)
	return c, true
}

// Selftest checks a node as a new node's onboarding would, without recording anything or
// changing its level: what 'shareai provider selftest' shows its provider. It makes a check
// per onboarding check of the rules, retrying one that could not be made a few times.
func (p *Prober) Selftest(ctx context.Context, n *fleet.Node) *protocol.Selftest {
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

// judge compares an answer with the known answer, or with a reference node's.
func (p *Prober) judge(ctx context.Context, n *fleet.Node, offer *fleet.Offer, req *protocol.Request, got, kind string) (bool, string) {
	if want, ok := KnownAnswer(req); ok {
		if AgreeExact(got, want) {
			return true, "the known answer"
		}
		_, sim := Agree(got, want)
		return false, fmt.Sprintf("unlike the known answer (similarity %.2f)", sim)
	}
	ref := p.reference(n, offer)
	if ref == nil {
		// Nobody to compare with: the first node of a model passes on a well-formed answer,
		// and is compared once others serve the model.
		if strings.TrimSpace(got) == "" {
			return false, "an empty answer"
		}
		return true, "a well-formed answer; no other node to compare with"
	}
	want, err := p.run(ctx, ref, req, kind == store.CheckProbe) // reference took ref's slot
	if err != nil {
		return true, "a well-formed answer; the reference node could not answer"
	}
	agree, sim := Agree(got, want)
	if agree {
		return true, fmt.Sprintf("like node %s's answer (similarity %.2f)", ref.Node.ID, sim)
	}
	return false, fmt.Sprintf("unlike node %s's answer (similarity %.2f)", ref.Node.ID, sim)
}

// reference is a verified or trusted node of another provider serving the same model and
// quantization, with a free slot taken, or nil.
func (p *Prober) reference(n *fleet.Node, offer *fleet.Offer) *fleet.Offer {
	for _, o := range p.cfg.Fleet.Offers(offer.Model) {
		l := o.Node.Level()
		if o.Node == n || o.Node.AccountID == n.AccountID || (l != store.LevelVerified && l != store.LevelTrusted) ||
			!strings.EqualFold(o.Quantization, offer.Quantization) {
			continue
		}
		if o.Acquire() {
			return o
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
	job, err := p.cfg.Fleet.Dispatch(o, req)
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
	ask := ledger.Ask{Input: money.Price(o.InputPrice), Output: money.Price(o.OutputPrice)}
	if err := p.hold(ctx, key, requestID, p.cfg.Ledger.MaxCost(ask, bounds)); err != nil {
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
	topUp := max(amount*100, money.USD)
	ref := fmt.Sprintf("platform:%d", p.cfg.Now().UnixNano())
	err = p.cfg.Store.FundFromFees(ctx, key.AccountID, topUp, ref, p.cfg.Now())
	if errors.Is(err, store.ErrInsufficient) {
		err = p.cfg.Store.Deposit(ctx, key.AccountID, topUp, "platform-funding:"+ref, p.cfg.Now())
	}
	if err != nil {
		return fmt.Errorf("fund the probes: %w", err)
	}
	return p.cfg.Ledger.Hold(ctx, requestID, key, amount)
}
