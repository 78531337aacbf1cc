package verify

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
)

// reply is what a node answered to a check's request.
type reply struct {
	text, reasoning string
	finish          string         // the finish reason: "stop", "length", …
	usage           protocol.Usage // as the node claimed it
	// bill bills a paid check's job; nil when unpaid or billed.
	bill func(maxCompletion int)
}

// settle bills the job, once: the node's claim as it made it when maxCompletion < 0, else at
// most maxCompletion completion tokens, and a claim above that is flagged in the settlement
// as an over-claim (store.Node.Overclaims), as the ledger flags a claim beyond what the node
// delivered.
func (a *reply) settle(maxCompletion int) {
	if a != nil && a.bill != nil {
		a.bill(maxCompletion)
		a.bill = nil
	}
}

// run sends req to the offer's node as a job and returns its reply, which the caller settles.
// The caller has taken a slot of the offer; the job frees it. A paid job is billed like a
// buyer's request to the platform's account, so the node earns what it would for a buyer.
// It may take CheckTimeout for each 1024 tokens of max_tokens begun (a reasoning model's
// check asks for thousands).
func (p *Prober) run(ctx context.Context, o *fleet.Offer, req *protocol.Request, paid bool) (*reply, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CheckTimeout*time.Duration(1+max(req.MaxTokens-1, 0)/1024))
	defer cancel()
	var (
		bill func(end *protocol.End, delivered int, err error, maxCompletion int)
		err  error
	)
	if paid {
		if bill, err = p.pay(ctx, o, req); err != nil {
			o.Release()
			return nil, err
		}
	}
	job, err := p.cfg.Fleet.Dispatch(ctx, o, req)
	if err != nil {
		if bill != nil {
			bill(nil, 0, err, -1)
		}
		return nil, err
	}
	text, reasoning, end, delivered, err := collect(ctx, job)
	switch {
	case err == nil && end.Error != nil:
		err = fmt.Errorf("node %s: %s", o.Node.ID, end.Error.Message)
	case err == nil:
		a := &reply{text: text, reasoning: reasoning, finish: end.FinishReason, usage: end.Usage}
		if bill != nil {
			a.bill = func(maxCompletion int) { bill(end, delivered, nil, maxCompletion) }
		}
		return a, nil
	}
	if bill != nil {
		bill(end, delivered, err, -1)
	}
	return nil, err
}

// pay holds a probe's most possible cost on the platform's account, and returns what bills it
// when the job ends (or voids the hold when no job ran).
func (p *Prober) pay(ctx context.Context, o *fleet.Offer, req *protocol.Request) (func(*protocol.End, int, error, int), error) {
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
	return func(end *protocol.End, delivered int, err error, maxCompletion int) {
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
		inflated := false
		if end != nil {
			work.PromptTokens, work.CompletionTokens = end.Usage.PromptTokens, end.Usage.CompletionTokens
			if maxCompletion >= 0 && work.CompletionTokens > maxCompletion {
				work.CompletionTokens, inflated = maxCompletion, true
			}
		}
		if err != nil || end == nil || end.Error != nil {
			u.Outcome = store.OutcomeError
		}
		b := p.cfg.Ledger.Price(requestID, bounds, []ledger.Work{work})
		if inflated && !slices.Contains(b.Settlement.Flagged, o.Node.ID) {
			b.Settlement.Flagged = append(b.Settlement.Flagged, o.Node.ID)
		}
		u.PromptTokens, u.CompletionTokens = b.PromptTokens, b.CompletionTokens
		p.cfg.Ledger.SettleLater(b, u)
	}, nil
}

// collect reads a job to its end: the answer's text and reasoning, the end, and the bytes
// delivered.
func collect(ctx context.Context, job *fleet.Job) (text, reasoning string, end *protocol.End, delivered int, err error) {
	var b, r strings.Builder
	for {
		fr, err := job.Next(ctx)
		if err != nil {
			job.Cancel()
			return b.String(), r.String(), nil, delivered, err
		}
		if fr.Delta != nil {
			b.WriteString(fr.Delta.Text)
			r.WriteString(fr.Delta.Reasoning)
			delivered += len(fr.Delta.Text) + len(fr.Delta.Reasoning) + len(fr.Delta.ToolCalls)
		}
		if fr.Type == protocol.TypeEnd {
			return b.String(), r.String(), fr.End, delivered, nil
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
