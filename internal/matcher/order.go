package matcher

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"sync"
)

// The sorts an Index keeps an order for (sortIndex). The batch ranking (Request.Batch) has
// none: it scans.
const (
	byPrice = iota
	byLatency
	byThroughput
	numSorts
)

// sortOf is the order a request's sort ranks by; an unknown sort ranks by price, as key does.
func sortOf(s string) int {
	switch s {
	case SortLatency:
		return byLatency
	case SortThroughput:
		return byThroughput
	}
	return byPrice
}

var sortNames = [numSorts]string{SortPrice, SortLatency, SortThroughput}

// lazy is a value built at its first use, once, by whichever decision needs it first: an
// Index builds only the orders its decisions use.
type lazy[T any] struct {
	once sync.Once
	v    T
}

func (l *lazy[T]) get(build func() T) T {
	l.once.Do(func() { l.v = build() })
	return l.v
}

// live reports whether a candidate may ever be eligible: the checks that depend on no
// request. The orders hold only the live candidates; the others are counted by a walk that
// finds nothing (Ranking.count), with their reasons.
func live(c *Candidate) bool {
	return c.MaxConcurrent > 0 && !c.Paused && c.Level != Quarantined && c.Level != Unverified
}

// sortIndex is an Index's live candidates in the ranking order of one sort, as the walk
// (walk.go) reads them: by standing, then the sort's measure, its tie-break, load, and warm
// before cold; what the request adds (the order's tiers, preferred_max_latency) and its
// filters, the walk applies. Candidates equal in all of those form a group, in which a
// decision ranks them by its rotation (rankKey.rot): from a place drawn at random, around.
// A candidate's place is its position in the order.
type sortIndex struct {
	order      []int32 // candidate numbers (indices in the Index's candidates), by place
	place      []int32 // by candidate number: its place; -1 for one never eligible (live)
	start, end []int32 // by place: the first place of its group, and the place after its last
	// countries holds each country's places, ascending (regionIndex; unknown: none).
	countries [26 * 26][]int32
	// ids holds, by id number (idIndex), the places of the candidates with that node or
	// provider id, ascending.
	ids lazy[[][]int32]
	// levels holds, by attribute and side, the nested sets a threshold walks (levels).
	levels [numAttrs][numSides]lazy[[][]int32]
	// thresholds and regions are the bitmaps intersect ANDs (bits.go): by attribute, its
	// threshold's steps; by set of countries asked for, its places.
	thresholds [numAttrs]lazy[*thresholdBits]
	regions    regionMaps
}

// newSortIndex orders the live candidates of cands by sort s. presorted, if given, has the
// candidate numbers already by standing and the sort's measure: only runs equal in both are
// left to sort.
func newSortIndex(cands []Candidate, s int, presorted []int32) *sortIndex {
	f := newFilter(Request{Prefs: Prefs{Sort: sortNames[s]}})
	// Sort short keys, not candidates nor whole rankKeys.
	type keyed struct {
		u                        uint64 // standing and primary, in one number that orders as they do
		primary, secondary, load float64
		i                        int32
		standing, cold           int8
	}
	ks := make([]keyed, 0, len(cands))
	add := func(i int) {
		if c := &cands[i]; live(c) {
			var k rankKey
			f.key(c, 0, &k)
			ks = append(ks, keyed{uint64(k.standing)<<63 | orderedBits(k.primary)>>1, k.primary, k.secondary, k.load,
				int32(i), int8(k.standing), int8(b2i(k.cold))})
		}
	}
	same := func(a, b *keyed) bool { // as compareKeys
		return a.standing == b.standing && a.primary == b.primary && a.secondary == b.secondary && a.load == b.load && a.cold == b.cold
	}
	order := func(a, b keyed) int {
		switch {
		case a.u != b.u:
			return cmp.Compare(a.u, b.u)
		case a.standing != b.standing:
			return int(a.standing) - int(b.standing)
		case a.primary != b.primary:
			return cmp.Compare(a.primary, b.primary)
		case a.secondary != b.secondary:
			return cmp.Compare(a.secondary, b.secondary)
		case a.load != b.load:
			return cmp.Compare(a.load, b.load)
		case a.cold != b.cold:
			return int(a.cold) - int(b.cold)
		}
		return int(a.i - b.i)
	}
	if presorted == nil {
		for i := range cands {
			add(i)
		}
		// Sort pairs of the one number and the key's place, short to move; the rare equal
		// numbers by the keys themselves.
		type pair struct {
			u uint64
			j int32
		}
		ps := make([]pair, len(ks))
		for j := range ks {
			ps[j] = pair{ks[j].u, int32(j)}
		}
		slices.SortFunc(ps, func(a, b pair) int {
			if a.u != b.u {
				return cmp.Compare(a.u, b.u)
			}
			return order(ks[a.j], ks[b.j])
		})
		sorted := make([]keyed, len(ks))
		for j, p := range ps {
			sorted[j] = ks[p.j]
		}
		ks = sorted
	} else {
		for _, i := range presorted {
			add(int(i))
		}
		for p := 0; p < len(ks); {
			q := p + 1
			for q < len(ks) && ks[q].standing == ks[p].standing && ks[q].primary == ks[p].primary {
				q++
			}
			if q-p > 1 {
				slices.SortFunc(ks[p:q], order)
			}
			p = q
		}
	}
	si := &sortIndex{
		order: make([]int32, len(ks)), place: make([]int32, len(cands)),
		start: make([]int32, len(ks)), end: make([]int32, len(ks)),
	}
	for i := range si.place {
		si.place[i] = -1
	}
	for p := 0; p < len(ks); {
		q := p + 1
		for q < len(ks) && same(&ks[p], &ks[q]) {
			q++
		}
		for j := p; j < q; j++ {
			i := ks[j].i
			si.order[j], si.place[i], si.start[j], si.end[j] = i, int32(j), int32(p), int32(q)
			if r := regionIndex(cands[i].Region); r >= 0 {
				si.countries[r] = append(si.countries[r], int32(j))
			}
		}
		p = q
	}
	return si
}

