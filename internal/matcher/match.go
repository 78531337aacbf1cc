package matcher

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/shareai/shareai/internal/tier"
)

// Depth bounds.
const (
	DefaultDepth = 16 // candidates a Ranking keeps when Request.Depth is 0
	MaxDepth     = 64
)

// reliabilityFloor bounds the divisor of an ask, so an unproven or failing node's effective
// price stays finite: it is at most 20 times its ask.
const reliabilityFloor = 0.05

// tolerance is how far apart two nodes' measures may be and still count as equal: effective
// prices (or, by the other sorts, latencies and outputs per second) within 5% of the best
// one's. Equal nodes share the traffic by load and chance instead of the best taking every
// request. 5% is about what a few points of reputation score make (0.94 against 0.98: one
// failed check or a bad day, noise rather than merit), so that equal asks share whatever the
// scores' noise; a node that asks or scores more than 5% better still wins outright, and a
// buyer pays up to 5% more than the cheapest ask only where the asks differ by less.
const tolerance = 0.05

// Request is what one decision depends on besides the candidates.
type Request struct {
	Model string
	Prefs Prefs
	// Excluded holds node ids not to use: those that already failed this request.
	Excluded map[string]bool
	// Rand spreads traffic over equal nodes. Nil uses math/rand/v2's global source; a
	// *rand.Rand must not be shared between goroutines.
	Rand *rand.Rand
	// Depth is how many of the best candidates the ranking holds (it scans again if Pick
	// exhausts them): 0 is DefaultDepth, at most MaxDepth.
	Depth int
	// Continuation asks for nodes that can take over a partial answer.
	Continuation bool
	// Tier is the request's service tier: it may fill only the slots its tier may (gold
	// slots are kept for gold; a node may refuse bronze).
	Tier tier.Tier
	// Multiplier is the tier's price multiplier in basis points (0: ×1): a node's ask times
	// it is what the buyer pays, which max_price caps.
	Multiplier int64
	// Batch is a batch line's request (bronze work): nodes that refuse batch work are not
	// eligible, and idle nodes (the most free slots) rank first, then by the sort.
	Batch bool
}

// Ranking is the outcome of Match: the best eligible candidates in order, and counts of why
// the others are not eligible. Its memory does not grow with the number of candidates.
type Ranking struct {
	Model   string
	Serving int // candidates considered
	// Eligible is how many of those were eligible when matched. A ranking by an Index's walk
	// (Index.Match), which looks only at the best, counts them once Pick finds none left.
	Eligible int

	req     Request
	cands   []Candidate
	f       filter
	reasons [numReasons]int
	top     []entry // best first once filled: buf, or for a depth over it its own
	buf     [DefaultDepth]entry
	ready   int // of top, the entries ranked (a walk adds them run by run: extend)
	n, next int
	walked  map[int]bool // candidates walked past by Pick, once it scans again
	failed  int          // candidates Pick found busy

	// ix and si, for a ranking of an Index's candidates, are the index and its order for the
	// sort: ties rank by their rotation in it (rankKey.rot). walks: the ranking walks si's
	// order instead of scanning every candidate (walk.go).
	ix      *Index
	si      *sortIndex
	walks   bool
	w       walker
	streams [4]stream // the walk's merger's, while they are enough
	ths     [3]threshold
	bits    []uint64 // the walk's intersection of its filters, from scratch (intersect)
}

type entry struct {
	i int32 // index in cands
	k rankKey
}

// rankKey orders candidates: lower is better, field by field. Match keeps the best by this
// exact order, then lets the tolerance make near ones equal (even).
type rankKey struct {
	tier      int     // 2 × position in Order (len(Order) when unlisted), +1 when slower than preferred
	standing  int     // trusted before verified
	primary   float64 // the sort's measure: effective price, latency, or -tokens/s
	secondary float64 // effective price, when the sort is not by price
	load      float64 // running / max slots
	cold      bool
	// rot orders nodes equal in all the above, as an Index's walk can: their place in the
	// index's group of equal nodes, rotated by the decision's draw (rotation). 0 in a Match
	// without an index, where rnd alone orders them.
	rot uint64
	rnd uint64 // spreads equal nodes: distinct for each candidate of a decision (tieRand)
}

