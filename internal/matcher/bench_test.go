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

// decisionCase is one benchmarked decision: preferences over a fleet.
type decisionCase struct {
	name     string
	prefs    Prefs
	excluded map[string]bool // the nodes that failed the request already, on a retry
	none     bool            // no node is eligible: the decision is a NoProvider
}

// benchDecisions runs each case's decision (decide: as the core makes it) on one index of
// cands, reporting its p50 and p99 in µs, measured decision by decision.
func benchDecisions(b *testing.B, cands []Candidate, cases []decisionCase) {
	ix := NewIndex(cands)
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			rng := seeded()
			req := Request{Model: model, Prefs: bc.prefs, Rand: rng}
			if _, err := decide(ix, req); (err != nil) != bc.none { // and build what the index builds at its first use
				b.Fatalf("decision: %v", err)
			}
			times := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				_, err := decide(ix, req)
				times = append(times, time.Since(start))
				if (err != nil) != bc.none {
					b.Fatal(err)
				}
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1000, "p50-µs")
			b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds())/1000, "p99-µs")
		})
	}
}

// benchLive is benchDecisions over candidates with live slots: each decision takes a slot,
// which is freed again before the next, so that every decision meets the same fleet.
func benchLive(b *testing.B, cands []Candidate, tracked bool, cases []decisionCase) {
	ix := NewIndex(cands)
	if tracked {
		ix.Track()
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			req := Request{Model: model, Prefs: bc.prefs, Excluded: bc.excluded, Rand: seeded()}
			times := make([]time.Duration, 0, 1<<16)
			for b.Loop() {
				start := time.Now()
				c, err := decide(ix, req)
				times = append(times, time.Since(start))
				if (err != nil) != bc.none {
					b.Fatal(err)
				}
				if err == nil {
					c.Slot.(*testOffer).Release()
				}
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1000, "p50-µs")
			b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds())/1000, "p99-µs")
		})
	}
}

// BenchmarkMatch_100k is one decision at 100,000 nodes serving the model, by each sort and
// preference, as the core makes it (decide), with its p50 and p99 in µs.
func BenchmarkMatch_100k(b *testing.B) {
	benchDecisions(b, fleetOf(100_000), []decisionCase{
		{name: "default", prefs: Prefs{}},
		{name: "price", prefs: Prefs{Sort: SortPrice}},
		{name: "latency", prefs: Prefs{Sort: SortLatency}},
		{name: "throughput", prefs: Prefs{Sort: SortThroughput}},
		{name: "order", prefs: Prefs{Order: []string{"acct-7", "acct-8"}}},
		{name: "order_strict", prefs: Prefs{Order: []string{"node-5", "acct-7"}, AllowFallbacks: ptr(false)}},
		{name: "session", prefs: Prefs{Order: []string{"node-99"}, Sort: SortLatency}}, // a session's last node first
		{name: "preferred_max_latency", prefs: Prefs{PreferredMaxLatency: 300 * time.Millisecond}},
		{name: "eu_maxprice_latency", prefs: Prefs{Regions: []string{"eu"}, MaxPrice: PriceCap{Prompt: ptr(usd("0.2"))}, Sort: SortLatency}},
	})
}

// BenchmarkMatch_100k_Hard is one decision at 100,000 nodes where filters or load leave few
// of the best eligible, as the core makes it, with its p50 and p99 in µs.
func BenchmarkMatch_100k_Hard(b *testing.B) {
	cands := fleetOf(100_000)
	for i := 0; i < len(cands); i += 10_000 {
		cands[i].Region = "br" // 10 nodes in Brazil
	}
	benchDecisions(b, cands, []decisionCase{
		{name: "default", prefs: Prefs{}},
		{name: "rare_region_latency", prefs: Prefs{Regions: []string{"br"}, Sort: SortLatency}},
		{name: "rare_region_price", prefs: Prefs{Regions: []string{"br"}}},
		{name: "tight_maxprice_latency", prefs: Prefs{MaxPrice: PriceCap{Prompt: ptr(usd("0.051"))}, Sort: SortLatency}}, // 1% of nodes
		{name: "min_reliability_throughput", prefs: Prefs{MinReliability: ptr(0.999), Sort: SortThroughput}},             // 0.5%
		{name: "tiny_preferred_max_latency", prefs: Prefs{PreferredMaxLatency: 10 * time.Millisecond}},                   // 0.1% quicker
		{name: "none_eligible", prefs: Prefs{Regions: []string{"gb"}}, none: true},
	})
}

