package matcher

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

func TestNear(t *testing.T) {
	inf := math.Inf(1)
	for _, tt := range []struct {
		best, x float64
		want    bool
	}{
		{1, 1, true},
		{1, 1.05, true},
		{1, 1.051, false},
		{200, 209, true},
		{0, 0, true},
		{0, 1e-9, false},       // a free node is equal only to free ones
		{-100, -96, true},      // 96 tokens/s is within 5% of 100
		{-100, -95, false},     // 95 is not: 100 / 95 > 1.05
		{inf, inf, true},       // unmeasured nodes are equal among themselves
		{1e12, inf, false},     // and never equal to a measured one
		{-100, inf, false},     // nor to a measured throughput
		{1, math.NaN(), false}, // no measure is near nothing
	} {
		if got := near(tt.best, tt.x); got != tt.want {
			t.Errorf("near(%v, %v) = %v; want %v", tt.best, tt.x, got, tt.want)
		}
	}
}

// shares draws n picks and returns each node's share of them.
func shares(t *testing.T, n int, pick func() (Candidate, error)) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for range n {
		c, err := pick()
		if err != nil {
			t.Fatal(err)
		}
		got[c.NodeID] += 1 / float64(n)
	}
	return got
}

// Nodes whose ranking is equal within the tolerance share the requests, in Match and in the
// index alike; a node beyond the tolerance of the best gets none while the best is free.
func TestSpread_Tolerance(t *testing.T) {
	ms := time.Millisecond
	trusted := func(c *Candidate) { c.Level = Trusted }
	tests := []struct {
		name  string
		prefs Prefs
		cands []Candidate
		want  map[string]float64
	}{
		{name: "equal asks, scores 0.97 and 0.98",
			cands: []Candidate{cand("a", reliability(0.97)), cand("b", reliability(0.98))},
			want:  map[string]float64{"a": 0.5, "b": 0.5}},
		{name: "equal asks, four scores within 5% of the best's",
			cands: []Candidate{cand("a", reliability(0.95)), cand("b", reliability(0.96)), cand("c", reliability(0.97)), cand("d", reliability(0.98))},
			want:  map[string]float64{"a": 0.25, "b": 0.25, "c": 0.25, "d": 0.25}},
		{name: "an ask 6% lower takes every request",
			cands: []Candidate{cand("cheap", ask("0.47", "0.47")), cand("dear")},
			want:  map[string]float64{"cheap": 1}},
		{name: "a score 6% higher takes every request",
			cands: []Candidate{cand("good", reliability(1)), cand("worse", reliability(0.94))},
			want:  map[string]float64{"good": 1}},
		{name: "near the best, not near by a chain",
			cands: []Candidate{cand("a"), cand("b", ask("0.52", "0.52")), cand("c", ask("0.54", "0.54"))},
			want:  map[string]float64{"a": 0.5, "b": 0.5}},
		{name: "trusted before verified, whatever the tolerance",
			cands: []Candidate{cand("trusted", trusted, reliability(0.97)), cand("verified")},
			want:  map[string]float64{"trusted": 1}},
		{name: "latency: within 5% share, by their near prices too", prefs: Prefs{Sort: SortLatency},
			cands: []Candidate{cand("a", lat(10*ms, 190*ms), reliability(0.97)), cand("b", lat(8*ms, 200*ms), reliability(0.98)),
				cand("slower", lat(10*ms, 250*ms))},
			want: map[string]float64{"a": 0.5, "b": 0.5}},
		{name: "latency: near latencies, the clearly cheaper wins", prefs: Prefs{Sort: SortLatency},
			cands: []Candidate{cand("cheap", lat(0, 200*ms), ask("0.4", "0.4")), cand("dear", lat(0, 199*ms))},
			want:  map[string]float64{"cheap": 1}},
		{name: "throughput: 100 and 97 tokens/s share", prefs: Prefs{Sort: SortThroughput},
			cands: []Candidate{cand("a", tps(100)), cand("b", tps(97)), cand("slow", tps(80))},
			want:  map[string]float64{"a": 0.5, "b": 0.5}},
	}
	const draws = 4000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := seeded()
			check := func(by string, got map[string]float64) {
				t.Helper()
				for id, share := range got {
					if math.Abs(share-tt.want[id]) > 0.05 {
						t.Errorf("%s: shares %v; want %v ± 0.05", by, got, tt.want)
						return
					}
				}
			}
			check("match", shares(t, draws, func() (Candidate, error) {
				return Match(Request{Model: model, Prefs: tt.prefs, Rand: rng}, tt.cands).Pick()
			}))
			if Walkable(tt.prefs) {
				ix := NewIndex(tt.cands)
				check("index", shares(t, draws, func() (Candidate, error) { return ix.Pick(Request{Model: model, Rand: rng}) }))
			}
		})
	}
}

