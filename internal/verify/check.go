package verify

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strings"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
)

// How a check is judged, in order:
//
//  1. A model whose answers are known in advance (the simulated engine's, named "sim/…"): a
//     probe, whose answer must be the known one, byte for byte. A node cannot skip a check by
//     naming its model so: it must then answer as the simulated engine does, exactly.
//  2. Another model that no node of another provider serves to buyers yet (or a selftest): a
//     reference-free check ([ReferenceFree]), whose three answers must each pass. A model that
//     reasons first (by its name, [Reasoning], or seen reasoning in an answer) gets a
//     max_tokens of thousands. An answer cut by that limit before it answered (finish reason
//     "length", with no answer, or from a model that reasons) decides nothing: the check is
//     made again later, with the larger max_tokens; only a model cut so with the larger one
//     in maxCuts checks in a row fails, so that a node cannot escape every check by
//     answering "length".
//  3. Otherwise a probe, whose answer must agree with the answer of a verified node of another
//     provider serving the model ([Agree]); when none has a free slot now, no check is made.
//
// Every request fits the node's advertised context length ([FitProbe]). When an answer agrees,
// the node's claim of completion tokens is compared with the known or reference count
// ([Inflated]): a paid probe's inflated claim is billed at that count and flagged as an
// over-claim (which the rules count as a failed usage check, see levels.go); an onboarding
// check, which nothing pays, fails.

// paid says whether a check of kind is paid: probes are, like buyers' requests; onboarding
// checks are not.
func paid(kind string) bool { return kind != store.CheckOnboarding }

// checkOnce sends one check of an offer to its node and judges the answers, recording nothing.
func (p *Prober) checkOnce(ctx context.Context, n *fleet.Node, offer *fleet.Offer, kind string) (store.NodeCheck, bool) {
	p.mu.Lock()
	p.prompts++
	prompt := p.prompts + mrand.IntN(NumProbes) // every model gets every prompt
	seed := mrand.Uint64()
	p.mu.Unlock()
	c := store.NodeCheck{NodeID: n.ID, Kind: kind, Model: offer.Model}
	var conclusive bool
	if !Known(offer.Model) && (n.Selftest || !p.serves(n, offer.Model)) {
		thinks := Reasoning(offer.Model) || p.seenThinking(n, offer.Model)
		tests := ReferenceFree(seed, offer.Model, offer.ContextLength, thinks)
		c.Passed, c.Detail, conclusive = p.referenceFree(ctx, n, offer, tests, thinks, kind)
	} else {
		c.Passed, c.Detail, conclusive = p.probe(ctx, n, offer, FitProbe(prompt, offer.Model, offer.ContextLength), kind)
	}
	c.At = p.cfg.Now()
	return c, conclusive
}

// probe sends req to the offer's node and compares the answer with the known answer, or with a
// reference node's. conclusive is false when no check could be made.
func (p *Prober) probe(ctx context.Context, n *fleet.Node, offer *fleet.Offer, req *protocol.Request, kind string) (passed bool, detail string, conclusive bool) {
	if !offer.Acquire() {
		return false, "", false // busy with buyers' jobs: probe later
	}
	got, err := p.run(ctx, offer, req, paid(kind))
	if err != nil {
		if ctx.Err() == nil {
			p.log.Debug("check not made", "node", n.ID, "err", err)
		}
		return false, "", false
	}
	defer got.settle(-1)
	if want, tokens, ok := known(req); ok {
		if !AgreeExact(got.text, want) {
			if n.Selftest {
				return false, "unlike the known answer", true
			}
			_, sim := Agree(got.text, want)
			return false, fmt.Sprintf("unlike the known answer (similarity %.2f)", sim), true
		}
		return p.claim(got, tokens, want, "the known answer", kind)
	}
	ref := p.reference(n, offer)
	if ref == nil {
		return false, "", false // no node free to compare with now: probe again later
	}
	want, err := p.run(ctx, ref, req, paid(kind)) // reference took ref's slot
	if err != nil {
		return false, "", false
	}
	want.settle(-1)
	agree, sim := Agree(got.text, want.text)
	if !agree {
		return false, fmt.Sprintf("unlike another node's answer (similarity %.2f)", sim), true
	}
	return p.claim(got, want.usage.CompletionTokens, want.text, fmt.Sprintf("like another node's answer (similarity %.2f)", sim), kind)
}

// claim judges the usage claim of an answer that agreed with a reference (refTokens for its
// text ref), and settles it: an inflated claim of a paid probe is billed at the reference's
// count and flagged, and the check passes on its answer; on an onboarding check it fails.
func (p *Prober) claim(got *reply, refTokens int, ref, like, kind string) (passed bool, detail string, conclusive bool) {
	expected, inflated := Inflated(got.usage.CompletionTokens, got.text, refTokens, ref)
	if !inflated {
		got.settle(-1)
		return true, like, true
	}
	why := fmt.Sprintf("%s, but %d completion tokens claimed where the reference counts %d", like, got.usage.CompletionTokens, expected)
	if paid(kind) {
		got.settle(expected)
		return true, why + ": billed at the reference's count, an over-claim", true
	}
	return false, why, true
}

