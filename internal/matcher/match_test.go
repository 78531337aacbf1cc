package matcher

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
)

const model = "llama3.1:8b"

// usd is a price in USD per million tokens.
func usd(s string) money.Price {
	p, err := money.ParsePrice(s)
	if err != nil {
		panic(err)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// cand is an idle, reliable node in de asking $0.5 + $0.5.
func cand(id string, opts ...func(*Candidate)) Candidate {
	c := Candidate{NodeID: id, ProviderID: "acct-" + id, Region: "de", InputPrice: usd("0.5"), OutputPrice: usd("0.5"),
		Reliability: 1, MaxConcurrent: 4}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func region(r string) func(*Candidate)       { return func(c *Candidate) { c.Region = r } }
func provider(p string) func(*Candidate)     { return func(c *Candidate) { c.ProviderID = p } }
func reliability(r float64) func(*Candidate) { return func(c *Candidate) { c.Reliability = r } }
func quant(q string) func(*Candidate)        { return func(c *Candidate) { c.Quantization = q } }
func running(n int) func(*Candidate)         { return func(c *Candidate) { c.Running = n } }
func warm(c *Candidate)                      { c.Warm = true }
func tps(x float64) func(*Candidate)         { return func(c *Candidate) { c.TokensPerSecond = x } }
func ask(in, out string) func(*Candidate) {
	return func(c *Candidate) { c.InputPrice, c.OutputPrice = usd(in), usd(out) }
}
func lat(rtt, ttft time.Duration) func(*Candidate) {
	return func(c *Candidate) { c.RTT, c.TTFT = rtt, ttft }
}

// ranked returns the node ids of a ranking, best first.
func ranked(r *Ranking) []string {
	var ids []string
	for _, c := range r.Best() {
		ids = append(ids, c.NodeID)
	}
	return ids
}

func seeded() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

func TestMatch_Eligibility(t *testing.T) {
	tests := []struct {
		name     string
		prefs    Prefs
		excluded map[string]bool
		cands    []Candidate
		want     []string       // eligible, best first
		reasons  map[string]int // of the others
	}{
		{name: "no preferences", cands: []Candidate{cand("a"), cand("b", running(4))},
			want: []string{"a"}, reasons: map[string]int{ReasonBusy: 1}},
		{name: "no slots at all", cands: []Candidate{cand("a", func(c *Candidate) { c.MaxConcurrent = 0 })},
			reasons: map[string]int{ReasonBusy: 1}},
		{name: "excluded", excluded: map[string]bool{"a": true}, cands: []Candidate{cand("a"), cand("b")},
			want: []string{"b"}, reasons: map[string]int{ReasonExcluded: 1}},
		{name: "ignore node and provider", prefs: Prefs{Ignore: []string{"a", "acct-b"}},
			cands: []Candidate{cand("a"), cand("b"), cand("c")}, want: []string{"c"}, reasons: map[string]int{ReasonIgnored: 2}},
		{name: "only node and provider", prefs: Prefs{Only: []string{"a", "p"}},
			cands: []Candidate{cand("a"), cand("b", provider("p")), cand("c")}, want: []string{"a", "b"}, reasons: map[string]int{ReasonNotOnly: 1}},
		{name: "order without fallbacks", prefs: Prefs{Order: []string{"c"}, AllowFallbacks: ptr(false)},
			cands: []Candidate{cand("a"), cand("c")}, want: []string{"c"}, reasons: map[string]int{ReasonNotOrder: 1}},
		{name: "region", prefs: Prefs{Regions: []string{"eu"}},
			cands: []Candidate{cand("a"), cand("b", region("us")), cand("c", region(""))}, want: []string{"a"},
			reasons: map[string]int{"outside region eu": 2}},
		{name: "regions", prefs: Prefs{Regions: []string{"ch", "no"}},
			cands: []Candidate{cand("a"), cand("b", region("ch"))}, want: []string{"b"},
			reasons: map[string]int{"outside regions ch/no": 1}},
		{name: "quantization", prefs: Prefs{Quantizations: []string{"fp8", "unknown"}},
			cands: []Candidate{cand("a", quant("FP8")), cand("b", quant("q4_k_m")), cand("c")}, want: []string{"a", "c"},
			reasons: map[string]int{ReasonQuantized: 1}},
		{name: "max price prompt", prefs: Prefs{MaxPrice: PriceCap{Prompt: ptr(usd("0.5"))}},
			cands: []Candidate{cand("a"), cand("b", ask("0.500000001", "0"))}, want: []string{"a"},
			reasons: map[string]int{ReasonPrice: 1}},
		{name: "max price completion", prefs: Prefs{MaxPrice: PriceCap{Completion: ptr(usd("0.4"))}},
			cands: []Candidate{cand("a"), cand("b", ask("9", "0.4"))}, want: []string{"b"},
			reasons: map[string]int{ReasonPrice: 1}},
		{name: "min reliability", prefs: Prefs{MinReliability: ptr(0.9)},
			cands: []Candidate{cand("a", reliability(0.9)), cand("b", reliability(0.89))}, want: []string{"a"},
			reasons: map[string]int{ReasonReliability: 1}},
		{name: "first failing reason counts", prefs: Prefs{Regions: []string{"eu"}, MinReliability: ptr(0.5)},
			cands:   []Candidate{cand("a", region("jp"), running(4)), cand("b", reliability(0.1), running(4)), cand("c", running(4))},
			reasons: map[string]int{"outside region eu": 1, ReasonReliability: 1, ReasonBusy: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Match(Request{Model: model, Prefs: tt.prefs, Excluded: tt.excluded, Rand: seeded()}, tt.cands)
			got := ranked(r)
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("eligible %v; want %v", got, tt.want)
			}
			if r.Eligible != len(tt.want) {
				t.Errorf("Eligible = %d; want %d", r.Eligible, len(tt.want))
			}
			np := newNoProvider(model, r.Serving, &r.reasons, tt.prefs.Regions)
			if len(np.Reasons) != len(tt.reasons) || !mapsEqual(np.Reasons, tt.reasons) {
				t.Errorf("reasons %v; want %v", np.Reasons, tt.reasons)
			}
		})
	}
}

func mapsEqual(a, b map[string]int) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}

func TestMatch_Rank(t *testing.T) {
	tests := []struct {
		name  string
		prefs Prefs
		cands []Candidate
		want  []string
	}{
		{name: "cheapest first", cands: []Candidate{cand("a", ask("1", "1")), cand("b", ask("0.1", "0.2")), cand("c", ask("0.5", "0.5"))},
			want: []string{"b", "c", "a"}},
		{name: "input and output asks add up", cands: []Candidate{cand("a", ask("0.1", "2.5")), cand("b", ask("1", "1"))},
			want: []string{"b", "a"}},
		{name: "$1 at 0.5 reliability loses to $1.5 at 1.0",
			cands: []Candidate{cand("flaky", ask("0.5", "0.5"), reliability(0.5)), cand("solid", ask("0.75", "0.75"))},
			want:  []string{"solid", "flaky"}},
		{name: "$0.9 at 0.5 reliability beats $2 at 1.0", cands: []Candidate{cand("flaky", ask("0.45", "0.45"), reliability(0.5)), cand("solid", ask("1", "1"))},
			want: []string{"flaky", "solid"}},
		{name: "reliability floor keeps a free unreliable node last but ranked",
			cands: []Candidate{cand("zero", ask("0.011", "0"), reliability(0)), cand("ok", ask("0.1", "0.1"))},
			want:  []string{"ok", "zero"}},
		{name: "latency, unknown last", prefs: Prefs{Sort: SortLatency},
			cands: []Candidate{cand("unknown", ask("1", "1")), cand("far", lat(80*time.Millisecond, 200*time.Millisecond)),
				cand("near", lat(5*time.Millisecond, 300*time.Millisecond))},
			want: []string{"far", "near", "unknown"}},
		{name: "latency, an unmeasured time to first token last whatever the RTT", prefs: Prefs{Sort: SortLatency},
			cands: []Candidate{cand("rtt only", lat(time.Millisecond, 0)), cand("slow", lat(80*time.Millisecond, 2*time.Second)),
				cand("unknown", ask("1", "1"))},
			want: []string{"slow", "rtt only", "unknown"}},
		{name: "throughput, unknown last even with latencies", prefs: Prefs{Sort: SortThroughput},
			cands: []Candidate{cand("measured latency", lat(time.Millisecond, time.Millisecond)), cand("slow", tps(1), ask("2", "2"))},
			want:  []string{"slow", "measured latency"}},
		{name: "preferred max latency: an RTT alone over it is known slow", prefs: Prefs{PreferredMaxLatency: 500 * time.Millisecond},
			cands: []Candidate{cand("far", ask("0.1", "0.1"), lat(600*time.Millisecond, 0)), cand("unknown", ask("0.2", "0.2"))},
			want:  []string{"unknown", "far"}},
		{name: "latency ties by price", prefs: Prefs{Sort: SortLatency},
			cands: []Candidate{cand("dear", ask("2", "2"), lat(0, time.Second)), cand("cheap", lat(0, time.Second))},
			want:  []string{"cheap", "dear"}},
		{name: "throughput, unknown last", prefs: Prefs{Sort: SortThroughput},
			cands: []Candidate{cand("unknown"), cand("slow", tps(20)), cand("fast", tps(90), ask("5", "5"))},
			want:  []string{"fast", "slow", "unknown"}},
		{name: "preferred max latency ranks slow nodes after", prefs: Prefs{PreferredMaxLatency: 500 * time.Millisecond},
			cands: []Candidate{cand("slow cheap", ask("0.1", "0.1"), lat(0, time.Second)), cand("quick", lat(0, 400*time.Millisecond)),
				cand("unknown", ask("0.2", "0.2"))},
			want: []string{"unknown", "quick", "slow cheap"}},
		{name: "equal price: least loaded", cands: []Candidate{cand("busy", running(3)), cand("idle"), cand("half", running(2))},
			want: []string{"idle", "half", "busy"}},
		{name: "equal price and load: warm first", cands: []Candidate{cand("cold"), cand("warm", warm)},
			want: []string{"warm", "cold"}},
		{name: "load before warm", cands: []Candidate{cand("warm", warm, running(1)), cand("cold")},
			want: []string{"cold", "warm"}},
		{name: "order first, then the rest", prefs: Prefs{Order: []string{"dear", "p"}},
			cands: []Candidate{cand("cheap", ask("0", "0")), cand("p2", provider("p"), ask("1", "1")), cand("p1", provider("p"), ask("0.5", "0.5")),
				cand("dear", ask("9", "9"))},
			want: []string{"dear", "p1", "p2", "cheap"}},
		{name: "order without fallbacks", prefs: Prefs{Order: []string{"b", "a"}, AllowFallbacks: ptr(false)},
			cands: []Candidate{cand("a"), cand("b", ask("3", "3")), cand("c", ask("0", "0"))},
			want:  []string{"b", "a"}},
		{name: "fallbacks false without order changes nothing", prefs: Prefs{AllowFallbacks: ptr(false)},
			cands: []Candidate{cand("a", ask("1", "1")), cand("b")},
			want:  []string{"b", "a"}},
		{name: "long order list", prefs: Prefs{Order: []string{"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "c", "acct-a"}},
			cands: []Candidate{cand("a"), cand("b", running(1)), cand("c", ask("2", "2"))},
			want:  []string{"c", "a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Match(Request{Model: model, Prefs: tt.prefs, Rand: seeded()}, tt.cands)
			if got := ranked(r); !slices.Equal(got, tt.want) {
				t.Errorf("ranked %q; want %q", got, tt.want)
			}
		})
	}
}

// Equal nodes share traffic: over many draws, each gets about its share.
func TestMatch_SpreadsTies(t *testing.T) {
	const nodes, draws = 10, 10_000
	cands := make([]Candidate, nodes)
	for i := range cands {
		cands[i] = cand(fmt.Sprint("n", i))
	}
	cands = append(cands, cand("dear", ask("1", "1")))
	rng := seeded()
	got := map[string]int{}
	for range draws {
		r := Match(Request{Model: model, Rand: rng}, cands)
		c, err := r.Pick()
		if err != nil {
			t.Fatal(err)
		}
		got[c.NodeID]++
	}
	if got["dear"] != 0 {
		t.Errorf("the dearer node got %d requests; want 0", got["dear"])
	}
	t.Logf("shares over %d draws: %v", draws, got)
	for i := range nodes {
		id := fmt.Sprint("n", i)
		if n := got[id]; n < draws/nodes*9/10 || n > draws/nodes*11/10 {
			t.Errorf("%s got %d of %d requests; want %d ± 10%%", id, n, draws, draws/nodes)
		}
	}
}

// The heap keeps the same best candidates a full sort would, whatever the depth.
func TestMatch_DepthKeepsTheBest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cands := make([]Candidate, 500)
	for i := range cands {
		cands[i] = cand(fmt.Sprint(i), ask(fmt.Sprint(rng.IntN(50)), "0"), running(rng.IntN(5)), reliability(0.5+rng.Float64()/2))
	}
	// In the exact order, before the tolerance evens near entries out.
	exact := func(r *Ranking) []string {
		top := slices.Clone(r.top[:r.n])
		slices.SortFunc(top, func(a, b entry) int {
			if a.k.less(&b.k) {
				return -1
			}
			return 1
		})
		var ids []string
		for _, e := range top {
			ids = append(ids, cands[e.i].NodeID)
		}
		return ids
	}
	full := Match(Request{Model: model, Rand: seeded(), Depth: MaxDepth}, cands)
	for _, depth := range []int{1, 2, 7, 16, MaxDepth, 1000} {
		r := Match(Request{Model: model, Rand: seeded(), Depth: depth}, cands)
		got := exact(r)
		if want := exact(full)[:min(depth, MaxDepth)]; !slices.Equal(got, want) {
			t.Errorf("depth %d: %v; want %v", depth, got, want)
		}
	}
	if full.Len() != MaxDepth {
		t.Errorf("Len = %d; want %d", full.Len(), MaxDepth)
	}
}

func TestNoProvider_Error(t *testing.T) {
	tests := []struct {
		name string
		np   NoProvider
		want string
	}{
		{"busy only", NoProvider{Model: "sim/llama-3.1-8b", Serving: 1, Reasons: map[string]int{ReasonBusy: 1}}, "1 node serves sim/llama-3.1-8b: 1 busy"},
		{"most first", NoProvider{Model: model, Serving: 3, Reasons: map[string]int{"outside region eu": 1, ReasonBusy: 2}},
			"3 nodes serve llama3.1:8b: 2 busy, 1 outside region eu"},
		{"ties by name", NoProvider{Model: model, Serving: 3, Reasons: map[string]int{ReasonPrice: 1, ReasonBusy: 1, ReasonIgnored: 1}},
			"3 nodes serve llama3.1:8b: 1 busy, 1 ignored, 1 over max price"},
		{"none", NoProvider{Model: model}, "0 nodes serve llama3.1:8b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.np.Error(); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

// Property: whatever the preferences, the ranking holds only eligible candidates — never one
// outside the regions — and none left out ranks strictly better than one kept.
func TestMatch_NeverIneligible(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pick := func(xs ...string) []string {
		var out []string
		for _, x := range xs {
			if rng.IntN(4) == 0 {
				out = append(out, x)
			}
		}
		return out
	}
	regionsPool := []string{"de", "fr", "us", "jp", "ch", "", "gb", "in"}
	ranked := 0
	for iter := range 1000 {
		cands := make([]Candidate, 1+rng.IntN(60))
		for i := range cands {
			cands[i] = Candidate{NodeID: fmt.Sprint("n", i), ProviderID: fmt.Sprint("p", rng.IntN(5)),
				Region: regionsPool[rng.IntN(len(regionsPool))], InputPrice: money.Price(rng.IntN(4)) * usd("0.25"),
				OutputPrice: money.Price(rng.IntN(4)) * usd("0.25"), Quantization: []string{"", "fp8", "int4"}[rng.IntN(3)],
				Reliability: float64(rng.IntN(5)) / 4, Running: rng.IntN(3), MaxConcurrent: 1 + rng.IntN(3),
				TokensPerSecond: float64(rng.IntN(3) * 10), TTFT: time.Duration(rng.IntN(3)) * time.Second, Warm: rng.IntN(2) == 0}
		}
		p := Prefs{Order: pick("n1", "p2", "n7"), Only: pick("p0", "p1", "p3", "n4"), Ignore: pick("n2", "p4"),
			Regions: pick("eu", "us", "ch", "asia"), Quantizations: pick("fp8", "unknown"), Sort: []string{"", SortLatency, SortThroughput}[rng.IntN(3)]}
		if rng.IntN(2) == 0 {
			p.AllowFallbacks = ptr(false)
		}
		if rng.IntN(2) == 0 {
			p.MaxPrice.Prompt = ptr(usd("0.5"))
		}
		if rng.IntN(2) == 0 {
			p.MinReliability = ptr(0.5)
		}
		excluded := map[string]bool{"n3": rng.IntN(2) == 0}
		r := Match(Request{Model: model, Prefs: p, Excluded: excluded, Rand: rng, Depth: 1 + rng.IntN(8)}, cands)
		f := newFilter(Request{Prefs: p, Excluded: excluded})
		allow := allowed(p.Regions)
		kept := map[string]bool{}
		var worst rankKey
		for i, e := range r.top[:r.n] {
			c := &cands[e.i]
			kept[c.NodeID] = true
			ranked++
			if !eligibleByHand(c, p, excluded) {
				t.Fatalf("iter %d: %+v ranked with prefs %+v", iter, c, p)
			}
			if len(p.Regions) > 0 && !allow.contains(c.Region) {
				t.Fatalf("iter %d: %s in %q ranked; regions %v", iter, c.NodeID, c.Region, p.Regions)
			}
			if i == r.n-1 {
				worst = e.k
			}
		}
		eligibleN := 0
		for i := range cands {
			c := &cands[i]
			if !eligibleByHand(c, p, excluded) {
				continue
			}
			eligibleN++
			if kept[c.NodeID] {
				continue
			}
			why, pos := f.check(c)
			var k rankKey
			f.key(c, pos, &k)
			k.rnd = worst.rnd
			if why != eligible || k.less(&worst) {
				t.Fatalf("iter %d: %s left out but ranks before the worst kept", iter, c.NodeID)
			}
		}
		if eligibleN != r.Eligible {
			t.Fatalf("iter %d: Eligible = %d; want %d", iter, r.Eligible, eligibleN)
		}
	}
	if ranked < 600 {
		t.Errorf("only %d candidates ranked over all iterations: the property is barely tested", ranked)
	}
}

// eligibleByHand restates eligibility plainly.
func eligibleByHand(c *Candidate, p Prefs, excluded map[string]bool) bool {
	in := func(list []string) bool {
		return slices.Contains(list, c.NodeID) || slices.Contains(list, c.ProviderID)
	}
	q := c.Quantization
	if q == "" {
		q = "unknown"
	}
	switch {
	case excluded[c.NodeID], in(p.Ignore),
		len(p.Only) > 0 && !in(p.Only),
		len(p.Order) > 0 && !p.FallbacksAllowed() && !in(p.Order),
		len(p.Regions) > 0 && !slices.ContainsFunc(p.Regions, func(r string) bool {
			return r == c.Region || strings.Contains(groups[r], c.Region) && c.Region != ""
		}),
		len(p.Quantizations) > 0 && !slices.Contains(p.Quantizations, q),
		p.MaxPrice.Prompt != nil && c.InputPrice > *p.MaxPrice.Prompt,
		p.MinReliability != nil && c.Reliability < *p.MinReliability,
		c.Running >= c.MaxConcurrent:
		return false
	}
	return true
}
