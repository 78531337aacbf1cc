package matcher

import (
	"math/bits"
	"slices"
	"sync"
)

// Match ranks the index's candidates for req: the same Ranking as Match(req,
// ix.Candidates()) for any preferences, but for which of nodes equal in every measure it
// keeps (each decision draws one, and an index draws as the walk can follow: rankKey.rot),
// without looking at every candidate. It walks the order of the request's sort (order.go)
// tier by tier — each node of order, in its order, then the rest; within each, the nodes
// known to be quicker than preferred_max_latency first — meeting the eligible nodes best
// first, and only as far as Pick needs them: to the end of the first run of nodes the
// tolerance makes near, since the run is all that decides the first pick, then run by run
// to at most Depth. Within a tier it walks the smallest set the index holds that has every
// node the filter may let through: every node, the nodes only or the tier's order entry
// lists, those of the allowed countries, or a level of the nodes within a threshold
// (max_price, min_reliability, preferred_max_latency). A decision then costs about as many
// checks as there are better but ineligible nodes in that set, plus the ones it ranks. When
// none is eligible, Pick counts every node's reason, as Match does.
//
// Batch work (Request.Batch), which ranks idle nodes first, is scanned as Match does.
func (ix *Index) Match(req Request) *Ranking {
	r := new(Ranking)
	ix.match(r, req)
	return r
}

// match ranks the candidates for req in r, a zero Ranking.
func (ix *Index) match(r *Ranking, req Request) {
	r.Model, r.Serving, r.req, r.cands, r.ix = req.Model, len(ix.cands), req, ix.cands, ix
	r.f = newFilter(req)
	if !req.Batch {
		r.si, r.walks = ix.sorted(sortOf(r.f.sort)), true
	}
	r.fill(true)
}

// rankings are the rankings of Take, for reuse: a ranking is a few KiB.
var rankings = sync.Pool{New: func() any { return new(Ranking) }}

// Take takes a slot on the best eligible candidate for req, as ix.Match(req).Pick() does, for
// a caller that picks once: the ranking's memory (a few KiB) is reused by later decisions,
// so that a decision allocates only the lists of its sets and its error.
func (ix *Index) Take(req Request) (Candidate, error) {
	r := rankings.Get().(*Ranking)
	ix.match(r, req)
	c, np := r.pick()
	putBits(r.bits)
	*r = Ranking{} // holds nothing of the request or the index
	rankings.Put(r)
	if np != nil {
		return Candidate{}, np
	}
	return c, nil
}

// smallSpan is a set of places short enough to walk as it is: a walk looks for a smaller
// one (a threshold's level, which it may have to build) only beyond it.
const smallSpan = 1024

// span is a set of places a tier's walk reads: every place, the places set in bits, or the
// union of lists (which may overlap: a node and its provider both listed).
type span struct {
	all   bool
	bits  []uint64 // with all: only the places whose bit is set (intersect)
	lists [][]int32
	size  int // places in all (or set in bits), or in the lists together
}

// walker is a ranking's walk, kept between the entries it adds (Ranking.extend): its tier
// (order position p, side of preferred_max_latency) and its place in the tier's sets.
type walker struct {
	draw    uint64
	common  span // what every tier's set is at most
	p, side int
	sides   int // 2 with preferred_max_latency, else 1
	in      bool
	m       merger
	done    bool // no tier left

	// read counts the places the walk has read. Past intersectAfter, in a tier that walks
	// the common set (onCommon), the walk narrows it, once (narrowed); the tier then resumes
	// past what it read, skipping the places of rank skipTo and below.
	read               int
	onCommon, narrowed bool
	skipping           bool
	skipTo             int
	// askedFree: past intersectAfter places with nothing ranked, a tracked index's walk asks
	// its free map whether any node its filters let through is free (anyFree), once.
	askedFree bool
}

