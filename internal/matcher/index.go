package matcher

import (
	"cmp"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
)

// Index holds one model's candidates sorted for the default auction (trusted before verified,
// then effective price), in groups: nodes of equal standing whose effective prices are near
// (within the tolerance of the group's cheapest), the warm ones, then the cold ones. For
// preferences that keep that order — sort by price, no order list, no preferred latency — Pick
// walks from the best group and stops in the first where it takes a slot, at most one
// eligible node past the first it finds, so a decision costs about as many checks as there
// are better but ineligible nodes, not one per node of the fleet. For other preferences,
// Match and Take walk the index's order for the request's sort (walk.go).
//
// An Index is read-only once built, but for the rotation that spreads decisions over a group
// and the orders it builds at their first use (once each), and may be shared by concurrent
// decisions.
type Index struct {
	cands  []Candidate
	groups []int // start of each group, then len(cands)

	seed sync.Once
	turn atomic.Uint64 // the last decision's place in the rotation

	// The orders Match walks (walk.go, order.go), each built at its first use.
	sorts [numSorts]lazy[*sortIndex]
	// byPrice is the candidate numbers by standing and effective price, as NewIndex sorted
	// them: the price order's start.
	byPrice []int32
	ids     lazy[*idIndex]
	attrs   [numAttrs]lazy[*attrOrder]
	// countries holds each country's candidate numbers, live or not (regionIndex).
	countries lazy[*[26 * 26][]int32]

	// fm, once the index is tracked (Track), says which candidates may take a job (free.go);
	// regions, by set of countries asked for, which candidates are in them, and thresholds,
	// by attribute, which are within a bound: Pick's walk ANDs them (pickWalk), so that it
	// skips the free nodes a request's filters refuse as it skips the full ones.
	fm         *freeMap
	regions    regionMaps
	thresholds [numAttrs]lazy[*thresholdBits]
	// statics are the sets a tracked index's refusal counts with (refusal.go).
	statics lazy[*staticBits]
}

// countryMembers returns each country's candidates, by number.
func (ix *Index) countryMembers() *[26 * 26][]int32 {
	return ix.countries.get(func() *[26 * 26][]int32 {
		var m [26 * 26][]int32
		for i := range ix.cands {
			if r := regionIndex(ix.cands[i].Region); r >= 0 {
				m[r] = append(m[r], int32(i))
			}
		}
		return &m
	})
}

// sorted returns the candidates' order for sort s.
func (ix *Index) sorted(s int) *sortIndex {
	return ix.sorts[s].get(func() *sortIndex {
		var presorted []int32
		if s == byPrice {
			presorted = ix.byPrice
		}
		return newSortIndex(ix.cands, s, presorted)
	})
}

// idNumbers returns the numbers of the candidates' node and provider ids.
func (ix *Index) idNumbers() *idIndex {
	return ix.ids.get(func() *idIndex { return newIDIndex(ix.cands) })
}

// attrOrder returns the candidates' order by attribute a.
func (ix *Index) attrOrder(a int) *attrOrder {
	return ix.attrs[a].get(func() *attrOrder { return newAttrOrder(ix.cands, a) })
}