// In the index, a near group's warm nodes come before its cold ones, and a cold node near the
// best before a warm node beyond the tolerance.
func TestIndex_WarmWithinGroup(t *testing.T) {
	cands := []Candidate{cand("cold"), cand("warm", warm, ask("0.51", "0.51")), cand("dear warm", warm, ask("0.6", "0.6"))}
	ix := NewIndex(cands)
	rng := seeded()
	for _, tt := range []struct {
		excluded map[string]bool
		want     string
	}{
		{nil, "warm"},
		{map[string]bool{"warm": true}, "cold"},
		{map[string]bool{"warm": true, "cold": true}, "dear warm"},
	} {
		for range 20 {
			c, err := ix.Pick(Request{Model: model, Rand: rng, Excluded: tt.excluded})
			if err != nil || c.NodeID != tt.want {
				t.Fatalf("excluding %v: picked %q, %v; want %q", tt.excluded, c.NodeID, err, tt.want)
			}
		}
	}
}

// Within a group the index takes the less loaded of the first two eligible nodes from its
// rotation: an idle node before a busy one, and equally loaded nodes in turn.
func TestIndex_SpreadsByLoad(t *testing.T) {
	a, b := offer("a", 4, 1), offer("b", 4, 1)
	take := func(o *testOffer, n int) {
		for range n {
			o.Acquire()
		}
	}
	picks := func() map[string]int {
		ix := NewIndex(candidates(a, b))
		rng := seeded()
		got := map[string]int{}
		for range 100 {
			c, err := ix.Pick(Request{Model: model, Rand: rng})
			if err != nil {
				t.Fatal(err)
			}
			got[c.NodeID]++
			c.Slot.(*testOffer).Release()
		}
		return got
	}
	take(a, 3)
	if got := picks(); got["b"] != 100 {
		t.Errorf("a running 3 of 4, b idle: picks %v; want b every time", got)
	}
	take(b, 3)
	if got := picks(); got["a"] != 50 || got["b"] != 50 {
		t.Errorf("both running 3 of 4: picks %v; want them in turn", got)
	}
}

// Concurrent decisions share one index (the gateway's, for 250 ms): its rotation hands equal
// nodes out in turn across them too.
func TestIndex_ConcurrentPicksTakeTurns(t *testing.T) {
	var cands []Candidate
	for i := range 4 {
		cands = append(cands, cand(fmt.Sprint("n", i), reliability(0.96+float64(i)/100)))
	}
	ix := NewIndex(cands)
	const workers, picks = 8, 500
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range picks {
				c, err := ix.Pick(Request{Model: model}) // the global source: a *rand.Rand is not shared
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[c.NodeID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, c := range cands {
		if got[c.NodeID] != workers*picks/len(cands) {
			t.Errorf("picks %v; want %d each", got, workers*picks/len(cands))
			break
		}
	}
}

// BenchmarkIndex_Ties is one decision through the index when the whole fleet asks the same and
// scores within the tolerance: one group of 100,000 nodes.
func BenchmarkIndex_Ties(b *testing.B) {
	cands := fleetOf(100_000)
	for i := range cands {
		cands[i].InputPrice, cands[i].OutputPrice = usd("0.5"), usd("0.5")
		cands[i].Reliability = 0.96 + float64(i%4)/100
	}
	ix := NewIndex(cands)
	rng := seeded()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ix.Pick(Request{Model: model, Prefs: Prefs{Regions: []string{"eu"}}, Rand: rng}); err != nil {
			b.Fatal(err)
		}
	}
}

func ExampleNewIndex() {
	var cands []Candidate
	for i, score := range []float64{0.96, 0.97, 0.98, 0.99} {
		cands = append(cands, Candidate{NodeID: fmt.Sprint("node-", i), InputPrice: usd("0.05"), OutputPrice: usd("0.10"),
			Reliability: score, MaxConcurrent: 4})
	}
	ix := NewIndex(cands)
	served := map[string]int{}
	for range 400 {
		c, _ := ix.Pick(Request{Model: model})
		served[c.NodeID]++
	}
	fmt.Println(served)
	// Output: map[node-0:100 node-1:100 node-2:100 node-3:100]
}
