package matcher

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/tier"
)

// scanOf is the scanning path over an index's candidates: Match's one pass over every
// candidate, breaking exact ties by the index's rotation as its walk does. The walk must
// return exactly what it returns.
func scanOf(ix *Index, req Request) *Ranking {
	r := &Ranking{Model: req.Model, Serving: len(ix.cands), req: req, cands: ix.cands, ix: ix}
	r.f = newFilter(req)
	if !req.Batch {
		r.si = ix.sorted(sortOf(r.f.sort))
	}
	r.fill(true)
	return r
}

// randomOffers returns n offers, random in everything the matcher reads, drawn from few
// values so that many nodes tie: equal asks, scores, loads and latencies. Their live slot
// counts differ from the snapshot's now and then, both ways.
func randomOffers(rng *rand.Rand, n int) []*testOffer {
	one := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	offers := make([]*testOffer, n)
	for i := range offers {
		max := rng.IntN(5) // 0: no slots at all
		c := Candidate{NodeID: fmt.Sprint("n", i), ProviderID: fmt.Sprint("p", rng.IntN(1+n/10)),
			Region:     one("de", "de", "fr", "us", "us", "jp", "ch", "br", "", "sg"),
			InputPrice: money.Price(rng.IntN(4)) * usd("0.25"), OutputPrice: money.Price(rng.IntN(4)) * usd("0.25"),
			Reliability:  []float64{1, 1, 0.97, 0.9, 0.5, 0, 1.2, math.NaN()}[rng.IntN(8)],
			Quantization: one("", "fp8", "q4_k_m"), MaxConcurrent: max, Running: rng.IntN(max + 1),
			RTT:             time.Duration(rng.IntN(3)) * 40 * time.Millisecond,
			TTFT:            time.Duration(rng.IntN(4)) * 200 * time.Millisecond,
			TokensPerSecond: float64(rng.IntN(4) * 30), Warm: rng.IntN(2) == 0, Continues: rng.IntN(3) > 0,
			Paused: rng.IntN(12) == 0, NoBatch: rng.IntN(6) == 0,
			Level: []Level{Verified, Verified, Trusted, Unverified, Quarantined}[rng.IntN(5)]}
		if rng.IntN(20) == 0 {
			c.ProviderID = fmt.Sprint("n", rng.IntN(n)) // an id both a node's and a provider's
		}
		o := &testOffer{c: c, running: c.Running, noBronze: rng.IntN(6) == 0}
		if max > 0 {
			o.gold = rng.IntN(max)
		}
		switch rng.IntN(8) {
		case 0:
			o.running = max // taken since the snapshot
		case 1:
			o.running = 0 // freed since
		}
		offers[i] = o
	}
	return offers
}

// clones returns offers with the same state, for a second path to take slots on.
func clones(offers []*testOffer) []*testOffer {
	cs := make([]*testOffer, len(offers))
	for i, o := range offers {
		cs[i] = &testOffer{c: o.c, running: o.running, gold: o.gold, noBronze: o.noBronze}
	}
	return cs
}