// NewIndex sorts a copy of cands and groups them. A group starts at the cheapest node not in
// an earlier one and holds the nodes of its standing within the tolerance of it: its nodes
// are all near one another, and each node of a later group is beyond the tolerance of the
// first of every earlier group of its standing.
func NewIndex(cands []Candidate) *Index {
	// Sort keys, not candidates: a candidate is a few hundred bytes to move.
	type keyed struct {
		standing int
		price    float64
		i        int
	}
	ks := make([]keyed, len(cands))
	for i := range cands {
		ks[i] = keyed{cands[i].Level.standing(), effectivePrice(&cands[i]), i}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(a.standing, b.standing), cmp.Compare(a.price, b.price), cmp.Compare(a.i, b.i))
	})
	ix := &Index{cands: make([]Candidate, 0, len(cands))}
	at := make([]int32, len(cands)) // by the number in cands: the number in ix.cands
	for start := 0; start < len(ks); {
		end := start + 1
		for end < len(ks) && ks[end].standing == ks[start].standing && near(ks[start].price, ks[end].price) {
			end++
		}
		// Warm before cold: a node with the model loaded answers sooner.
		group := len(ix.cands)
		ix.groups = append(ix.groups, group)
		for _, k := range ks[start:end] {
			if cands[k.i].Warm {
				at[k.i] = int32(len(ix.cands))
				ix.cands = append(ix.cands, cands[k.i])
			}
		}
		if warm := len(ix.cands) - group; warm > 0 && warm < end-start {
			ix.groups = append(ix.groups, len(ix.cands)) // the cold ones
		}
		for _, k := range ks[start:end] {
			if !cands[k.i].Warm {
				at[k.i] = int32(len(ix.cands))
				ix.cands = append(ix.cands, cands[k.i])
			}
		}
		start = end
	}
	ix.groups = append(ix.groups, len(ix.cands))
	ix.byPrice = make([]int32, len(ks))
	for j, k := range ks {
		ix.byPrice[j] = at[k.i]
	}
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
// that are Walkable: of the first group with an eligible node that has a free slot (so its
// effective price is within the tolerance of the best eligible node's), a node chosen by take.
// When nothing is eligible, the error is a *NoProvider counting each node's reason.
//
// A tracked index (Track) walks only the nodes that may take a job, skipping the full ones
// 64 at a time; when it finds none, it counts their reasons from bitmaps (refusal), or,
// for filters it has none for, walks every node as an index not tracked does.
//
// Preferences that allow only a few of many nodes (a region with few of them, a short only
// list) are walked as Take walks them: through the nodes they allow, not past all the others.
func (ix *Index) Pick(req Request) (Candidate, error) {
	f := newFilter(req)
	if ix.narrow(&f) {
		return ix.Take(req)
	}
	var counts [numReasons]int
	w := ix.newPickWalk(&f)
	defer w.release()
	turn := ix.next(req.Rand)
	if ix.fm != nil {
		if c := ix.walkGroups(&f, turn, true, &w, &counts); c != nil {
			return *c, nil
		}
		if counts = [numReasons]int{}; ix.refusal(&f, &counts) {
			return Candidate{}, newNoProvider(req.Model, len(ix.cands), &counts, req.Prefs.Regions)
		}
		counts = [numReasons]int{}
	}
	if c := ix.walkGroups(&f, turn, false, &w, &counts); c != nil {
		return *c, nil
	}
	return Candidate{}, newNoProvider(req.Model, len(ix.cands), &counts, req.Prefs.Regions)
}

// walkGroups walks the groups best first, each from the decision's place in the rotation
// (take), and returns the node it takes a slot on, or nil.
func (ix *Index) walkGroups(f *filter, turn uint64, skip bool, w *pickWalk, counts *[numReasons]int) *Candidate {
	for g := 0; g+1 < len(ix.groups); g++ {
		start, end := ix.groups[g], ix.groups[g+1]
		if c := ix.take(f, start, end, int(turn%uint64(end-start)), skip, w, counts); c != nil {
			return c
		}
	}
	return nil
}

// narrow reports whether the only list or regions of f allow at most 1/narrowShare of a fleet
// of more than smallSpan nodes.
func (ix *Index) narrow(f *filter) bool {
	p := &f.p
	if len(p.Only) == 0 && len(p.Regions) == 0 || len(ix.cands) <= smallSpan {
		return false
	}
	limit := len(ix.cands) / narrowShare
	if len(p.Regions) > 0 {
		n, members := 0, ix.countryMembers()
		for w, word := range f.regions {
			for ; word != 0; word &= word - 1 {
				n += len(members[w*64+bits.TrailingZeros64(word)])
			}
		}
		if n <= limit {
			return true
		}
	}
	if len(p.Only) == 0 {
		return false
	}
	n, x := 0, ix.idNumbers()
	for _, id := range p.Only {
		if k, ok := x.num[id]; ok {
			n += int(x.count[k])
		}
	}
	return n <= limit
}

// narrowShare: see narrow. The group walk meets about narrowShare ineligible nodes for each
// eligible one at that share: a few hundred nanoseconds.
const narrowShare = 32

// next returns a decision's place in the rotation: the index's first decision draws it at
// random, each later one is one further, so that successive decisions start their walk of a
// group at successive nodes and equal nodes take turns, even when all are idle.
func (ix *Index) next(r *rand.Rand) uint64 {
	ix.seed.Do(func() { ix.turn.Store(random(r)) })
	return ix.turn.Add(1)
}

// pickWalk is what a tracked Pick's walk skips besides the full nodes: the candidates whose
// bit is clear in one of its bitmaps. The first is the allowed countries' candidates (a
// cached bitmap, read as it is); once the walk has checked intersectAfter nodes it could not
// take, the candidates within the request's max_price and min_reliability join them, exactly,
// in one bitmap from scratch (own): at peak the nodes under a price cap are the full ones,
// and the walk would check every free node over it.
type pickWalk struct {
	in       [2][]uint64
	n        int      // bitmaps in in
	own      []uint64 // from scratch, given back by release
	checked  int
	narrowed bool
	ths      [3]threshold
}

// newPickWalk returns a tracked Pick's walk for f, skipping the countries f does not allow
// (unless their bitmap could not be cached); an untracked index's skips nothing.
func (ix *Index) newPickWalk(f *filter) pickWalk {
	var w pickWalk
	if ix.fm != nil && f.inRegions {
		if in := ix.regions.get(&f.regions, len(ix.cands), ix.countryMembers()); in != nil {
			w.add(in)
		}
	}
	return w
}

