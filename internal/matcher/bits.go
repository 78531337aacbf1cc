package matcher

import (
	"math/bits"
	"sort"
	"sync"

	"github.com/shareai/shareai/internal/money"
)

// Bitmaps over a sort's places, for the walk of a request with two filters or more that each
// let many nodes through (a region, a price cap, a reliability floor). The walk reads the
// smallest set that holds every node its filters let through; each filter's set may be half
// the fleet while together they let through only a few nodes, and the walk would read half
// the fleet to find them. intersect instead ANDs the filters' exact sets as bitmaps, one bit
// per place, and the walk reads only the places left: a few thousand words at 100,000 nodes.

// thresholdSteps is how many steps of an attribute's order a threshold's bitmaps hold
// (thresholdBits): a bound between two steps sets the bits of at most n/thresholdSteps
// candidates one by one.
const thresholdSteps = 64

// maxRegionBitmaps bounds a cache of region bitmaps (a sort's, or a tracked index's):
// requests name few sets of countries. A set that finds the cache full is walked as before.
const maxRegionBitmaps = 32

// thresholdBits holds, for an attribute, the places of the candidates best by it, step by
// step: cum[k] has the bit of each place whose candidate ranks below (k+1)·q in the
// attribute's order (attrOrder).
type thresholdBits struct {
	q   int
	cum [][]uint64
}

// thresholdOf returns attribute a's threshold bitmaps over si's places.
func (si *sortIndex) thresholdOf(ao *attrOrder, a int) *thresholdBits {
	return si.thresholds[a].get(func() *thresholdBits { return newThresholdBits(ao, len(si.order), si.place) })
}

// newThresholdBits builds the threshold bitmaps of ao's order over n bits: candidate i's
// is bit place[i], or bit i when place is nil.
func newThresholdBits(ao *attrOrder, n int, place []int32) *thresholdBits {
	words := (n + 63) / 64
	t := &thresholdBits{q: max(1, (n+thresholdSteps-1)/thresholdSteps)}
	steps := (n + t.q - 1) / t.q
	backing := make([]uint64, steps*words)
	t.cum = make([][]uint64, steps)
	for k := range t.cum {
		t.cum[k] = backing[k*words : (k+1)*words : (k+1)*words]
	}
	for r, i := range ao.byValue { // each step's own places, then each step's and those before
		setBit(t.cum[r/t.q], bitOf(i, place))
	}
	for k := 1; k < steps; k++ {
		for w, word := range t.cum[k-1] {
			t.cum[k][w] |= word
		}
	}
	return t
}

// bitOf returns candidate i's bit: place[i], or i when place is nil.
func bitOf(i int32, place []int32) int {
	if place == nil {
		return int(i)
	}
	return int(place[i])
}

// below sets into dst exactly the bits of the candidates that rank below m in ao (place: as
// newThresholdBits).
func (t *thresholdBits) below(dst []uint64, m int, ao *attrOrder, place []int32) {
	k := m / t.q
	if k == 0 {
		clear(dst)
	} else {
		copy(dst, t.cum[k-1])
	}
	for _, i := range ao.byValue[k*t.q : m] {
		setBit(dst, bitOf(i, place))
	}
}

// regionBits returns the bitmap of the places of the candidates in the countries of set, or
// nil when the cache is full and set is not in it.
func (si *sortIndex) regionBits(set *regionSet) []uint64 {
	return si.regions.get(set, len(si.order), &si.countries)
}

// regionMaps caches, by set of countries, the bitmap of the members of those countries.
type regionMaps struct {
	mu sync.Mutex
	m  map[regionSet][]uint64
}

// get returns the bitmap of n bits with the bits members lists for set's countries, or nil
// when the cache is full and set is not in it.
func (rm *regionMaps) get(set *regionSet, n int, members *[26 * 26][]int32) []uint64 {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if b, ok := rm.m[*set]; ok {
		return b
	}
	if len(rm.m) == maxRegionBitmaps {
		return nil
	}
	b := make([]uint64, (n+63)/64)
	for w, word := range set {
		for ; word != 0; word &= word - 1 {
			for _, p := range members[w*64+bits.TrailingZeros64(word)] {
				setBit(b, int(p))
			}
		}
	}
	if rm.m == nil {
		rm.m = make(map[regionSet][]uint64)
	}
	rm.m[*set] = b
	return b
}