// startWalk starts the walk of a fill, which drew draw.
func (r *Ranking) startWalk(draw uint64) {
	r.w = walker{draw: draw, common: r.commonSpan(), side: -1, sides: 1}
	if r.f.p.PreferredMaxLatency > 0 {
		r.w.sides = 2
	}
	r.w.done = r.w.common.size == 0
}

// extend walks on until the ranking's next run of entries the tolerance makes near is whole
// — the next eligible node is not near, or top holds the depth, or none is left — and evens
// it as even evens the runs of a whole ranking (they are the same runs: entries come in rank
// order). It reports whether it readied entries, past ready.
func (r *Ranking) extend() bool {
	depth := r.depth()
	for {
		if r.n > r.ready {
			run := r.ready + nearRun(r.top[r.ready:r.n], func(k *rankKey) float64 { return k.primary })
			if run < r.n || r.n == depth || r.w.done {
				even(r.top[r.ready:run])
				r.ready = run
				return true
			}
		}
		if r.n == depth || r.w.done {
			return false
		}
		r.walkOne()
	}
}

// walkOne adds to top the next eligible candidate not walked, in rank order, or marks the
// walk done.
func (r *Ranking) walkOne() {
	w, f, si := &r.w, &r.f, r.si
	pml := float64(f.p.PreferredMaxLatency)
	for !w.done {
		if !w.in && !r.enter() {
			w.done = true
			return
		}
		if w.onCommon && !w.narrowed && w.read >= intersectAfter {
			r.narrow()
		}
		if !w.askedFree && w.read >= intersectAfter && r.n == 0 && r.ix.fm != nil {
			if w.askedFree = true; !r.ix.anyFree(f) {
				w.done = true // none can take the job: Pick counts the reasons (refusal)
				return
			}
		}
		place, erank, ok := w.m.next()
		if !ok {
			w.in = false
			continue
		}
		if w.skipping {
			if erank <= w.skipTo {
				continue
			}
			w.skipping = false
		}
		w.read++
		i := int(si.order[place])
		if r.walked != nil && r.walked[i] || !r.ix.mayTake(i, f.tier) {
			continue
		}
		c := &r.cands[i]
		why, pos := f.check(c)
		if why == busy && c.Slot != nil && c.Slot.Running() < c.Slots(f.tier) {
			why = eligible // the snapshot's count is older than the slots: the live one decides
		}
		if why != eligible {
			r.ix.clear(i, why)
			continue
		}
		if pos != w.p || f.p.PreferredMaxLatency > 0 && (leastLatency(c) > pml) != (w.side == suffix) {
			continue
		}
		e := &r.top[r.n]
		e.i, e.k = int32(i), rankKey{}
		f.key(c, pos, &e.k)
		e.k.rnd = tieRand(w.draw, i)
		e.k.rot = uint64(erank - int(si.start[place]))
		r.n++
		return
	}
}

// enter moves the walk to its next tier that has nodes to read, in the order's tiers (see
// Index.Match), and sets up the merge of its set; it reports false when none is left.
func (r *Ranking) enter() bool {
	w, f := &r.w, &r.f
	n := f.order.n
	for {
		if w.side++; w.side == w.sides {
			w.side, w.p = 0, w.p+1
		}
		if w.p > n || w.p == n && f.strictOrd {
			return false
		}
		if w.side == 0 && w.p < n && !f.order.firstAt(w.p) {
			w.side = w.sides - 1 // a repeated entry: its nodes rank at its first place
			continue
		}
		sp := w.common
		if w.p < n {
			if sp = r.minSpan(sp, r.idSpan(f.p.Order[w.p:w.p+1])); sp.size == 0 {
				w.side = w.sides - 1 // no node has this id
				continue
			}
		}
		if w.sides == 2 {
			sp = r.minSpan(sp, r.latencySpan(w.side))
		}
		if sp.size == 0 {
			continue
		}
		w.onCommon = sp.size == w.common.size // a tier's own set replaces it only when smaller
		w.skipping = false
		w.m = merger{h: r.streams[:0]}
		if sp.all {
			w.m.add(stream{si: r.si, all: true, bits: sp.bits, n: len(r.si.order), draw: w.draw})
		} else {
			for _, l := range sp.lists {
				w.m.add(stream{si: r.si, list: l, n: len(l), draw: w.draw})
			}
		}
		w.in = true
		return true
	}
}