// randomRequest returns a request with random preferences over a fleet of n nodes.
func randomRequest(rng *rand.Rand, n int) Request {
	some := func(k int, pool func() string) []string {
		var out []string
		for range rng.IntN(k + 1) {
			out = append(out, pool())
		}
		return out
	}
	id := func() string {
		switch rng.IntN(5) {
		case 0:
			return fmt.Sprint("p", rng.IntN(1+n/10))
		case 1:
			return "nobody"
		}
		return fmt.Sprint("n", rng.IntN(n))
	}
	var p Prefs
	p.Sort = []string{"", SortPrice, SortLatency, SortThroughput}[rng.IntN(4)]
	if rng.IntN(2) == 0 {
		p.Order = some(3, id)
		if rng.IntN(6) == 0 {
			p.Order = some(20, id) // a long list: looked up in a map
		}
		if rng.IntN(3) == 0 {
			p.AllowFallbacks = ptr(rng.IntN(2) == 0)
		}
	}
	if rng.IntN(5) == 0 {
		p.Only = some(3, id)
	}
	if rng.IntN(5) == 0 {
		p.Ignore = some(3, id)
	}
	if rng.IntN(3) == 0 {
		p.Regions = [][]string{{"eu"}, {"br"}, {"us", "jp"}, {"asia"}, {"de"}}[rng.IntN(5)]
	}
	if rng.IntN(6) == 0 {
		p.Quantizations = [][]string{{"fp8"}, {"unknown", "q4_k_m"}}[rng.IntN(2)]
	}
	if rng.IntN(4) == 0 {
		p.MaxPrice.Prompt = ptr(money.Price(rng.IntN(4)) * usd("0.25"))
	}
	if rng.IntN(4) == 0 {
		p.MaxPrice.Completion = ptr(money.Price(rng.IntN(4)) * usd("0.25"))
	}
	if rng.IntN(4) == 0 {
		p.MinReliability = ptr([]float64{0.5, 0.9, 1}[rng.IntN(3)])
	}
	if rng.IntN(3) == 0 {
		p.PreferredMaxLatency = time.Duration(rng.IntN(6)) * 100 * time.Millisecond
	}
	req := Request{Model: model, Prefs: p, Tier: []tier.Tier{tier.Silver, tier.Gold, tier.Bronze}[rng.IntN(3)],
		Multiplier: []int64{0, 5000, 10000, 15000}[rng.IntN(4)], Continuation: rng.IntN(5) == 0, Batch: rng.IntN(10) == 0}
	if rng.IntN(2) == 0 {
		req.Depth = 1 + rng.IntN(5) // small: Pick walks again
	}
	if rng.IntN(3) == 0 {
		req.Excluded = map[string]bool{}
		for range 1 + rng.IntN(3) {
			req.Excluded[fmt.Sprint("n", rng.IntN(n))] = true
		}
	}
	return req
}

// Property: for any fleet and preferences, the index's walk ranks exactly as the scan over
// the same candidates — the same nodes in the same order, ties, the tolerance and the order's
// tiers included — and successive Picks take the same nodes, walking again past the ranked
// depth, down to the same NoProvider with the same reasons.
func TestIndexMatch_AgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	decisions, picks, refusals := 0, 0, 0
	for trial := range 1500 {
		n := 1 + rng.IntN(80)
		if trial%50 == 0 {
			n = 2000 + rng.IntN(2000) // the levels and their smallest-set choice, beyond smallSpan
		}
		walkOffers := randomOffers(rng, n)
		scanOffers := clones(walkOffers)
		walkIx, scanIx := NewIndex(candidates(walkOffers...)), NewIndex(candidates(scanOffers...))
		for range 4 {
			req := randomRequest(rng, n)
			seed := rng.Uint64()
			wreq, sreq := req, req
			wreq.Rand, sreq.Rand = rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 1))
			if trial%10 == 0 { // Take is Match and Pick, on a ranking it reuses
				takeIx := NewIndex(candidates(clones(walkOffers)...))
				treq, mreq := req, req
				treq.Rand, mreq.Rand = rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 1))
				tc, terr := takeIx.Take(treq)
				takeIx = NewIndex(candidates(clones(walkOffers)...))
				mc, merr := takeIx.Match(mreq).Pick()
				if tc.NodeID != mc.NodeID || fmt.Sprint(terr) != fmt.Sprint(merr) {
					t.Fatalf("trial %d, %+v: Take %q, %v; Match and Pick %q, %v", trial, req, tc.NodeID, terr, mc.NodeID, merr)
				}
			}
			if got, want := ranked(walkIx.Match(wreq)), ranked(scanOf(scanIx, sreq)); !slices.Equal(got, want) {
				t.Fatalf("trial %d, %d nodes, %+v: walk ranks %v; scan %v", trial, n, req, got, want)
			}
			// Again, to Pick from (a walk ranks only as far as Pick needs: not as Best does).
			wreq.Rand, sreq.Rand = rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 1))
			w, s := walkIx.Match(wreq), scanOf(scanIx, sreq)
			decisions++
			limit := n
			if n > 100 {
				limit = 30
			}
			for k := 0; k <= limit; k++ {
				wc, werr := w.Pick()
				sc, serr := s.Pick()
				if wc.NodeID != sc.NodeID || fmt.Sprint(werr) != fmt.Sprint(serr) {
					t.Fatalf("trial %d, %d nodes, %+v: pick %d: walk %q, %v; scan %q, %v", trial, n, req, k, wc.NodeID, werr, sc.NodeID, serr)
				}
				if werr != nil {
					refusals++
					break
				}
				picks++
			}
		}
	}
	t.Logf("%d decisions, %d picks, %d refusals", decisions, picks, refusals)
	if picks < 5000 || refusals < 1000 {
		t.Errorf("%d picks and %d refusals: the property is barely tested", picks, refusals)
	}
}

