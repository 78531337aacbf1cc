package matcher

import (
	"cmp"
	"math/rand/v2"
	"slices"
)

// Index holds one model's candidates sorted for the default auction (trusted before verified,
// then effective price, then warm before cold), in groups of equal standing. For preferences that keep that order — sort
// by price, no order list, no preferred latency — Pick walks from the best group and stops at
// the first eligible node with a free slot, so a decision costs about as many checks as there
// are better but ineligible nodes, not one per node of the fleet. Other preferences use Match
// over Candidates.
//
// An Index is read-only once built and may be shared by concurrent decisions.
type Index struct {
	cands  []Candidate
	groups []int // start of each group of equal standing, then len(cands)
}

// NewIndex sorts a copy of cands.
func NewIndex(cands []Candidate) *Index {
	ix := &Index{cands: slices.Clone(cands)}
	type keyed struct {
		standing int
		price    float64
		cold     bool
	}
	key := func(c *Candidate) keyed { return keyed{c.Level.standing(), effectivePrice(c), !c.Warm} }
	slices.SortStableFunc(ix.cands, func(a, b Candidate) int {
		ka, kb := key(&a), key(&b)
		if c := cmp.Compare(ka.standing, kb.standing); c != 0 {
			return c
		}
		if c := cmp.Compare(ka.price, kb.price); c != 0 {
			return c
		}
		switch {
		case ka.cold == kb.cold:
			return 0
		case kb.cold:
			return -1
		}
		return 1
	})
	for i := range ix.cands {
		if i == 0 || key(&ix.cands[i]) != key(&ix.cands[i-1]) {
			ix.groups = append(ix.groups, i)
		}
	}
	ix.groups = append(ix.groups, len(ix.cands))
	return ix
}

// Candidates returns the candidates, for Match.
func (ix *Index) Candidates() []Candidate { return ix.cands }

// Len returns the number of candidates.
func (ix *Index) Len() int { return len(ix.cands) }

// Walkable reports whether Pick serves these preferences: only when they rank as the index
// is sorted.
func Walkable(p Prefs) bool {
	return (p.Sort == "" || p.Sort == SortPrice) && len(p.Order) == 0 && p.PreferredMaxLatency == 0
}

// Pick takes a slot on the best eligible candidate, as Match and Pick would for preferences
// that are Walkable: equal nodes share traffic by starting each group's walk at a random node.
// A node whose slots are all taken is skipped. When nothing is eligible, the error is a
// *NoProvider counting each node's reason.
func (ix *Index) Pick(req Request) (Candidate, error) {
	f := newFilter(req)
	var counts [numReasons]int
	for g := 0; g+1 < len(ix.groups); g++ {
		group := ix.cands[ix.groups[g]:ix.groups[g+1]]
		start := int(uniform(req.Rand, uint64(len(group))))
		for j := range group {
			c := &group[(start+j)%len(group)]
			// The snapshot's count of running jobs may be older than the slots: the live one
			// decides, both ways.
			why, _ := f.check(c)
			switch {
			case why == busy && c.Offer != nil && c.Offer.AcquireFor(req.Tier):
				why = eligible
			case why == eligible && c.Offer != nil && !c.Offer.AcquireFor(req.Tier):
				why = busy
			}
			if why != eligible {
				counts[why]++
				continue
			}
			return *c, nil
		}
	}
	return Candidate{}, newNoProvider(req.Model, len(ix.cands), &counts, req.Prefs.Regions)
}

// uniform draws from [0, n).
func uniform(r *rand.Rand, n uint64) uint64 {
	if r != nil {
		return r.Uint64N(n)
	}
	return rand.Uint64N(n)
}