// minSpan returns the smaller span.
func (r *Ranking) minSpan(a, b span) span {
	if b.size < a.size {
		return b
	}
	return a
}

// commonSpan returns the smallest span that holds every node the request's filter may let
// through, whatever the tier. (When two filters or more each let many through, the walk may
// narrow it to the places all of them let through: narrow.)
func (r *Ranking) commonSpan() span {
	f := &r.f
	sp := span{all: true, size: len(r.si.order)}
	if f.only.n > 0 {
		sp = r.minSpan(sp, r.idSpan(f.p.Only))
	}
	if f.inRegions {
		sp = r.minSpan(sp, r.regionSpan())
	}
	for _, th := range r.thresholds() {
		if sp.size > smallSpan {
			sp = r.minSpan(sp, r.levelSpan(th.a, prefix, func(c *Candidate) bool { return th.within(f, c) }))
		}
	}
	return sp
}

// intersectAfter is how many places a walk reads, in any tier, before it intersects its
// filters' sets in a tier that walks its common set (narrow): a few microseconds, what the
// intersection itself costs at 100,000 nodes. A walk that finds what it needs sooner never pays for it. (A variable for
// the tests, which narrow walks at every point.)
var intersectAfter = 128

// narrow replaces the walk's common set, and the tier's walk of it, by the intersection of
// the filters' sets when that is smaller, resuming past the places already read (by their
// rank, erank). It is tried once per walk.
func (r *Ranking) narrow() {
	w := &r.w
	w.narrowed = true
	both, ok := r.intersect(r.thresholds())
	if !ok {
		return
	}
	if both.size >= w.common.size {
		putBits(both.bits)
		return
	}
	r.bits, w.common = both.bits, both
	w.skipTo, w.skipping = w.m.last, w.m.any
	w.m = merger{h: r.streams[:0]}
	w.m.add(stream{si: r.si, all: true, bits: both.bits, n: len(r.si.order), draw: w.draw})
}

// thresholds returns the request's bounds on attributes that let through a prefix of the
// attribute's order: max_price's and min_reliability.
func (r *Ranking) thresholds() []threshold { return thresholdsOf(&r.f.p, r.ths[:0]) }

// thresholdsOf appends p's thresholds to ths.
func thresholdsOf(p *Prefs, ths []threshold) []threshold {
	if c := p.MaxPrice.Prompt; c != nil {
		ths = append(ths, threshold{a: attrInput, price: *c})
	}
	if c := p.MaxPrice.Completion; c != nil {
		ths = append(ths, threshold{a: attrOutput, price: *c})
	}
	if m := p.MinReliability; m != nil {
		ths = append(ths, threshold{a: attrReliability, reliability: *m})
	}
	return ths
}

// within reports whether c is within the threshold th of the request's filter f.
func (th *threshold) within(f *filter, c *Candidate) bool {
	switch th.a {
	case attrInput:
		return f.price(c.InputPrice) <= th.price
	case attrOutput:
		return f.price(c.OutputPrice) <= th.price
	}
	return c.Reliability >= th.reliability
}

// idSpan returns the places of the nodes with one of ids as node or provider id.
func (r *Ranking) idSpan(ids []string) span { return idSpan(r.ix, r.si, ids) }

func idSpan(ix *Index, si *sortIndex, ids []string) span {
	x := ix.idNumbers()
	lists := si.idPlaces(x)
	var sp span
	for _, id := range ids {
		if k, ok := x.num[id]; ok && len(lists[k]) > 0 {
			sp.lists = append(sp.lists, lists[k])
			sp.size += len(lists[k])
		}
	}
	return sp
}