// Property: a request with two filters or more that each let many nodes through (regions,
// max_price, min_reliability), whose walk narrows to the intersection of their bitmaps
// (narrow) at any point of its walk, ranks and picks exactly as the scan does, down to the
// same NoProvider.
func TestIndexMatch_IntersectsFilters(t *testing.T) {
	defer func(n int) { intersectAfter = n }(intersectAfter)
	rng := rand.New(rand.NewPCG(21, 22))
	intersected, resumed := 0, 0
	for trial := range 20 {
		intersectAfter = []int{0, 1, 2, 5, 17, 100}[trial%6]
		n := 12_000 + rng.IntN(12_000) // each filter's set of live nodes beyond smallSpan
		walkOffers := randomOffers(rng, n)
		scanOffers := clones(walkOffers)
		walkIx, scanIx := NewIndex(candidates(walkOffers...)), NewIndex(candidates(scanOffers...))
		for range 4 {
			req := randomRequest(rng, n)
			req.Batch, req.Prefs.Only = false, nil
			p := &req.Prefs
			p.Regions = [][]string{{"eu"}, {"us", "jp"}, {"de"}, nil}[rng.IntN(4)]
			p.MaxPrice.Prompt = ptr(money.Price(1+rng.IntN(3)) * usd("0.25"))
			if p.Regions == nil || rng.IntN(2) == 0 {
				p.MinReliability = ptr([]float64{0.5, 0.9}[rng.IntN(2)])
			}
			seed := rng.Uint64()
			wreq, sreq := req, req
			wreq.Rand, sreq.Rand = rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 1))
			w, s := walkIx.Match(wreq), scanOf(scanIx, sreq)
			if got, want := ranked(w), ranked(s); !slices.Equal(got, want) {
				t.Fatalf("trial %d, %d nodes, %+v: walk ranks %v; scan %v", trial, n, req, got, want)
			}
			if w.bits != nil {
				intersected++
				if intersectAfter > 0 {
					resumed++ // past the places it had read
				}
			}
			for k := 0; k <= 30; k++ {
				wc, werr := w.Pick()
				sc, serr := s.Pick()
				if wc.NodeID != sc.NodeID || fmt.Sprint(werr) != fmt.Sprint(serr) {
					t.Fatalf("trial %d, %d nodes, %+v: pick %d: walk %q, %v; scan %q, %v", trial, n, req, k, wc.NodeID, werr, sc.NodeID, serr)
				}
				if werr != nil {
					break
				}
			}
		}
	}
	t.Logf("%d of 80 walks narrowed, %d of them after reading places", intersected, resumed)
	if intersected < 30 || resumed < 15 {
		t.Errorf("%d of 80 walks narrowed, %d after reading places: the property is barely tested", intersected, resumed)
	}
}

// Two filters that each let half the fleet through, but together a few nodes: the walk reads
// those few, not half the fleet, and takes the best of them.
func TestIndexMatch_IntersectsSplitFleet(t *testing.T) {
	cands := fleetOf(20_000)
	for i := range cands {
		cands[i].Region, cands[i].Running = "us", 0
		if i%2 == 0 {
			cands[i].Region, cands[i].InputPrice = "de", usd("0.3") // over the cap but for 4 of them
		}
		if i%5000 == 0 {
			cands[i].InputPrice = usd("0.1")
		}
	}
	ix := NewIndex(cands)
	req := Request{Model: model, Rand: seeded(), Prefs: Prefs{Regions: []string{"eu"}, MaxPrice: PriceCap{Prompt: ptr(usd("0.2"))}, Sort: SortLatency}}
	r := ix.Match(req)
	if r.bits == nil || r.w.common.size != 4 {
		t.Fatalf("the walk reads %d places (bits %v), not the 4 both filters let through", r.w.common.size, r.bits != nil)
	}
	best := slices.MinFunc([]int{0, 5000, 10_000, 15_000}, func(a, b int) int {
		return cmp.Compare(leastLatency(&cands[a]), leastLatency(&cands[b]))
	})
	if c, err := r.Pick(); err != nil || c.NodeID != cands[best].NodeID {
		t.Errorf("picked %q, %v; want %q, the quickest of the four", c.NodeID, err, cands[best].NodeID)
	}
}

