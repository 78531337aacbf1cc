package simulate

import (
	"fmt"

	"github.com/shareai/shareai/internal/matcher"
)

// Policy is how the simulator picks a request's node.
type Policy uint8

const (
	// Auction is the coordinator's own decision: the matcher's default auction (matcher.Index's
	// Pick) for preferences that keep its order, else matcher.Match and Ranking.Pick, exactly as
	// the core's match does.
	Auction Policy = iota
	// Cheapest takes the eligible node with the lowest ask (input + output per million tokens),
	// blind to reliability and to the auction's sharing of near asks.
	Cheapest
	// LeastLoaded takes the eligible node with the smallest share of its slots in use.
	LeastLoaded
	// Random takes an eligible node at random.
	Random
)

// Policies lists the policies, the coordinator's first.
var Policies = []Policy{Auction, Cheapest, LeastLoaded, Random}

var policyNames = [...]string{Auction: "auction", Cheapest: "cheapest", LeastLoaded: "least-loaded", Random: "random"}

func (p Policy) String() string { return policyNames[p] }

// ParsePolicy reads a policy's name.
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if n == s {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("unknown policy %q: want auction, cheapest, least-loaded or random", s)
}

// decide takes a slot for mreq on one of m's nodes, by the run's policy.
//
// The auction is the core's match, call for call: the index's Pick for preferences it walks,
// else Match and Pick over the model's candidates (whose slot counts are live here, where the
// core's are at most 250 ms old). The other policies are not the coordinator's: they choose
// among the nodes the matcher says are eligible (matcher.Fit), and take the slot through the
// node's matcher.Slot; when none is eligible, the error is the matcher's own (Match and Pick),
// so that the request waits or fails as it would.
func (p *part) decide(m *model, mreq matcher.Request) (matcher.Candidate, error) {
	ix := p.index(m)
	if p.w.opts.Policy == Auction {
		if matcher.Walkable(mreq.Prefs) && !mreq.Batch { // batch work ranks idle nodes first
			return ix.Pick(mreq)
		}
		return matcher.Match(mreq, m.cands).Pick()
	}
	fit := matcher.NewFit(mreq)
	cands := m.cands
	best, seen := -1, 0
	var bestScore float64
	for i := range cands {
		c := &cands[i]
		o := c.Slot.(*offer)
		if !fit.Admits(c) {
			continue
		}
		var score float64
		switch p.w.opts.Policy {
		case Cheapest:
			score = float64(c.InputPrice + c.OutputPrice)
		case LeastLoaded:
			score = float64(o.running) / float64(c.MaxConcurrent)
		case Random:
			score = 0
		}
		switch {
		case best < 0 || score < bestScore:
			best, bestScore, seen = i, score, 1
		case score == bestScore:
			// Ties at random, each of the tied equally likely (reservoir sampling).
			seen++
			if p.rng.IntN(seen) == 0 {
				best = i
			}
		}
	}
	if best < 0 || !cands[best].Slot.AcquireFor(mreq.Tier) {
		return matcher.Match(mreq, cands).Pick()
	}
	return cands[best], nil
}