// regionSpan returns the places of the nodes in the allowed countries.
func (r *Ranking) regionSpan() span { return regionSpan(r.si, &r.f.regions) }

func regionSpan(si *sortIndex, regions *regionSet) span {
	var sp span
	for w, word := range regions {
		for ; word != 0; word &= word - 1 {
			if l := si.countries[w*64+bits.TrailingZeros64(word)]; len(l) > 0 {
				sp.lists = append(sp.lists, l)
				sp.size += len(l)
			}
		}
	}
	return sp
}

// latencySpan returns the places of the nodes on one side of preferred_max_latency: within
// it (prefix), or known to be slower (suffix).
func (r *Ranking) latencySpan(side int) span {
	bound := float64(r.f.p.PreferredMaxLatency)
	return r.levelSpan(attrLatency, side, func(c *Candidate) bool { return leastLatency(c) <= bound })
}

// levelSpan returns a set holding the nodes on one side of a threshold on attribute a, which
// within reports of a node (true for a prefix of the attribute's order): the smallest level
// that holds them (levelsOf), or every place when none is smaller.
func (r *Ranking) levelSpan(a, side int, within func(*Candidate) bool) span {
	ao := r.ix.attrOrder(a)
	n := len(ao.byValue)
	m := prefixLen(r.cands, ao, within)
	if side == suffix {
		m = n - m
	}
	if m == 0 {
		return span{} // none: the tier is empty
	}
	j := bits.Len(uint(m - 1)) // the least j with 2^j ≥ m
	if 1<<j >= n {
		return span{all: true, size: n}
	}
	return span{lists: [][]int32{r.si.levelsOf(ao, a, side)[j]}, size: 1 << j}
}

// count counts, once a walk found nothing left to take, why each candidate not walked is not
// eligible, as Match's scan counts them all at once, and the walked ones as eligible.
func (r *Ranking) count() {
	if r.n > 0 && r.walked == nil {
		r.walked = make(map[int]bool)
	}
	for _, e := range r.top[:r.n] {
		r.walked[int(e.i)] = true
	}
	r.reasons = [numReasons]int{}
	r.Eligible = len(r.walked)
	f := &r.f
	if r.Eligible == 0 && r.ix.fm != nil && r.ix.refusal(f, &r.reasons) {
		return // none eligible, and the free map says which are full: counted from its sets
	}
	if f.inRegions && len(f.excluded) == 0 && f.ignore.n == 0 && f.only.n == 0 && !f.strictOrd {
		// Every node outside the regions is out for that reason, the first that can apply to
		// it: count those at once, and check the others.
		inside := 0
		members := r.ix.countryMembers()
		for w, word := range f.regions {
			for ; word != 0; word &= word - 1 {
				for _, i := range members[w*64+bits.TrailingZeros64(word)] {
					r.countOne(int(i))
					inside++
				}
			}
		}
		r.reasons[outsideRegion] += len(r.cands) - inside
		return
	}
	for i := range r.cands {
		r.countOne(i)
	}
}

// countOne counts candidate i's reason, or its being walked (count).
func (r *Ranking) countOne(i int) {
	if r.walked[i] {
		return
	}
	c := &r.cands[i]
	why, _ := r.f.check(c)
	if why == busy && c.Slot != nil && r.ix.mayTake(i, r.f.tier) && c.Slot.Running() < c.Slots(r.f.tier) {
		why = eligible // not when the free map says it is full: no slot to read
	}
	if why == eligible {
		why = busy // free only since the walk passed it
	}
	r.reasons[why]++
}

// firstAt reports whether the list's entry at i is its first of that id.
func (s *idSet) firstAt(i int) bool {
	if s.m != nil {
		return s.m[s.list[i]] == i
	}
	return !slices.Contains(s.list[:i], s.list[i])
}

