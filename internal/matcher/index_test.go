package matcher

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// For preferences it serves, the index picks a node as good as Match's best — both within the
// tolerance of the best eligible node's effective price — and refuses for the same reasons.
func TestIndex_AgreesWithMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	prefsOf := []Prefs{
		{},
		{Regions: []string{"eu"}},
		{MaxPrice: PriceCap{Prompt: ptr(usd("0.1"))}},
		{Ignore: []string{"node-1", "node-2"}},
		{Regions: []string{"jp"}, MinReliability: ptr(0.9)},
		{Regions: []string{"br"}}, // nobody: every node refused
	}
	for trial := range 300 {
		cands := fleetOf(1 + rng.IntN(60))
		for i := range cands {
			cands[i].Running = rng.IntN(5) // some full
			cands[i].Reliability = []float64{1, 0.5, 0.9}[rng.IntN(3)]
		}
		p := prefsOf[trial%len(prefsOf)]
		excluded := map[string]bool{"node-0": true}
		m := Match(Request{Model: model, Prefs: p, Excluded: excluded, Rand: rng}, cands)
		want, werr := m.Pick()
		got, gerr := NewIndex(cands).Pick(Request{Model: model, Prefs: p, Excluded: excluded, Rand: rng})
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("trial %d %+v: index err %v, match err %v", trial, p, gerr, werr)
		}
		if werr != nil {
			if gerr.Error() != werr.Error() {
				t.Errorf("trial %d: index says %q, match says %q", trial, gerr, werr)
			}
			continue
		}
		best := math.Inf(1)
		for i := range cands {
			if eligibleByHand(&cands[i], p, excluded) {
				best = min(best, effectivePrice(&cands[i]))
			}
		}
		for _, c := range []Candidate{got, want} {
			if price := effectivePrice(&c); price < best || !near(best, price) {
				t.Errorf("trial %d %+v: index picked %s (%.0f), match %s (%.0f); want both within %v of the best eligible, %.0f",
					trial, p, got.NodeID, effectivePrice(&got), want.NodeID, effectivePrice(&want), tolerance, best)
			}
		}
		if why, _ := (&filter{}).check(&got); why == busy {
			t.Errorf("trial %d: index picked a full node", trial)
		}
	}
}

func TestIndex_SpreadsTies(t *testing.T) {
	cands := make([]Candidate, 10)
	for i := range cands {
		cands[i] = cand(fmt.Sprint("n", i))
	}
	cands = append(cands, cand("dear", ask("1", "1")))
	ix := NewIndex(cands)
	rng := seeded()
	got := map[string]int{}
	for range 10_000 {
		c, err := ix.Pick(Request{Model: model, Rand: rng})
		if err != nil {
			t.Fatal(err)
		}
		got[c.NodeID]++
	}
	t.Logf("shares over 10000 draws: %v", got)
	for i := range 10 {
		if n := got[fmt.Sprint("n", i)]; n < 900 || n > 1100 {
			t.Errorf("n%d got %d of 10000; want 1000 ± 10%%", i, n)
		}
	}
	if got["dear"] != 0 {
		t.Errorf("the dearer node got %d", got["dear"])
	}
}

func TestWalkable(t *testing.T) {
	for _, tt := range []struct {
		p    Prefs
		want bool
	}{
		{Prefs{}, true},
		{Prefs{Sort: SortPrice, Regions: []string{"eu"}}, true},
		{Prefs{Sort: SortLatency}, false},
		{Prefs{Order: []string{"a"}}, false},
		{Prefs{PreferredMaxLatency: 100}, false},
	} {
		if got := Walkable(tt.p); got != tt.want {
			t.Errorf("Walkable(%+v) = %v, want %v", tt.p, got, tt.want)
		}
	}
}

// BenchmarkIndex_FleetSize is one decision through the index at 1k, 10k and 100k nodes
// serving the model, with its p50 and p99 in µs.
func BenchmarkIndex_FleetSize(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		ix := NewIndex(fleetOf(n))
		for _, pc := range []struct {
			name  string
			prefs Prefs
		}{{"default", Prefs{}}, {"eu", Prefs{Regions: []string{"eu"}}}} {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, pc.name), func(b *testing.B) {
				rng := seeded()
				times := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				for b.Loop() {
					start := time.Now()
					if _, err := ix.Pick(Request{Model: model, Prefs: pc.prefs, Rand: rng}); err != nil {
						b.Fatal(err)
					}
					times = append(times, time.Since(start))
				}
				slices.Sort(times)
				b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1000, "p50-µs")
				b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds())/1000, "p99-µs")
			})
		}
	}
}

// BenchmarkNewIndex_100k is building one model's index of 100,000 nodes, which the gateway does
// again at most every 250 ms while it routes.
func BenchmarkNewIndex_100k(b *testing.B) {
	cands := fleetOf(100_000)
	b.ReportAllocs()
	for b.Loop() {
		NewIndex(cands)
	}
}