// The price order an index starts from NewIndex's sort is the one it would sort itself.
func TestIndex_PriceOrderPresorted(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for trial := range 200 {
		ix := NewIndex(candidates(randomOffers(rng, 1+rng.IntN(300))...))
		got, want := ix.sorted(byPrice), newSortIndex(ix.cands, byPrice, nil)
		if !slices.Equal(got.order, want.order) || !slices.Equal(got.start, want.start) || !slices.Equal(got.end, want.end) {
			t.Fatalf("trial %d: presorted order %v; sorted %v", trial, got.order, want.order)
		}
	}
}

// measures is a candidate's key but for the ties a decision draws: what the walk and Match
// must agree on whichever of equal nodes they keep.
func measures(k rankKey) rankKey { k.rot, k.rnd = 0, 0; return k }

// Property: the walk keeps what Match keeps over the same candidates, whichever of nodes
// equal in every measure each draws: the same keys, in the same tiers.
func TestIndexMatch_KeepsWhatMatchKeeps(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for trial := range 1000 {
		n := 1 + rng.IntN(120)
		offers := randomOffers(rng, n)
		ix := NewIndex(candidates(offers...))
		req := randomRequest(rng, n)
		req.Rand = rng
		keys := func(r *Ranking) []rankKey {
			r.complete()
			var ks []rankKey
			for _, e := range r.top[:r.n] {
				ks = append(ks, measures(e.k))
			}
			slices.SortFunc(ks, func(a, b rankKey) int {
				return cmp.Or(cmp.Compare(a.tier, b.tier), compareKeys(&a, &b))
			})
			return ks
		}
		got, want := keys(ix.Match(req)), keys(Match(req, ix.Candidates()))
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d, %+v: walk keeps %v; Match %v", trial, req.Prefs, got, want)
		}
	}
}

// Equal nodes share the traffic through the walk as through Match: its rotation starts at a
// random place of their group, and the tolerance spreads over the near ones it keeps.
func TestIndexMatch_SpreadsTies(t *testing.T) {
	const nodes, draws = 100, 20_000
	cands := make([]Candidate, nodes)
	for i := range cands {
		cands[i] = cand(fmt.Sprint("n", i), lat(0, 100*time.Millisecond))
	}
	cands = append(cands, cand("slow", lat(0, time.Second)))
	ix := NewIndex(cands)
	rng := seeded()
	got := map[string]int{}
	for range draws {
		c, err := ix.Match(Request{Model: model, Prefs: Prefs{Sort: SortLatency}, Rand: rng}).Pick()
		if err != nil {
			t.Fatal(err)
		}
		got[c.NodeID]++
	}
	if got["slow"] != 0 {
		t.Errorf("the slower node got %d requests; want 0", got["slow"])
	}
	for i := range nodes {
		if n := got[fmt.Sprint("n", i)]; n < draws/nodes*7/10 || n > draws/nodes*13/10 {
			t.Errorf("n%d got %d of %d; want %d ± 30%%", i, n, draws, draws/nodes)
		}
	}
}

// The walk's tiers: order's nodes in its order (a provider's by the sort), then the rest, and
// within each the nodes quicker than preferred_max_latency first; a strict order stops there.
func TestIndexMatch_Tiers(t *testing.T) {
	ms := time.Millisecond
	cands := []Candidate{
		cand("cheap", ask("0.1", "0.1"), lat(0, 900*ms)), cand("quick", lat(0, 100*ms)),
		cand("p-dear", provider("p"), ask("2", "2"), lat(0, 100*ms)), cand("p-cheap", provider("p"), ask("1", "1"), lat(0, 900*ms)),
		cand("listed", ask("3", "3")), cand("paused", func(c *Candidate) { c.Paused = true }),
	}
	ix := NewIndex(cands)
	for _, tt := range []struct {
		name  string
		prefs Prefs
		want  []string
	}{
		{"price", Prefs{}, []string{"cheap", "quick", "p-cheap", "p-dear", "listed"}},
		{"latency", Prefs{Sort: SortLatency}, []string{"quick", "p-dear", "cheap", "p-cheap", "listed"}},
		{"order", Prefs{Order: []string{"listed", "p"}}, []string{"listed", "p-cheap", "p-dear", "cheap", "quick"}},
		{"order strict", Prefs{Order: []string{"p", "listed", "p"}, AllowFallbacks: ptr(false)}, []string{"p-cheap", "p-dear", "listed"}},
		{"preferred max latency", Prefs{PreferredMaxLatency: 500 * ms}, []string{"quick", "p-dear", "listed", "cheap", "p-cheap"}},
		{"order and preferred max latency", Prefs{Order: []string{"p"}, PreferredMaxLatency: 500 * ms},
			[]string{"p-dear", "p-cheap", "quick", "listed", "cheap"}},
		{"only", Prefs{Only: []string{"p", "cheap"}, Sort: SortLatency}, []string{"p-dear", "cheap", "p-cheap"}},
		{"region", Prefs{Regions: []string{"fr"}}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := ix.Match(Request{Model: model, Prefs: tt.prefs, Rand: seeded()})
			if got := ranked(r); !slices.Equal(got, tt.want) {
				t.Errorf("ranked %q; want %q", got, tt.want)
			}
		})
	}
}