// bitmaps returns the walk's bitmaps.
func (w *pickWalk) bitmaps() [][]uint64 { return w.in[:w.n] }

func (w *pickWalk) add(b []uint64) {
	w.in[w.n] = b
	w.n++
}

// release gives the walk's own bitmap back to scratch: the walk is over.
func (w *pickWalk) release() { putBits(w.own) }

// narrowWalk adds to w the candidates within f's thresholds, if f has any: every candidate,
// then for each threshold as a refusal keeps them (keepWithin: the cached bitmap of the step
// that holds them all, and the rest of that step cleared one by one), 1–3 µs at 100,000
// nodes. (Reading the steps as they are, uncopied, left up to a step's candidates, 1/64 of
// the fleet, for the walk to check one by one: 12 µs p50 when they are the free ones.)
func (ix *Index) narrowWalk(f *filter, w *pickWalk) {
	w.narrowed = true
	ths := thresholdsOf(&f.p, w.ths[:0])
	if len(ths) == 0 {
		return
	}
	w.own = getBits(len(ix.cands))
	_, tb := ix.thresholdOf(ths[0].a)
	copy(w.own, tb.cum[len(tb.cum)-1]) // the last step holds every candidate
	for _, th := range ths {
		ix.keepWithin(f, th, w.own)
	}
	w.add(w.own)
}

// thresholdOf returns attribute a's order and its threshold bitmaps over the candidates.
func (ix *Index) thresholdOf(a int) (*attrOrder, *thresholdBits) {
	ao := ix.attrOrder(a)
	return ao, ix.thresholds[a].get(func() *thresholdBits { return newThresholdBits(ao, len(ix.cands), nil) })
}

// take takes a slot on a node of the group of candidates [start, end), walking it from
// start+from: of the first two eligible nodes it meets, the less loaded (the first when both
// are equal, and at once when it is idle), so that equal nodes share the load as well as the
// requests at the cost of one check more. A node whose slots are all taken is skipped; with
// skip, so are those the free map says can take no job and those w skips, unchecked. It
// counts the reason of each node it finds ineligible, or busy, and returns nil when it takes
// none.
func (ix *Index) take(f *filter, start, end, from int, skip bool, w *pickWalk, counts *[numReasons]int) *Candidate {
	held := -1 // the first eligible node met, not idle: the next may be less loaded
	for _, seg := range [2][2]int{{start + from, end}, {start, start + from}} {
		for i := seg[0]; ; i++ {
			if skip {
				i = ix.fm.nextFree(i, seg[1], f.tier, w.bitmaps())
			}
			if i >= seg[1] {
				break
			}
			c := &ix.cands[i]
			why, _ := f.check(c)
			if !skip && (why == busy || why == eligible) && !ix.mayTake(i, f.tier) {
				counts[busy]++ // full, the free map says: no slot to read again, nothing to clear
				continue
			}
			if why == busy && c.Slot != nil && c.Slot.Running() < c.Slots(f.tier) {
				why = eligible // the snapshot's count is older than the slots: the live one decides
			}
			if why != eligible {
				counts[why]++
				ix.clear(i, why)
				if w.checked++; skip && w.checked == intersectAfter && !w.narrowed {
					ix.narrowWalk(f, w)
				}
				continue
			}
			if held < 0 && liveLoad(c) > 0 {
				held = i
				continue
			}
			a, b := i, held
			if b >= 0 && liveLoad(&ix.cands[b]) <= liveLoad(c) {
				a, b = b, a
			}
			if ix.acquire(f, a, counts) {
				return &ix.cands[a]
			}
			if b >= 0 && ix.acquire(f, b, counts) {
				return &ix.cands[b]
			}
			held = -1
		}
	}
	if held >= 0 && ix.acquire(f, held, counts) {
		return &ix.cands[held]
	}
	return nil
}

// acquire takes a slot on candidate i for the request's tier, counting it busy when none is
// free since the snapshot; the free map learns when it took the last one. A candidate
// without a slot is taken without one.
func (ix *Index) acquire(f *filter, i int, counts *[numReasons]int) bool {
	c := &ix.cands[i]
	if c.Slot == nil {
		return true
	}
	ok := c.Slot.AcquireFor(f.tier)
	if !ok {
		counts[busy]++
	}
	ix.clear(i, busy) // clears only while every slot is taken
	return ok
}

// liveLoad is the share of c's slots in use now, or in the snapshot without a slot.
func liveLoad(c *Candidate) float64 {
	running := c.Running
	if c.Slot != nil {
		running = c.Slot.Running()
	}
	return float64(running) / float64(c.MaxConcurrent)
}

// random draws a uint64 from r, or from math/rand/v2's global source when r is nil.
func random(r *rand.Rand) uint64 {
	if r != nil {
		return r.Uint64()
	}
	return rand.Uint64()
}
