package matcher

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
)

// fleetOf returns n candidates with mixed asks, loads, regions and measurements.
func fleetOf(n int) []Candidate {
	rng := rand.New(rand.NewPCG(7, 8))
	regions := []string{"de", "fr", "us", "jp", "nl", "sg", ""}
	cs := make([]Candidate, n)
	for i := range cs {
		cs[i] = Candidate{NodeID: fmt.Sprint("node-", i), ProviderID: fmt.Sprint("acct-", i%5000), Region: regions[rng.IntN(len(regions))],
			InputPrice: money.Price(50+rng.IntN(200)) * 1_000_000, OutputPrice: money.Price(100+rng.IntN(400)) * 1_000_000,
			Reliability: 0.8 + rng.Float64()/5, RTT: time.Duration(rng.IntN(100)) * time.Millisecond,
			TTFT: time.Duration(rng.IntN(800)) * time.Millisecond, TokensPerSecond: float64(rng.IntN(120)),
			Running: rng.IntN(4), MaxConcurrent: 4, Warm: rng.IntN(2) == 0}
	}
	return cs
}

func BenchmarkMatch_100k(b *testing.B) {
	cands := fleetOf(100_000)
	for _, bc := range []struct {
		name  string
		prefs Prefs
	}{
		{"default", Prefs{}},
		{"eu_maxprice_latency", Prefs{Regions: []string{"eu"}, MaxPrice: PriceCap{Prompt: ptr(usd("0.2"))}, Sort: SortLatency}},
		{"order_strict", Prefs{Order: []string{"node-5", "acct-7"}, AllowFallbacks: ptr(false)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rng := seeded()
			b.ReportAllocs()
			for b.Loop() {
				r := Match(Request{Model: model, Prefs: bc.prefs, Rand: rng}, cands)
				if _, err := r.Pick(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMatch_FleetSize is one decision (match and pick, default preferences) at 1k, 10k
// and 100k nodes serving the model, with its p50 and p99 in µs.
func BenchmarkMatch_FleetSize(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		cands := fleetOf(n)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			rng := seeded()
			times := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				r := Match(Request{Model: model, Rand: rng}, cands)
				if _, err := r.Pick(); err != nil {
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