// maxCuts is how many reference-free checks in a row a model may have cut by the larger
// max_tokens before it answered, without failing: the last of them fails.
const maxCuts = 3

// referenceFree makes a reference-free check: its tests one after another, each on a slot of
// its own; it passes when every test passes. conclusive is false when a test could not be
// made, or its answer was cut by max_tokens before it was given (see check.go's top). thinks
// says that the tests give the model room to reason.
func (p *Prober) referenceFree(ctx context.Context, n *fleet.Node, offer *fleet.Offer, tests []Test, thinks bool, kind string) (passed bool, detail string, conclusive bool) {
	var did []string
	for _, t := range tests {
		if !offer.Acquire() {
			return false, "", false
		}
		got, err := p.run(ctx, offer, t.Request, paid(kind))
		if err != nil {
			if ctx.Err() == nil {
				p.log.Debug("check not made", "node", offer.Node.ID, "err", err)
			}
			return false, "", false
		}
		text := got.text
		answered := strings.TrimSpace(withoutThinking(text)) != ""
		if !answered {
			text = got.reasoning // a model that answered only in its reasoning
		}
		ok, what := t.Judge(text)
		got.settle(-1)
		thought := got.reasoning != "" || strings.Contains(got.text, "<think>") || strings.Contains(got.text, "</think>")
		if !ok && got.finish == "length" && (!answered || thought || thinks) {
			cuts := p.cutShort(n, offer.Model, thinks)
			if cuts < maxCuts {
				p.log.Debug("check not made: the answer was cut by max_tokens before it was given",
					"node", offer.Node.ID, "model", offer.Model, "max_tokens", t.Request.MaxTokens)
				return false, "", false
			}
			return false, fmt.Sprintf("reference-free %s test failed: the answer was cut by max_tokens (%d) before it was given, in %d checks in a row",
				t.Kind, t.Request.MaxTokens, cuts), true
		}
		p.answered(n, offer.Model, thought)
		if !ok {
			return false, fmt.Sprintf("reference-free %s test failed: %s", t.Kind, what), true
		}
		did = append(did, what)
	}
	return true, "reference-free checks, as no other node serves the model yet: " + strings.Join(did, "; "), true
}

// thinkingKey keys what the prober learned of a model on a node.
func thinkingKey(n *fleet.Node, model string) string { return n.ID + "\x00" + model }

// seenThinking says whether the node's model was seen reasoning, or cut short: its
// reference-free checks give it room to reason.
func (p *Prober) seenThinking(n *fleet.Node, model string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.thinks[thinkingKey(n, model)]
}

// maxRemembered bounds the nodes' models the prober remembers reasoning or cut short.
const maxRemembered = 1 << 16

// rememberThinking records that a node's model reasons; p.mu is held. When nodes and models
// churned past maxRemembered, it forgets them all rather than grow.
func (p *Prober) rememberThinking(k string) {
	if len(p.thinks) >= maxRemembered {
		clear(p.thinks)
		clear(p.cuts)
	}
	p.thinks[k] = true
}

// cutShort records a reference-free test of the node's model cut by max_tokens before it
// answered, and returns how many checks in a row were so with the larger max_tokens (thinks);
// one cut with the smaller gives the model the larger from then on, and does not count.
func (p *Prober) cutShort(n *fleet.Node, model string, thinks bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := thinkingKey(n, model)
	p.rememberThinking(k)
	if !thinks {
		return 0
	}
	p.cuts[k]++
	return p.cuts[k]
}

// answered records a reference-free test of the node's model that answered (rightly or not):
// its cuts in a row end; thought says that it reasoned first.
func (p *Prober) answered(n *fleet.Node, model string, thought bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := thinkingKey(n, model)
	delete(p.cuts, k)
	if thought {
		p.rememberThinking(k)
	}
}

// serves says whether a node of another provider serves model to buyers: verified or trusted,
// with the model verified on it.
func (p *Prober) serves(n *fleet.Node, model string) bool {
	for _, o := range p.cfg.Fleet.Offers(model) {
		if p.canReference(n, o) {
			return true
		}
	}
	return false
}

func (p *Prober) canReference(n *fleet.Node, o *fleet.Offer) bool {
	return o.Node != n && o.Node.AccountID != n.AccountID && o.Live()
}

// reference is a node of another provider serving the same model to buyers, with a free slot
// taken: one of the same quantization if any, else one of another (a node cannot escape
// comparison by naming its quantization uniquely); nil when none is free.
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