// BenchmarkMatch_100k_Worst is one decision at 100,000 nodes in cases the index cannot
// bound: a fleet 99% busy (every walk checks the busy nodes before the free ones, live), a
// region, or the nodes under a price cap, busy but for a few in a free fleet, every node full
// to silver but for its gold slot, every node full (a refusal counts every node's reason:
// O(n) still), and two filters that each let half the fleet
// through but together only 20 nodes (the walk reads the smaller of the two sets).
func BenchmarkMatch_100k_Worst(b *testing.B) {
	busy := fleetOf(100_000)
	for i := range busy {
		if i%100 != 0 {
			busy[i].Running = busy[i].MaxConcurrent
		}
	}
	b.Run("busy", func(b *testing.B) {
		benchDecisions(b, busy, []decisionCase{
			{name: "default", prefs: Prefs{}},
			{name: "latency", prefs: Prefs{Sort: SortLatency}},
			{name: "order", prefs: Prefs{Order: []string{"node-99"}}},
		})
	})
	// The same with live slots, as the core's index has them: untracked, every decision checks
	// each busy node's slot; tracked (Index.Track), it skips them 64 at a time.
	for _, tracked := range []bool{false, true} {
		b.Run(fmt.Sprintf("busy_live/tracked=%v", tracked), func(b *testing.B) {
			cands := slices.Clone(busy)
			for i := range cands {
				o := offer(cands[i].NodeID, cands[i].MaxConcurrent, 0)
				o.running = cands[i].Running
				cands[i].Slot = o
			}
			benchLive(b, cands, tracked, []decisionCase{
				{name: "default", prefs: Prefs{}},
				{name: "latency", prefs: Prefs{Sort: SortLatency}},
				{name: "order", prefs: Prefs{Order: []string{"node-99"}}},
			})
		})
	}
	// A region whose nodes are all busy but 10, in a fleet whose other nodes are all free, as
	// Europe's evening is in the simulated market: tracked, the walk skips the free nodes of
	// other countries 64 at a time too.
	region := fleetOf(100_000)
	for i := range region {
		c := &region[i]
		c.Slot, c.Running = offer(c.NodeID, c.MaxConcurrent, 0), 0
		if c.Region == "de" || c.Region == "fr" || c.Region == "nl" {
			if i%10_000 != 0 {
				c.Running = c.MaxConcurrent
			}
			c.Slot.(*testOffer).running = c.Running
		}
	}
	b.Run("busy_region_live/tracked", func(b *testing.B) {
		benchLive(b, region, true, []decisionCase{{name: "eu", prefs: Prefs{Regions: []string{"eu"}}}})
	})
	// The nodes under a price cap busy but for one, the rest free: the cheap ones full at peak.
	cheap := fleetOf(100_000)
	for i := range cheap {
		c := &cheap[i]
		c.Slot, c.Running = offer(c.NodeID, c.MaxConcurrent, 0), 0
		if c.InputPrice <= usd("0.1") && i%10_000 != 0 {
			c.Running = c.MaxConcurrent
			c.Slot.(*testOffer).running = c.Running
		}
	}
	b.Run("busy_cheap_live/tracked", func(b *testing.B) {
		benchLive(b, cheap, true, []decisionCase{{name: "max_price", prefs: Prefs{MaxPrice: PriceCap{Prompt: ptr(usd("0.1"))}}}})
	})
	// Every node full but for the slot it keeps for gold, 10 of them idle: a silver decision.
	gold := fleetOf(100_000)
	for i := range gold {
		c := &gold[i]
		o := offer(c.NodeID, c.MaxConcurrent, 0)
		o.gold, o.running = 1, c.MaxConcurrent-1
		if i%10_000 == 0 {
			o.running = 0
		}
		c.Slot, c.Running, c.GoldSlots = o, o.running, o.gold
	}
	// Every node full: the decision finds none, and counts every node's reason.
	full := fleetOf(100_000)
	for i := range full {
		c := &full[i]
		o := offer(c.NodeID, c.MaxConcurrent, 0)
		o.running = c.MaxConcurrent
		c.Slot, c.Running = o, o.running
	}
	b.Run("full_live/tracked", func(b *testing.B) {
		benchLive(b, full, true, []decisionCase{
			{name: "default", prefs: Prefs{}, none: true},
			{name: "eu", prefs: Prefs{Regions: []string{"eu"}}, none: true},
			{name: "latency", prefs: Prefs{Sort: SortLatency}, none: true},
			{name: "retry", prefs: Prefs{}, excluded: map[string]bool{"node-5": true, "node-77": true, "node-999": true}, none: true},
		})
	})
	b.Run("busy_but_gold_live/tracked", func(b *testing.B) {
		benchLive(b, gold, true, []decisionCase{{name: "silver", prefs: Prefs{}}})
	})
	split := fleetOf(100_000)
	for i := range split {
		split[i].Region = "us"
		if i%2 == 0 {
			split[i].Region = "de"
			split[i].InputPrice = usd("0.3") // over the cap but for 20 of them
		}
		if i%5000 == 0 {
			split[i].InputPrice = usd("0.1")
		}
	}
	b.Run("split", func(b *testing.B) {
		benchDecisions(b, split, []decisionCase{
			{name: "default", prefs: Prefs{}},
			{name: "eu_maxprice_latency", prefs: Prefs{Regions: []string{"eu"}, MaxPrice: PriceCap{Prompt: ptr(usd("0.2"))}, Sort: SortLatency}},
		})
	})
}

// BenchmarkMatch_FleetSize is one decision by the scan (Match and Pick, default preferences)
// at 1k, 10k and 100k nodes serving the model, with its p50 and p99 in µs.
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

// BenchmarkIndexOrders_100k is building each order the walk reads, for an index of 100,000
// nodes: a sort's (price, latency or throughput), the ids' (for order and only), a
// threshold's (an attribute's order and its levels in a sort's) and the countries' members.
// An index builds each at the first decision that needs it, and the core builds an index
// again at most every 250 ms (core/candidates.go).
func BenchmarkIndexOrders_100k(b *testing.B) {
	cands := fleetOf(100_000)
	si := newSortIndex(cands, byLatency, nil)
	ix := NewIndex(cands)
	for _, bc := range []struct {
		name  string
		build func()
	}{
		{"sort", func() { newSortIndex(cands, byLatency, nil) }},
		{"sort_price", func() { newSortIndex(ix.cands, byPrice, ix.byPrice) }},
		{"ids", func() { (&sortIndex{order: si.order}).idPlaces(newIDIndex(cands)) }},
		{"threshold", func() {
			(&sortIndex{order: si.order}).levelsOf(newAttrOrder(cands, attrInput), attrInput, prefix)
		}},
		{"countries", func() { (&Index{cands: cands}).countryMembers() }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.build()
			}
		})
	}
}
