package matcher

import (
	"math/bits"

	"github.com/shareai/shareai/internal/tier"
)

// A tracked Pick whose walk found no node free for the request refuses it, counting each
// node's reason (NoProvider). Checking every node for that costs a read of each one's
// candidate: at 100,000 nodes, milliseconds, at saturation, for every request that arrives.
// refusal counts them with bitmaps instead, a few thousand words per filter: the sets a
// filter lets through (the countries', the thresholds'), the index's own sets of nodes that
// refuse bronze or cannot continue an answer, ANDed in check's order, so that each node counts
// under the first reason that applies, as check would say. The nodes that are not live
// (paused, quarantined, not verified, no slots), which the thresholds' orders do not hold,
// are few and checked one by one. Every live node the filters let through is busy: the walk
// found none free.

// staticBits are an index's sets that no request changes, over its candidates.
type staticBits struct {
	live       []uint64 // live (order.go)
	noBronze   []uint64 // refuses bronze
	noContinue []uint64 // cannot continue an answer
	notLive    []int32  // the candidates not live, by number
}

// static returns the index's staticBits, built at their first use.
func (ix *Index) static() *staticBits {
	return ix.statics.get(func() *staticBits {
		words := (len(ix.cands) + 63) / 64
		sb := &staticBits{live: make([]uint64, words), noBronze: make([]uint64, words), noContinue: make([]uint64, words)}
		for i := range ix.cands {
			c := &ix.cands[i]
			if !live(c) {
				sb.notLive = append(sb.notLive, int32(i))
				continue
			}
			setBit(sb.live, i)
			if c.NoBronze {
				setBit(sb.noBronze, i)
			}
			if !c.Continues {
				setBit(sb.noContinue, i)
			}
		}
		return sb
	})
}

// refusal counts the reason of each candidate, for a request that f filters and no node can
// take, into counts. It reports false, counting nothing, for filters it has no sets for
// (ignore, only or order lists, quantizations, batch work), or when the countries' bitmap
// could not be cached: the caller walks every node instead. The nodes a request excludes (those
// that failed it, on a retry) are found by their ids.
func (ix *Index) refusal(f *filter, counts *[numReasons]int) bool {
	p := &f.p
	if f.ignore.n > 0 || f.only.n > 0 || f.order.n > 0 || len(p.Quantizations) > 0 || f.batch {
		return false
	}
	var regions []uint64
	if f.inRegions {
		if regions = ix.regions.get(&f.regions, len(ix.cands), ix.countryMembers()); regions == nil {
			return false
		}
	}
	sb := ix.static()
	left := getBits(len(ix.cands))
	defer putBits(left)
	copy(left, sb.live)
	if len(f.excluded) > 0 {
		counts[excluded] += ix.dropExcluded(f, left)
	}
	if regions != nil {
		counts[outsideRegion] += keep(left, regions)
	}
	var ths [3]threshold
	for _, th := range thresholdsOf(p, ths[:0]) {
		if th.a == attrReliability {
			continue // after noBronze, as check tests it
		}
		counts[overPrice] += ix.keepWithin(f, th, left)
	}
	if f.tier == tier.Bronze {
		counts[noBronze] += drop(left, sb.noBronze)
	}
	if p.MinReliability != nil {
		counts[unreliable] += ix.keepWithin(f, threshold{a: attrReliability, reliability: *p.MinReliability}, left)
	}
	if f.continues {
		counts[noContinue] += drop(left, sb.noContinue)
	}
	counts[busy] += ones(left)
	for _, i := range sb.notLive {
		why, _ := f.check(&ix.cands[i]) // never eligible: one without slots is busy
		counts[why]++
	}
	return true
}

// keepWithin keeps in left only the candidates within threshold th of f, and returns how
// many it cleared: the step that holds them all by its bitmap, then the rest of that step,
// over th, one by one. Nothing is copied.
func (ix *Index) keepWithin(f *filter, th threshold, left []uint64) int {
	ao, tb := ix.thresholdOf(th.a)
	m := prefixLen(ix.cands, ao, func(c *Candidate) bool { return th.within(f, c) })
	k := m / tb.q
	if k >= len(tb.cum) {
		return 0 // every live candidate is within
	}
	n := keep(left, tb.cum[k])
	for _, i := range ao.byValue[m:min((k+1)*tb.q, len(ao.byValue))] {
		if w, b := i/64, uint64(1)<<(i%64); left[w]&b != 0 {
			left[w] &^= b
			n++
		}
	}
	return n
}

// keep keeps in left only the bits set in in, and returns how many it cleared.
func keep(left, in []uint64) int {
	n := 0
	for w := range left {
		n += bits.OnesCount64(left[w] &^ in[w])
		left[w] &= in[w]
	}
	return n
}

// drop clears in left the bits set in out, and returns how many it cleared.
func drop(left, out []uint64) int {
	n := 0
	for w := range left {
		n += bits.OnesCount64(left[w] & out[w])
		left[w] &^= out[w]
	}
	return n
}

// ones returns how many bits of b are set.
func ones(b []uint64) int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// anyFree reports whether the free map holds a node of f's tier that f's countries and
// thresholds let through. False means that no node can take the
// job now; true, that one may (the other filters are not in it). A walk that has read many
// places asks, so that one that would read them all to find none stops.
func (ix *Index) anyFree(f *filter) bool {
	w := ix.newPickWalk(f)
	ix.narrowWalk(f, &w)
	defer w.release()
	return ix.fm.nextFree(0, len(ix.cands), f.tier, w.bitmaps()) < len(ix.cands)
}

// dropExcluded clears from left the candidates of the nodes f excludes, and returns how many
// it cleared.
func (ix *Index) dropExcluded(f *filter, left []uint64) int {
	x := ix.idNumbers()
	byID := x.candidates()
	n := 0
	for id := range f.excluded {
		num, ok := x.num[id]
		if !ok {
			continue
		}
		for _, i := range byID[num] {
			if ix.cands[i].NodeID != id {
				continue // the id is this candidate's provider's
			}
			if w, b := i/64, uint64(1)<<(i%64); left[w]&b != 0 {
				left[w] &^= b
				n++
			}
		}
	}
	return n
}