// threshold is a filter's bound on an attribute (attrInput, attrOutput: price; or
// attrReliability: reliability): the candidates within it are a prefix of the attribute's
// order.
type threshold struct {
	a           int
	price       money.Price
	reliability float64
}

// intersect returns the places every filter of the request lets through, as a bitmap, when
// two filters or more have sets to intersect (regions, max_price, min_reliability); ok is
// false when fewer do, or the region's bitmap could not be cached. The bitmap comes from
// scratch.
func (r *Ranking) intersect(ths []threshold) (sp span, ok bool) {
	f, si := &r.f, r.si
	if len(ths)+b2i(f.inRegions) < 2 {
		return span{}, false
	}
	var regions []uint64
	if f.inRegions {
		if regions = si.regionBits(&f.regions); regions == nil {
			return span{}, false
		}
	}
	n := len(si.order)
	acc, tmp := getBits(n), getBits(n)
	defer putBits(tmp)
	for j, th := range ths {
		ao := r.ix.attrOrder(th.a)
		m := prefixLen(r.cands, ao, func(c *Candidate) bool { return th.within(f, c) })
		dst := tmp
		if j == 0 {
			dst = acc
		}
		r.si.thresholdOf(ao, th.a).below(dst, m, ao, si.place)
		if j > 0 {
			and(acc, tmp)
		}
	}
	if regions != nil {
		and(acc, regions)
	}
	size := 0
	for _, w := range acc {
		size += bits.OnesCount64(w)
	}
	return span{all: true, bits: acc, size: size}, true
}

// prefixLen returns how many of ao's candidates (of cands), best first, within is true for.
func prefixLen(cands []Candidate, ao *attrOrder, within func(*Candidate) bool) int {
	return sort.Search(len(ao.byValue), func(j int) bool { return !within(&cands[ao.byValue[j]]) })
}

func setBit(b []uint64, p int) { b[p/64] |= 1 << (p % 64) }

func and(dst, src []uint64) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] &= src[i]
	}
}

// nextSet returns the first place from j whose bit is set in b, or n.
func nextSet(b []uint64, j, n int) int {
	if j >= n {
		return n
	}
	w := j / 64
	word := b[w] >> (j % 64) << (j % 64)
	for word == 0 {
		if w++; w*64 >= n {
			return n
		}
		word = b[w]
	}
	return min(w*64+bits.TrailingZeros64(word), n)
}

// scratch keeps the bitmaps a decision works in (a walk's intersection, a narrowed Pick's
// thresholds, a refusal's sets) from one decision to the next. Not a sync.Pool: the garbage
// collector empties a pool, and once the runtime had returned the freed pages to the system,
// every decision faulted its bitmaps in again (1–2 minor faults, tens of µs at p99 at 100,000
// nodes). These stay allocated, at most scratchKept of them.
var scratch struct {
	mu   sync.Mutex
	free [][]uint64
}

// scratchKept bounds scratch: a few per concurrent decision.
const scratchKept = 64

// getBits returns a bitmap of at least n bits, from scratch when it keeps one large enough;
// its bits are not cleared.
func getBits(n int) []uint64 {
	words := (n + 63) / 64
	scratch.mu.Lock()
	for k := len(scratch.free) - 1; k >= 0; k-- {
		if b := scratch.free[k]; cap(b) >= words {
			last := len(scratch.free) - 1
			scratch.free[k] = scratch.free[last]
			scratch.free[last] = nil
			scratch.free = scratch.free[:last]
			scratch.mu.Unlock()
			return b[:words]
		}
	}
	scratch.mu.Unlock()
	return make([]uint64, words)
}

// putBits gives b back to scratch, once its decision is done with it.
func putBits(b []uint64) {
	if b == nil {
		return
	}
	scratch.mu.Lock()
	if len(scratch.free) < scratchKept {
		scratch.free = append(scratch.free, b)
	}
	scratch.mu.Unlock()
}