func (a *rankKey) less(b *rankKey) bool {
	switch {
	case a.tier != b.tier:
		return a.tier < b.tier
	case a.standing != b.standing:
		return a.standing < b.standing
	case a.primary != b.primary:
		return a.primary < b.primary
	case a.secondary != b.secondary:
		return a.secondary < b.secondary
	case a.load != b.load:
		return a.load < b.load
	case a.cold != b.cold:
		return !a.cold
	case a.rot != b.rot:
		return a.rot < b.rot
	}
	return a.rnd < b.rnd
}

// lessTie orders candidates that rank equal: the least loaded first, then warm before cold,
// then at random.
func (a *rankKey) lessTie(b *rankKey) bool {
	switch {
	case a.load != b.load:
		return a.load < b.load
	case a.cold != b.cold:
		return !a.cold
	}
	return a.rnd < b.rnd
}

// Match filters and ranks the candidates for a request (the caller passes those serving
// req.Model). It is a reverse auction:
//
//   - Eligible: not excluded, not ignored, in Only and (without fallbacks) in Order when they
//     are given, in an allowed region, of an allowed quantization, asking no more than both
//     price caps, at least as reliable as asked, with a free slot.
//   - Nodes Order lists come first, in its order.
//   - Then by the sort. By price (the default), the lowest effective price wins: the sum of
//     the input and output asks per million tokens, divided by reliability (at least 0.05),
//     so a node that fails half its jobs must ask less than half to beat a reliable one. By
//     latency, the lowest RTT + time to first token, nodes with no time to first token
//     measured last (whatever their RTT); by throughput, the most tokens per second, unknown
//     last; ties on either by effective price. Nodes known to be slower than
//     PreferredMaxLatency rank after the others of their Order position.
//   - Measures within the tolerance (5%) of the best one's count as equal: among nodes of
//     the same Order position and standing, those whose sort measure is near the first's,
//     and by the latency and throughput sorts whose effective price is near too, rank by
//     load (running / slots), then warm before cold, then at random, so that equal nodes
//     share traffic. A node beyond the tolerance of the best still ranks after it.
//
// Only the best Depth are sorted: Match is one pass over the candidates, and the nodes it
// spreads over are those of the best Depth that are near the best.
//
// The ranking is on the heap: it holds its best entries inline (about a KiB at the default
// depth), which on the stack would grow the goroutine of every request, streams held open
// included.
func Match(req Request, cands []Candidate) *Ranking {
	r := &Ranking{Model: req.Model, Serving: len(cands), req: req, cands: cands}
	r.f = newFilter(req)
	r.fill(true)
	return r
}

// fill fills top with the best candidates not walked, best first: by walking the index's
// order (as far as Pick needs, extend), or by scanning them all (counting reasons if count).
func (r *Ranking) fill(count bool) {
	if r.top == nil {
		if d := r.depth(); d <= len(r.buf) {
			r.top = r.buf[:d]
		} else {
			r.top = make([]entry, d)
		}
	}
	r.n, r.next, r.ready = 0, 0, 0
	draw := r.rand() // one draw a fill: rankKey.rot and rnd derive from it
	if r.walks {
		// The walk adds entries best first, and only as far as Pick needs them.
		r.startWalk(draw)
		r.extend()
		return
	}
	r.scan(draw, count)
	// Sort best first. The keys are distinct (rnd is), so the order is the same whatever
	// the order top was filled in.
	slices.SortFunc(r.top[:r.n], func(a, b entry) int {
		if a.k.less(&b.k) {
			return -1
		}
		return 1
	})
	even(r.top[:r.n])
	r.ready = r.n
}

// depth is how many candidates the ranking keeps.
func (r *Ranking) depth() int {
	depth := r.req.Depth
	if depth <= 0 {
		depth = DefaultDepth
	}
	return min(depth, MaxDepth)
}