// stream yields the places of a list (or every place) in the decision's order: ascending,
// but for each group of equal nodes, whose places it yields from the group's rotation
// (sortIndex.rot) around. Each place comes with its rank in that order, erank: the group's
// first place plus the place's rot.
type stream struct {
	si   *sortIndex
	list []int32 // places, ascending; with all, every place (set in bits, when given)
	all  bool
	bits []uint64
	n    int
	draw uint64

	i int // the next index of the list not yet yielded, out of a group
	// In a group: its indices [lo, hi) of the list, yielded from first, around; at is next.
	in                 bool
	lo, hi, first, at  int
	start, size, shift int // the group's first place, size, and rotation

	place int32 // the last place yielded
	erank int
}

func (s *stream) placeAt(j int) int32 {
	if s.all {
		return int32(j)
	}
	return s.list[j]
}

// search returns the first index from j whose place is at least p.
func (s *stream) search(j int, p int32) int {
	if s.all {
		return s.from(max(j, min(int(p), s.n)))
	}
	k, _ := slices.BinarySearch(s.list[j:], p)
	return j + k
}

// from returns j, or for a stream of bits the first index from j whose bit is set.
func (s *stream) from(j int) int {
	if s.bits == nil {
		return j
	}
	return nextSet(s.bits, j, s.n)
}

// advance yields the next place into place and erank, or reports that none is left.
func (s *stream) advance() bool {
	if !s.in {
		if s.i = s.from(s.i); s.i >= s.n {
			return false
		}
		p := s.placeAt(s.i)
		start, end := s.si.start[p], s.si.end[p]
		if end-start == 1 {
			s.i++
			s.place, s.erank = p, int(p)
			return true
		}
		s.start, s.size = int(start), int(end-start)
		s.shift = int(s.draw % uint64(s.size))
		s.lo, s.hi = s.i, s.search(s.i, end)
		if s.first = s.search(s.i, start+int32(s.shift)); s.first == s.hi {
			s.first = s.lo // none at or after the rotation's start: from the group's first
		}
		s.at, s.in, s.i = s.first, true, s.hi
	}
	p := s.placeAt(s.at)
	if s.at = s.from(s.at + 1); s.at == s.hi {
		s.at = s.lo
	}
	if s.at == s.first {
		s.in = false
	}
	s.place, s.erank = p, s.start+(int(p)-s.start-s.shift+s.size)%s.size
	return true
}

// merger yields the places of several streams in the decision's order, each once.
type merger struct {
	h    []stream // a heap by erank, the least first
	last int      // the last erank yielded
	any  bool
}

// add adds a stream.
func (m *merger) add(s stream) {
	if !s.advance() {
		return
	}
	m.h = append(m.h, s)
	for i := len(m.h) - 1; i > 0; { // up
		p := (i - 1) / 2
		if m.h[p].erank <= m.h[i].erank {
			break
		}
		m.h[p], m.h[i] = m.h[i], m.h[p]
		i = p
	}
}

// next returns the next place and its erank.
func (m *merger) next() (int32, int, bool) {
	for len(m.h) > 0 {
		s := &m.h[0]
		place, erank := s.place, s.erank
		if !s.advance() {
			last := len(m.h) - 1
			m.h[0] = m.h[last]
			m.h = m.h[:last]
		}
		m.down()
		if m.any && erank == m.last {
			continue // the same node by another list
		}
		m.last, m.any = erank, true
		return place, erank, true
	}
	return 0, 0, false
}

func (m *merger) down() {
	for i := 0; ; {
		w, l, r := i, 2*i+1, 2*i+2
		if l < len(m.h) && m.h[l].erank < m.h[w].erank {
			w = l
		}
		if r < len(m.h) && m.h[r].erank < m.h[w].erank {
			w = r
		}
		if w == i {
			return
		}
		m.h[i], m.h[w] = m.h[w], m.h[i]
		i = w
	}
}
