package verify

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/core"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/store"
)

// reply is what a node answered to a check's request.
type reply struct {
	text, reasoning string
	finish          string         // the finish reason: "stop", "length", …
	usage           protocol.Usage // as the node claimed it
	// bill bills a check's job (core.Outcome.Settle); nil once billed.
	bill func(maxCompletion int)
}

// settle bills the job, once: as the core priced it (the node's claim within the
// coordinator's count of what it delivered) when maxCompletion < 0, else at most
// maxCompletion completion tokens, and a claim above that is flagged in the settlement as an
// over-claim (store.Node.Overclaims), as the ledger flags a claim beyond what the node
// delivered. An unpaid check's settles nothing.
func (a *reply) settle(maxCompletion int) {
	if a != nil && a.bill != nil {
		a.bill(maxCompletion)
		a.bill = nil
	}
}

// run sends req to the offer's node as a job, through the request core pinned to that node (no
// other node takes it over), and returns its reply, which the caller settles. The caller has
// taken a slot of the offer; the job frees it. A paid job is billed like a buyer's request to
// the platform's account, at the node's ask capped (probeAsk), so the node earns what it would
// for a buyer; an unpaid one (an onboarding check, or a probe the platform's fees cannot pay
// yet) is billed to no one. It may take CheckTimeout for each 1024 tokens of max_tokens begun
// (a reasoning model's check asks for thousands).
func (p *Prober) run(ctx context.Context, o *fleet.Offer, req *protocol.Request, paid bool) (*reply, error) {
	timeout := p.cfg.CheckTimeout * time.Duration(1+max(req.MaxTokens-1, 0)/1024)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var id [10]byte
	rand.Read(id[:])
	got := &collector{}
	r := &core.Request{ID: fmt.Sprintf("probe_%x", id), Job: req, Offer: o, Unbilled: !paid, Defer: true,
		StallTimeout: timeout, // a check waits for its node as long as it may take, not as a buyer does
		Answer:       func(core.Begin) relay.Sink { return got }}
	if paid {
		key, err := p.platformKey(ctx)
		if err != nil {
			o.Release()
			return nil, err
		}
		ask := p.probeAsk(o)
		r.Key, r.Ask = key, &ask
		r.Fund = func(ctx context.Context, need money.Nanos) error { return p.fund(ctx, key, need) }
	}
	out, err := p.cfg.Core.Serve(ctx, r)
	if err == nil && out.Usage.Outcome != store.OutcomeOK {
		err = fmt.Errorf("node %s: %s", o.Node.ID, cmp.Or(got.err, errors.New(out.Usage.Error)))
	}
	if err != nil {
		out.Settle(-1) // what was delivered, if anything
		return nil, err
	}
	return &reply{text: got.text.String(), reasoning: got.reasoning.String(), finish: out.Usage.FinishReason,
		usage: out.Claimed, bill: out.Settle}, nil
}

// collector is a check's answer, as the core relays it.
type collector struct {
	text, reasoning strings.Builder
	err             error // why the answer could not be finished
}

func (c *collector) Delta(d *protocol.Delta) error {
	c.text.WriteString(d.Text)
	c.reasoning.WriteString(d.Reasoning)
	return nil
}

func (c *collector) Flush() error                                  { return nil }
func (c *collector) End(string, protocol.Usage, money.Nanos) error { return nil }
func (c *collector) Fail(err error) error                          { c.err = err; return nil }

// fund tops the platform's account up from the platform's fees when a probe's hold finds it
// short (or, when they fall short, from the outside world: the operator's money, a deposit with
// ref platform-funding:…): enough for many probes if the fees have it, else for this one. It
// returns core.ErrUnfunded when they cannot pay even this one: the probe then runs unpaid.
func (p *Prober) fund(ctx context.Context, key *store.Key, need money.Nanos) error {
	var err error
	for _, topUp := range []money.Nanos{need * 100, need * 10, need} {
		var ref [8]byte
		rand.Read(ref[:])
		err = p.cfg.Store.FundFromFees(ctx, key.AccountID, topUp, fmt.Sprintf("probes:%x", ref), p.cfg.Now())
		if !errors.Is(err, store.ErrInsufficient) {
			break
		}
	}
	switch {
	case errors.Is(err, store.ErrInsufficient):
		p.warnUnfunded()
		return core.ErrUnfunded
	case err != nil:
		return fmt.Errorf("fund the probes: %w", err)
	}
	return nil
}

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
// nodes serving the model to buyers (or the cap, without them), so that a node cannot ask a
// fortune to be paid it by the probes.
func (p *Prober) probeAsk(o *fleet.Offer) ledger.Ask {
	var ins, outs []float64
	for _, peer := range p.cfg.Fleet.Offers(o.Model) {
		if peer.Node != o.Node && peer.Live() {
			ins, outs = append(ins, float64(peer.InputPrice)), append(outs, float64(peer.OutputPrice))
		}
	}
	capIn, capOut := p.cfg.ProbePriceCap, p.cfg.ProbePriceCap
	if len(ins) > 0 {
		capIn, capOut = money.Price(median(ins)), money.Price(median(outs))
	}
	return ledger.Ask{Input: min(money.Price(o.InputPrice), capIn), Output: min(money.Price(o.OutputPrice), capOut)}
}