// orderedBits maps a float64 but NaN to a uint64 of the same order (0 and -0 alike).
func orderedBits(f float64) uint64 {
	if f == 0 {
		f = 0
	}
	b := math.Float64bits(f)
	if b>>63 == 1 {
		return ^b
	}
	return b | 1<<63
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// compareKeys orders two keys of one sort by what an order holds (not the tier, which the
// request gives, nor the decision's tie-breaks), as less does.
func compareKeys(a, b *rankKey) int {
	switch {
	case a.standing != b.standing:
		return cmp.Compare(a.standing, b.standing)
	case a.primary != b.primary:
		return cmp.Compare(a.primary, b.primary)
	case a.secondary != b.secondary:
		return cmp.Compare(a.secondary, b.secondary)
	case a.load != b.load:
		return cmp.Compare(a.load, b.load)
	case a.cold != b.cold:
		if a.cold {
			return 1
		}
		return -1
	}
	return 0
}

// rot is candidate i's rank among the equal nodes of its group in a decision that drew draw:
// the group rotated to start at place draw mod its size. It is 0 for a candidate alone in
// its group.
func (si *sortIndex) rot(i int, draw uint64) uint64 {
	p := si.place[i]
	if p < 0 {
		return 0 // never eligible
	}
	start, size := uint64(si.start[p]), uint64(si.end[p]-si.start[p])
	if size == 1 {
		return 0
	}
	return (uint64(p) - start + size - draw%size) % size
}

// idIndex numbers the node and provider ids of an Index's candidates, for the order, only
// and ignore lists: an id that is both a node's and a provider's is one number.
type idIndex struct {
	num   map[string]int32
	of    [][2]int32 // by candidate number: its node id's number and its provider id's
	count []int32    // by id number: the candidates with that id
	// byID lists, by id number, the numbers of the candidates with that node or provider id
	// (candidates), for a refusal's excluded nodes.
	byID lazy[[][]int32]
}

// candidates returns, by id number, the numbers of the candidates with that node or provider
// id, ascending.
func (x *idIndex) candidates() [][]int32 {
	return x.byID.get(func() [][]int32 {
		ends := make([]int32, len(x.num)+1)
		for k, c := range x.count {
			ends[k+1] = ends[k] + c
		}
		all := make([]int32, ends[len(ends)-1])
		lists := make([][]int32, len(x.num))
		for k := range lists {
			lists[k] = all[ends[k]:ends[k]:ends[k+1]]
		}
		for i, of := range x.of {
			lists[of[0]] = append(lists[of[0]], int32(i))
			if of[1] != of[0] {
				lists[of[1]] = append(lists[of[1]], int32(i))
			}
		}
		return lists
	})
}

func newIDIndex(cands []Candidate) *idIndex {
	x := &idIndex{num: make(map[string]int32, len(cands)+len(cands)/8), of: make([][2]int32, len(cands))}
	number := func(id string) int32 {
		n, ok := x.num[id]
		if !ok {
			n = int32(len(x.num))
			x.num[id] = n
		}
		return n
	}
	for i := range cands {
		x.of[i] = [2]int32{number(cands[i].NodeID), number(cands[i].ProviderID)}
	}
	x.count = make([]int32, len(x.num))
	for _, of := range x.of {
		x.count[of[0]]++
		if of[1] != of[0] {
			x.count[of[1]]++
		}
	}
	return x
}

// idPlaces lists, by id number, the places of the live candidates with that node or provider
// id, ascending.
func (si *sortIndex) idPlaces(x *idIndex) [][]int32 {
	return si.ids.get(func() [][]int32 {
		// Count each id's places, then fill one array in which its list is a part.
		ends := make([]int32, len(x.num)+1)
		for _, i := range si.order {
			a, b := x.of[i][0], x.of[i][1]
			ends[a+1]++
			if b != a {
				ends[b+1]++
			}
		}
		for k := 1; k < len(ends); k++ {
			ends[k] += ends[k-1]
		}
		all := make([]int32, ends[len(ends)-1])
		lists := make([][]int32, len(x.num))
		for k := range lists {
			lists[k] = all[ends[k]:ends[k]:ends[k+1]]
		}
		for p, i := range si.order {
			a, b := x.of[i][0], x.of[i][1]
			lists[a] = append(lists[a], int32(p))
			if b != a {
				lists[b] = append(lists[b], int32(p))
			}
		}
		return lists
	})
}

// Attributes a filter holds a threshold on: those a candidate is eligible for when its value
// is on the good side of the request's bound, so that the eligible are a prefix of the
// attribute's order (attrOrder), or with preferred_max_latency's slower nodes a suffix.
const (
	attrLatency     = iota // leastLatency, ascending: preferred_max_latency
	attrInput              // input ask, ascending: max_price.prompt
	attrOutput             // output ask, ascending: max_price.completion
	attrReliability        // reliability, descending (NaN last): min_reliability
	numAttrs
)

// Sides of an attribute's order.
const (
	prefix = iota // the candidates within a bound
	suffix        // the others
	numSides
)

// attrOrder is an Index's live candidates by one attribute, best first.
type attrOrder struct {
	byValue []int32 // candidate numbers
	rank    []int32 // by candidate number: its position in byValue; -1 for one not live
}

// attrOf returns attribute a of c as a number that orders best first.
func attrOf(c *Candidate, a int) float64 {
	switch a {
	case attrLatency:
		return leastLatency(c)
	case attrInput:
		return float64(c.InputPrice)
	case attrOutput:
		return float64(c.OutputPrice)
	}
	if math.IsNaN(c.Reliability) {
		return math.Inf(1)
	}
	return -c.Reliability
}

func newAttrOrder(cands []Candidate, a int) *attrOrder {
	type valued struct {
		v float64
		i int32
	}
	vs := make([]valued, 0, len(cands))
	for i := range cands {
		if live(&cands[i]) {
			vs = append(vs, valued{attrOf(&cands[i], a), int32(i)})
		}
	}
	slices.SortFunc(vs, func(x, y valued) int { return cmp.Or(cmp.Compare(x.v, y.v), cmp.Compare(x.i, y.i)) })
	o := &attrOrder{byValue: make([]int32, len(vs)), rank: make([]int32, len(cands))}
	for i := range o.rank {
		o.rank[i] = -1
	}
	for r, v := range vs {
		o.byValue[r], o.rank[v.i] = v.i, int32(r)
	}
	return o
}

// levels returns the nested sets of places a threshold on attribute a walks, on one side of
// the attribute's order: level j holds, ascending, the places of the candidates among the
// first 2^j of that side (the best 2^j by the attribute, or the worst 2^j for the suffix),
// for each 2^j below the number of live candidates. A bound that keeps m candidates walks the
// smallest level of at least m, so that at least half of what it walks is within the bound;
// they hold about twice the live candidates, all levels together.
func (si *sortIndex) levelsOf(ao *attrOrder, a, side int) [][]int32 {
	return si.levels[a][side].get(func() [][]int32 {
		n := len(si.order)
		if n < 2 {
			return nil
		}
		top := bits.Len(uint(n-1)) - 1 // the last level: 2^top < n
		backing := make([]int32, 0, 1<<(top+1))
		lv := make([][]int32, top+1)
		for j := range lv {
			lv[j] = backing[len(backing) : len(backing) : len(backing)+1<<j]
			backing = backing[:len(backing)+1<<j]
		}
		for p, i := range si.order {
			r := int(ao.rank[i])
			if side == suffix {
				r = n - 1 - r
			}
			for j := bits.Len(uint(r)); j <= top; j++ {
				lv[j] = append(lv[j], int32(p))
			}
		}
		return lv
	})
}