// scan puts the best candidates not walked in top, counting reasons if count.
func (r *Ranking) scan(draw uint64, count bool) {
	depth := r.depth()
	for i := range r.cands {
		if r.walked != nil && r.walked[i] {
			continue
		}
		c := &r.cands[i]
		why, pos := r.f.check(c)
		if why == busy && c.Slot != nil && c.Slot.Running() < c.Slots(r.req.Tier) {
			why = eligible // the snapshot's count is older than the slots: the live one decides
		}
		if why != eligible {
			if count {
				r.reasons[why]++
			}
			continue
		}
		if count {
			r.Eligible++
		}
		var k rankKey
		if r.n == depth && !r.f.mayBeat(pos, &r.top[0].k) {
			continue // cannot beat the worst kept: skip computing its key
		}
		r.f.key(c, pos, &k)
		k.rnd = tieRand(draw, i)
		if r.si != nil {
			k.rot = r.si.rot(i, draw)
		}
		r.push(entry{int32(i), k}, depth)
	}
}

func (r *Ranking) rand() uint64 { return random(r.req.Rand) }

// tieRand is candidate i's random tie-break in a decision that drew draw: the i-th output of
// a SplitMix64 stream seeded by draw, distinct for each i (SplitMix64's mix is a bijection),
// so that any two candidates compare the same however they are found, scanned or walked.
func tieRand(draw uint64, i int) uint64 {
	z := draw + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// even reorders entries sorted best first so that those the tolerance makes equal rank by
// lessTie: a run of entries of the same tier and standing whose primary measure is near the
// first's, and within it (sorted by the secondary) each run whose secondary is near its
// first's. Runs keep their order, so a node beyond the tolerance of the first of its run
// still ranks after it.
func even(es []entry) {
	for len(es) > 0 {
		band := es[:nearRun(es, func(k *rankKey) float64 { return k.primary })]
		slices.SortFunc(band, func(a, b entry) int {
			return cmp.Or(cmp.Compare(a.k.secondary, b.k.secondary), tieOrder(a, b))
		})
		for rest := band; len(rest) > 0; {
			tied := rest[:nearRun(rest, func(k *rankKey) float64 { return k.secondary })]
			slices.SortFunc(tied, tieOrder)
			rest = rest[len(tied):]
		}
		es = es[len(band):]
	}
}

// nearRun returns how many of the sorted entries, from the first, share its tier and standing
// with a measure near the first's.
func nearRun(es []entry, measure func(*rankKey) float64) int {
	first := &es[0].k
	n := 1
	for ; n < len(es); n++ {
		k := &es[n].k
		if k.tier != first.tier || k.standing != first.standing || !near(measure(first), measure(k)) {
			break
		}
	}
	return n
}

func tieOrder(a, b entry) int {
	if a.k.lessTie(&b.k) {
		return -1
	}
	return 1
}

// near reports whether x, a measure that ranks no better than best (lower is better), is
// within the tolerance of it. A negated measure (−tokens per second) is near when it is at
// least best ÷ (1 + tolerance); +Inf (unmeasured) is near only to +Inf.
func near(best, x float64) bool {
	switch {
	case x == best:
		return true
	case best >= 0:
		return x <= best*(1+tolerance)
	}
	return x <= best/(1+tolerance)
}

// push keeps the best depth entries in top[:n] as a heap with the worst at the root.
func (r *Ranking) push(e entry, depth int) {
	h := r.top[:]
	if r.n < depth {
		i := r.n
		h[i] = e
		r.n++
		for i > 0 { // up
			p := (i - 1) / 2
			if !h[p].k.less(&h[i].k) {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
		return
	}
	if !e.k.less(&h[0].k) {
		return
	}
	h[0] = e
	for i := 0; ; { // down
		w, l, rt := i, 2*i+1, 2*i+2
		if l < r.n && h[w].k.less(&h[l].k) {
			w = l
		}
		if rt < r.n && h[w].k.less(&h[rt].k) {
			w = rt
		}
		if w == i {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}

// Len returns how many ranked candidates remain to Pick from before the ranking scans again.
func (r *Ranking) Len() int {
	r.complete()
	return r.n - r.next
}

// complete ranks all that a walk's ranking would hold before Pick needs them.
func (r *Ranking) complete() {
	for r.walks && r.extend() {
	}
}

// Best returns the ranked candidates not yet walked by Pick, best first, for inspection.
func (r *Ranking) Best() []Candidate {
	cs := make([]Candidate, 0, r.Len())
	for _, e := range r.top[r.next:r.n] {
		cs = append(cs, r.cands[e.i])
	}
	return cs
}

// Pick walks the ranking and takes a slot on the first candidate that has one free. Called
// again (the node refused the job), it goes on from there. When nothing can be taken, the
// error is a *NoProvider that counts why, candidates taken by earlier Picks as excluded.
func (r *Ranking) Pick() (Candidate, error) {
	c, np := r.pick()
	if np != nil {
		return Candidate{}, np
	}
	return c, nil
}

func (r *Ranking) pick() (Candidate, *NoProvider) {
	for {
		for r.next < r.ready {
			e := r.top[r.next]
			r.next++
			c := r.cands[e.i]
			if c.Slot == nil || c.Slot.AcquireFor(r.req.Tier) {
				return c, nil
			}
			r.failed++
		}
		if r.walks && r.extend() {
			continue // the walk's next run
		}
		walked := len(r.walked) + r.n
		if r.n == 0 || !r.walks && walked >= r.Eligible || r.walks && r.n < r.depth() {
			break // a walk that found fewer than it keeps found all
		}
		// Every kept candidate was walked and more are eligible: rank those.
		if r.walked == nil {
			r.walked = make(map[int]bool)
		}
		for _, e := range r.top[:r.n] {
			r.walked[int(e.i)] = true
		}
		r.fill(false)
	}
	if r.walks {
		r.count()
	}
	// Every eligible candidate was walked: found busy, or taken by an earlier Pick.
	counts := r.reasons
	counts[busy] += r.failed
	counts[excluded] += r.Eligible - r.failed
	return Candidate{}, newNoProvider(r.Model, r.Serving, &counts, r.req.Prefs.Regions)
}

// mayBeat reports whether a candidate at Order position pos may rank before worst.
func (f *filter) mayBeat(pos int, worst *rankKey) bool { return 2*pos <= worst.tier }

// key fills k but for rnd.
func (f *filter) key(c *Candidate, pos int, k *rankKey) {
	k.tier = 2 * pos
	k.standing = c.Level.standing()
	if f.p.PreferredMaxLatency > 0 && leastLatency(c) > float64(f.p.PreferredMaxLatency) {
		k.tier++ // known to be slower: its measured part alone is over
	}
	price := effectivePrice(c)
	switch f.sort {
	case SortLatency:
		k.primary, k.secondary = latency(c), price
	case SortThroughput:
		k.primary, k.secondary = math.Inf(1), price
		if c.TokensPerSecond > 0 {
			k.primary = -c.TokensPerSecond
		}
	default:
		k.primary = price
	}
	k.load = float64(c.Running) / float64(c.MaxConcurrent)
	k.cold = !c.Warm
	if f.batch {
		// Batch work fills the idlest nodes first: the most free slots, then by the sort.
		k.secondary = k.primary
		k.primary = -float64(c.Slots(f.tier) - c.Running)
	}
}

// effectivePrice is the ask per million input plus output tokens over reliability.
func effectivePrice(c *Candidate) float64 {
	rel := c.Reliability
	if !(rel >= reliabilityFloor) { // NaN too
		rel = reliabilityFloor
	}
	rel = min(rel, 1)
	return float64(c.InputPrice+c.OutputPrice) / rel
}

// latency is RTT + time to first token in nanoseconds, +Inf while the time to first token is
// unmeasured: a node that has answered nothing yet ranks after every measured one, not first
// on its round trip alone (which is a small part of the time to first token).
func latency(c *Candidate) float64 {
	if c.TTFT <= 0 {
		return math.Inf(1)
	}
	return float64(max(c.RTT, 0) + c.TTFT)
}

// leastLatency is the least the latency can be: RTT + time to first token, either 0 while
// unmeasured. A node it puts over preferred_max_latency is known to be slower.
func leastLatency(c *Candidate) float64 {
	return float64(max(c.RTT, 0) + max(c.TTFT, 0))
}