// A walk that finds nothing counts every node's reason, as Match does, the nodes it never
// walked included.
func TestIndexMatch_NoProvider(t *testing.T) {
	cands := []Candidate{cand("a", region("us")), cand("b", running(4)), cand("c", func(c *Candidate) { c.Paused = true }),
		cand("d", func(c *Candidate) { c.Level = Quarantined }), cand("e", region("us"), ask("9", "9"))}
	_, err := NewIndex(cands).Match(Request{Model: model, Prefs: Prefs{Regions: []string{"de"}, MaxPrice: PriceCap{Prompt: ptr(usd("1"))}}}).Pick()
	if want := "5 nodes serve llama3.1:8b: 2 outside region de, 1 busy, 1 paused, 1 quarantined"; fmt.Sprint(err) != want {
		t.Errorf("got %v; want %s", err, want)
	}
}

// When the regions allow few of many nodes, the default auction's Pick walks them alone, as
// Take does: it picks the best of them, and refuses as Match does when none is there.
func TestIndex_PickNarrow(t *testing.T) {
	cands := fleetOf(3000)
	for _, i := range []int{10, 1500, 2990} {
		cands[i].Region = "br"
	}
	ix := NewIndex(cands)
	for _, regions := range [][]string{{"br"}, {"gb"}, {"br", "gb"}} {
		req := Request{Model: model, Prefs: Prefs{Regions: regions}, Rand: seeded()}
		if f := newFilter(req); !ix.narrow(&f) {
			t.Fatalf("regions %v: not narrow", regions)
		}
		got, gerr := ix.Pick(req)
		want, werr := Match(req, cands).Pick()
		if fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Errorf("regions %v: Pick says %v; Match %v", regions, gerr, werr)
		}
		if werr == nil && (got.Region != "br" || effectivePrice(&got) > effectivePrice(&want)*(1+tolerance)) {
			t.Errorf("regions %v: Pick took %s in %q at %.0f; Match %s at %.0f", regions, got.NodeID, got.Region,
				effectivePrice(&got), want.NodeID, effectivePrice(&want))
		}
	}
	if f := newFilter(Request{Prefs: Prefs{Regions: []string{"eu"}}}); ix.narrow(&f) {
		t.Error("eu is narrow: the group walk serves it")
	}
}

// Concurrent decisions share one index, which builds its orders at the first that needs
// each: every decision still ranks as the scan does.
func TestIndexMatch_Concurrent(t *testing.T) {
	cands := fleetOf(3000)
	ix := NewIndex(cands)
	const workers, each = 8, 50
	type decision struct {
		req  Request
		seed uint64
		got  string
	}
	results := make([][]decision, workers)
	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(uint64(w), 17))
		wg.Go(func() {
			for range each {
				d := decision{req: randomRequest(rng, len(cands)), seed: rng.Uint64()}
				d.req.Prefs.Order = append(d.req.Prefs.Order, "acct-7") // the ids' order too
				d.req.Rand = rand.New(rand.NewPCG(d.seed, 1))
				c, err := ix.Take(d.req)
				d.got = fmt.Sprint(c.NodeID, err)
				results[w] = append(results[w], d)
			}
		})
	}
	wg.Wait()
	for _, ds := range results {
		for _, d := range ds {
			d.req.Rand = rand.New(rand.NewPCG(d.seed, 1))
			c, err := scanOf(ix, d.req).Pick()
			if want := fmt.Sprint(c.NodeID, err); d.got != want {
				t.Fatalf("%+v: concurrent Take %s; scan %s", d.req.Prefs, d.got, want)
			}
		}
	}
}
