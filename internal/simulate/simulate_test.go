package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/tier"
)

func loadExample(t *testing.T, name string) (*Fleet, *Demand) {
	t.Helper()
	f, err := LoadFleet("../../examples/" + name + "/fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, err := LoadDemand("../../examples/" + name + "/demand.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return f, d
}

func run(t *testing.T, f *Fleet, d *Demand, o Options) *Report {
	t.Helper()
	rep, err := Run(context.Background(), f, d, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The same inputs and seed give the same report, byte for byte, however many partitions run
// at once; another seed gives another.
func TestRun_Deterministic(t *testing.T) {
	f, d := loadExample(t, "gamer")
	o := Options{Seed: 7, Duration: 36 * time.Hour}
	a := jsonOf(t, run(t, f, d, o))
	o.Workers = 1
	if b := jsonOf(t, run(t, f, d, o)); !bytes.Equal(a, b) {
		t.Error("the same seed gave two reports")
	}
	o.Seed = 8
	if c := jsonOf(t, run(t, f, d, o)); bytes.Equal(a, c) {
		t.Error("another seed gave the same report")
	}
	// The built-in market has two partitions (llama-3.1-70b alone): one worker or two.
	o = Options{Seed: 3, Duration: 12 * time.Hour}
	x := jsonOf(t, run(t, DefaultFleet(), DefaultDemand(), o))
	o.Workers = 1
	if y := jsonOf(t, run(t, DefaultFleet(), DefaultDemand(), o)); !bytes.Equal(x, y) {
		t.Error("partitions run at once changed the report")
	}
}

// Every request ends exactly once, every batch line is accounted for, and the books balance
// to the nano-dollar: buyers' debits and the platform's continuation subsidy are providers'
// earnings and the platform's fees; the nodes' earnings add up to the providers'.
func TestRun_Reconciles(t *testing.T) {
	f, d := loadExample(t, "founder")
	rep := run(t, f, d, Options{Seed: 1, Duration: 6 * 24 * time.Hour, Weight: 2})
	rq := rep.Requests
	if rq.Arrived == 0 || rq.Arrived != rq.Total || rq.Total != rq.Served+rq.Failed+rq.TimedOut {
		t.Errorf("arrived %d, ended %d = %d served + %d failed + %d timed out", rq.Arrived, rq.Total, rq.Served, rq.Failed, rq.TimedOut)
	}
	var byTier int64
	for _, tc := range rq.ByTier[:3] {
		byTier += tc.Total
	}
	if byTier != rq.Total {
		t.Errorf("tiers add up to %d, not %d", byTier, rq.Total)
	}
	for _, b := range rep.Batches {
		if b.Submitted != b.Done+b.Expired+b.Failed+b.Unstarted {
			t.Errorf("batch %s: %d submitted, %d done + %d expired + %d failed + %d not started", b.Name, b.Submitted, b.Done, b.Expired, b.Failed, b.Unstarted)
		}
	}
	m := rep.Money
	if !m.Balanced() || m.DebitsNanos == 0 {
		t.Errorf("books: debits %d + subsidy %d ≠ earnings %d + fees %d", m.DebitsNanos, m.SubsidyNanos, m.EarningsNanos, m.FeesNanos)
	}
	var nodes money.Nanos
	for _, n := range rep.NodeList {
		nodes += n.earned
	}
	if nodes != m.EarningsNanos {
		t.Errorf("nodes earned %d, providers %d", nodes, m.EarningsNanos)
	}
	var paid money.Nanos
	for _, tc := range rep.Cost.ByTier {
		p, _ := money.ParseUSD(tc.Paid)
		paid += p
	}
	if paid != m.DebitsNanos {
		t.Errorf("tiers paid %d, buyers %d", paid, m.DebitsNanos)
	}
	if rep.Events.Preemptions == 0 || rep.Events.FailoversMid == 0 {
		t.Errorf("the founder's week should preempt and fail over: %+v", rep.Events)
	}
}

// A run that ends mid-hour stops counting busy time where it stops counting online time: the
// answers still running at the end do not make the last hour (or a node) more than 100% busy.
func TestRun_EndMidHour(t *testing.T) {
	f, d := loadExample(t, "founder")
	rep := run(t, f, d, Options{Seed: 1, Duration: 24*time.Hour + time.Minute})
	if rep.Hours != 25 || rep.Days != (24*time.Hour+time.Minute).Hours()/24 {
		t.Fatalf("%v days, %d hours reported; want a day and a minute, 25 hours", rep.Days, rep.Hours)
	}
	busyLast := false
	for _, c := range rep.Classes {
		for h, u := range c.Hourly {
			if u > 1 {
				t.Errorf("class %s, hour %d: %.0f%% busy", c.Name, h, u*100)
			}
		}
		busyLast = busyLast || c.Hourly[24] > 0
	}
	if !busyLast {
		t.Error("no class was busy in the run's last minute: the test shows nothing")
	}
	for _, n := range rep.NodeList {
		if n.Fill > 1 {
			t.Errorf("node %s: fill %.0f%%", n.ID, n.Fill*100)
		}
	}
}

// One node with one slot, requests arriving at a constant rate, each taking exactly S: an
// M/D/1 queue. Its utilization is λS and its mean wait ρS / 2(1−ρ) (Pollaczek–Khinchine).
func TestRun_ClosedForm(t *testing.T) {
	const (
		answer = 100
		tps    = 50.0
		ttft   = 200 * time.Millisecond
		rho    = 0.5
	)
	s := ttft.Seconds() + answer/tps // 2.2 s
	lambda := rho / s
	f := &Fleet{Classes: []Class{{Name: "one", Count: 1, Models: []string{"m"}, MaxConcurrent: 1, TokensPerSecond: tps, TTFT: ttft}}}
	d := &Demand{Streams: []Stream{{Name: "constant", Model: "m", Rate: lambda,
		PromptTokens: Length{Mean: 50}, AnswerTokens: Length{Mean: answer}}}}
	days := 3.0
	rep := run(t, f, d, Options{Seed: 11, Duration: time.Duration(days * 24 * float64(time.Hour))})
	n := float64(rep.Requests.Total)
	want := lambda * days * 86400
	if math.Abs(n-want) > 4*math.Sqrt(want) {
		t.Errorf("%v requests, want %.0f ± %.0f (Poisson)", n, want, 4*math.Sqrt(want))
	}
	u := rep.Classes[0].Utilization
	// The arrivals' count varies by 1/√n; four of those, and a little for the last job.
	if tol := 4/math.Sqrt(want) + 0.002; math.Abs(u-rho) > tol*rho {
		t.Errorf("utilization %.4f, want ρ = %.2f within %.1f%%", u, rho, 100*tol)
	}
	// Waits are correlated from one request to the next: the mean of n of them varies more
	// than 1/√n. 12% is about six of its standard errors at this length.
	wq := rho * s / (2 * (1 - rho))
	st, err := newWorldOrFail(t, f, d, Options{Seed: 11, Duration: time.Duration(days * 24 * float64(time.Hour))}).run()
	if err != nil {
		t.Fatal(err)
	}
	h := st.queueWait[tierIndex(tier.Silver)]
	got := h.sum.Seconds() / float64(h.n)
	if math.Abs(got-wq) > 0.12*wq {
		t.Errorf("mean wait %.3f s, want ρS/2(1−ρ) = %.3f s within 12%%", got, wq)
	}
	if rep.Requests.Served != rep.Requests.Total {
		t.Errorf("%d of %d served: at ρ = 0.5 none should wait 30 s", rep.Requests.Served, rep.Requests.Total)
	}
}

func newWorldOrFail(t *testing.T, f *Fleet, d *Demand, o Options) *world {
	t.Helper()
	w, err := newWorld(context.Background(), f, d, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// The simulator's decisions are the matcher's: on the same candidates and the same random
// stream, matcher.Index.Pick (default preferences) and matcher.Match + Pick (other sorts,
// regions, caps, batch work) pick the same node as the simulator does, decision after
// decision, while the simulated slots fill.
func TestDecide_IsTheMatchers(t *testing.T) {
	f := &Fleet{Classes: []Class{
		{Name: "cheap", Count: 12, Models: []string{"m"}, MaxConcurrent: 2, TokensPerSecond: 30, Regions: map[string]float64{"de": 1, "us": 1},
			Price: Price{Input: "0.02", Output: "0.04"}, AskSpread: 0.3, Reliability: 0.9},
		{Name: "mid", Count: 8, Models: []string{"m"}, MaxConcurrent: 4, TokensPerSecond: 60, Region: "fr", TTFT: 150 * time.Millisecond,
			Price: Price{Input: "0.04", Output: "0.08"}, AskSpread: 0.1, GoldShare: 0.25},
		{Name: "trusted", Count: 4, Models: []string{"m"}, MaxConcurrent: 8, TokensPerSecond: 40, Region: "us", Level: "trusted",
			Price: Price{Input: "0.06", Output: "0.12"}, Reliability: 0.99, NoBronze: true},
	}}
	d := &Demand{Streams: []Stream{{Name: "s", Model: "m", Rate: 1, PromptTokens: Length{Mean: 10}, AnswerTokens: Length{Mean: 10}}}}
	w := newWorldOrFail(t, f, d, Options{Seed: 5})
	p := w.newPart([]string{"m"})
	m := p.models["m"]
	capEU := money.Price(130_000_000)
	prefs := []matcher.Prefs{
		{},
		{Regions: []string{"eu"}},
		{Sort: matcher.SortLatency},
		{Sort: matcher.SortThroughput},
		{MaxPrice: matcher.PriceCap{Prompt: &capEU}},
	}
	tiers := []tier.Tier{tier.Silver, tier.Gold, tier.Bronze}
	pick := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		mreq := matcher.Request{Model: "m", Prefs: prefs[i%len(prefs)], Tier: tiers[i%3], Multiplier: w.mkt.tiers.Of(tiers[i%3]), Batch: i%7 == 0}
		seed := pick.Uint64()
		// The reference: a fresh index of the same candidates, live counts, no slots.
		ref := make([]matcher.Candidate, len(m.offers))
		for j, o := range m.offers {
			ref[j] = o.candidate(p.clock())
			ref[j].Slot = nil
		}
		mreq.Rand = rand.New(rand.NewPCG(seed, 0))
		var want matcher.Candidate
		var wantErr error
		if matcher.Walkable(mreq.Prefs) && !mreq.Batch {
			want, wantErr = matcher.NewIndex(ref).Pick(mreq)
		} else {
			want, wantErr = matcher.Match(mreq, ref).Pick()
		}
		m.stale = true // the simulator's snapshot as fresh as the reference's
		mreq.Rand = rand.New(rand.NewPCG(seed, 0))
		got, err := p.decide(m, mreq)
		if (err == nil) != (wantErr == nil) || err == nil && got.NodeID != want.NodeID {
			t.Fatalf("decision %d (%+v): the simulator took %q (%v), the matcher %q (%v)", i, mreq.Prefs, got.NodeID, err, want.NodeID, wantErr)
		}
		if i%5 == 4 { // jobs end now and then: slots free
			for _, o := range m.offers {
				if o.running > 0 && pick.IntN(3) == 0 {
					o.free()
				}
			}
		}
	}
}

// A request is billed as the ledger bills it: the ask at the request's tier for its tokens,
// each rounded to the nano-dollar, and the fee on the sum, to the nano-dollar.
func TestBilling_IsTheLedgers(t *testing.T) {
	in, out := money.Price(40_000_000), money.Price(90_000_000) // $0.04 and $0.09 per 1M
	f := &Fleet{Market: Market{PlatformFee: "7.5"}, Classes: []Class{{Name: "n", Count: 1, Models: []string{"m"}, MaxConcurrent: 8,
		TokensPerSecond: 100, Price: Price{Input: "0.04", Output: "0.09"}}}}
	d := &Demand{Streams: []Stream{{Name: "s", Model: "m", Rate: 0.05, Tiers: map[string]float64{"gold": 1},
		PromptTokens: Length{Mean: 777}, AnswerTokens: Length{Mean: 333}}}}
	rep := run(t, f, d, Options{Seed: 2, Duration: 6 * time.Hour})
	n := rep.Requests.Served
	if n == 0 || n != rep.Requests.Total {
		t.Fatalf("%d of %d served", n, rep.Requests.Total)
	}
	gold := tier.DefaultMultipliers.Of(tier.Gold)
	net := tier.Scale(in, gold).Cost(777) + tier.Scale(out, gold).Cost(333)
	each := net + money.Fee(net, 750)
	if got, want := rep.Money.DebitsNanos, each*money.Nanos(n); got != want {
		t.Errorf("buyers paid %d nano-dollars for %d requests, want %d × %d = %d", got, n, each, n, want)
	}
	if got, want := rep.Money.FeesNanos, money.Fee(net, 750)*money.Nanos(n); got != want {
		t.Errorf("fees %d, want %d", got, want)
	}
}

// A node that drops mid-answer loses the job; another node continues it from where it
// stopped, and the platform pays the new node's reading of the partial answer.
func TestRun_Failover(t *testing.T) {
	f := &Fleet{Classes: []Class{
		{Name: "flaky", Count: 3, Models: []string{"m"}, MaxConcurrent: 4, TokensPerSecond: 20, DropsPerDay: 200, Reconnect: time.Minute,
			Price: Price{Input: "0.01", Output: "0.02"}},
		{Name: "steady", Count: 2, Models: []string{"m"}, MaxConcurrent: 4, TokensPerSecond: 20, Price: Price{Input: "0.05", Output: "0.10"}},
	}}
	d := &Demand{Streams: []Stream{{Name: "s", Model: "m", Rate: 0.3, PromptTokens: Length{Mean: 300}, AnswerTokens: Length{Mean: 400, CV: 0.5}}}}
	rep := run(t, f, d, Options{Seed: 4, Duration: 24 * time.Hour})
	if rep.Events.FailoversMid == 0 || rep.Events.Drops == 0 {
		t.Fatalf("no failover: %+v", rep.Events)
	}
	if rep.Money.SubsidyNanos == 0 || !rep.Money.Balanced() {
		t.Errorf("continuations: subsidy %d, balanced %v", rep.Money.SubsidyNanos, rep.Money.Balanced())
	}
	if rep.Requests.Served < rep.Requests.Total*99/100 {
		t.Errorf("%d of %d served: failover should save the answers", rep.Requests.Served, rep.Requests.Total)
	}
}

// Gold goes first and preempts bronze: on a full node, gold waits less than bronze, and
// bronze answers paused by gold continue.
func TestRun_GoldPreemptsBronze(t *testing.T) {
	f := &Fleet{Classes: []Class{{Name: "n", Count: 1, Models: []string{"m"}, MaxConcurrent: 4, TokensPerSecond: 20}}}
	d := &Demand{Streams: []Stream{{Name: "s", Model: "m", Rate: 0.95 * 4 / 10.3, Tiers: map[string]float64{"gold": 0.2, "bronze": 0.8},
		PromptTokens: Length{Mean: 100}, AnswerTokens: Length{Mean: 200}}}}
	rep := run(t, f, d, Options{Seed: 9, Duration: 24 * time.Hour})
	if rep.Events.Preemptions == 0 {
		t.Fatal("gold never preempted bronze")
	}
	var gold, bronze TierLatency
	for _, l := range rep.Latency {
		switch l.Tier {
		case "gold":
			gold = l
		case "bronze":
			bronze = l
		}
	}
	if !(gold.QueueWaitP95 < bronze.QueueWaitP95) {
		t.Errorf("gold waited %v ms at p95, bronze %v ms", gold.QueueWaitP95, bronze.QueueWaitP95)
	}
}

// Weight: each simulated request standing for several keeps utilization and money in
// expectation.
func TestRun_Weight(t *testing.T) {
	f, d := loadExample(t, "gamer")
	one := run(t, f, d, Options{Seed: 1, Duration: 3 * 24 * time.Hour})
	two := run(t, f, d, Options{Seed: 1, Duration: 3 * 24 * time.Hour, Weight: 2})
	if r := float64(two.Requests.Total) / float64(one.Requests.Total); math.Abs(r-1) > 0.03 {
		t.Errorf("weight 2 counts %d requests, weight 1 %d", two.Requests.Total, one.Requests.Total)
	}
	if r := two.Money.DebitsNanos.Float() / one.Money.DebitsNanos.Float(); math.Abs(r-1) > 0.05 {
		t.Errorf("weight 2: buyers paid %s, weight 1 %s", two.Money.Debits, one.Money.Debits)
	}
	if !two.Money.Balanced() {
		t.Error("weight 2: the books do not balance")
	}
	if _, err := Run(context.Background(), f, d, Options{Weight: 3}); err == nil || !strings.Contains(err.Error(), "multiple of the weight") {
		t.Errorf("weight 3 on 2-slot nodes: %v", err)
	}
}

// The two stories of the examples hold: the gamer's RTX 3080 earns inside its windows; the
// founder's two A100s, under 40% used by their own app, are used more in the market, and the
// app costs less there than on them.
func TestExamples_Stories(t *testing.T) {
	f, d := loadExample(t, "gamer")
	rep := run(t, f, d, Options{Seed: 1, Duration: 3 * 24 * time.Hour})
	g := rep.Classes[0]
	if g.Name != "gamer-rtx3080" || g.earned <= 0 || g.Fill <= 0 || g.WindowHours != 37.5 {
		t.Errorf("gamer: %+v", g)
	}
	f, d = loadExample(t, "founder")
	rep = run(t, f, d, Options{Seed: 1, Duration: 3 * 24 * time.Hour})
	var ded Dedicated
	for _, x := range rep.Cost.Dedicated {
		if x.Class == "founder-a100" {
			ded = x
		}
	}
	a100 := rep.Classes[0]
	if ded.GPUs != 2 || !(ded.Utilization < 0.4) || !(a100.Utilization > ded.Utilization+0.2) || !(ded.SavingPct > 50) {
		t.Errorf("founder: dedicated %+v; in the market %s used", ded, pct(a100.Utilization))
	}
	if _, err := LoadFleet("../../examples/market/fleet.yaml"); err != nil {
		t.Error(err)
	}
	if _, err := LoadDemand("../../examples/market/demand.yaml"); err != nil {
		t.Error(err)
	}
}

// A forecast runs the node in the market over several seeds: p10 ≤ p50 ≤ p90, and what-if
// windows open all week give more hours.
func TestForecast(t *testing.T) {
	node := Class{Name: "me", Models: []string{"llama-3.1-8b"}, MaxConcurrent: 2, TokensPerSecond: 45, Region: "de",
		Timezone: "Europe/Berlin", Windows: "mon-fri 08:00-18:00, 22:30-01:00"}
	always := node
	always.Windows = ""
	fr, err := Forecast(context.Background(), DefaultFleet(), DefaultDemand(), node, Options{Seed: 1, Duration: 24 * time.Hour}, 3, &always, "always")
	if err != nil {
		t.Fatal(err)
	}
	e := fr.Base.WeeklyEarned
	if !(e.P10 <= e.P50 && e.P50 <= e.P90 && e.P10 > 0) {
		t.Errorf("weekly earnings %+v", e)
	}
	if fr.Base.WindowHours != 62.5 || fr.WhatIf == nil || fr.WhatIf.Outlook.WindowHours != 168 {
		t.Errorf("window hours: %v, what if %+v", fr.Base.WindowHours, fr.WhatIf)
	}
	var b strings.Builder
	if err := fr.WriteText(&b); err != nil || !strings.Contains(b.String(), "weekly earnings") {
		t.Errorf("text: %v\n%s", err, b.String())
	}
}

// The HTML page stands alone: its charts are inline SVG, it loads nothing.
func TestReport_HTML(t *testing.T) {
	f, d := loadExample(t, "gamer")
	rep, err := Compare(context.Background(), f, d, Options{Seed: 1, Duration: 12 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"<svg", "<polyline", "gamer-rtx3080", "offline bound"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "<link", "src=", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("the page has %q: it must load nothing", bad)
		}
	}
	if strings.Count(page, "http") != strings.Count(page, "http://www.w3.org/2000/svg") {
		t.Error("the page names a URL besides the SVG namespace")
	}
	if len(rep.Comparison.Policies) != len(Policies) || rep.Comparison.Bound.PerMillion <= 0 {
		t.Fatalf("comparison: %+v", rep.Comparison)
	}
	for _, p := range rep.Comparison.Policies {
		if p.PerMillion < rep.Comparison.Bound.PerMillion {
			t.Errorf("%s pays %v per 1M tokens, below the bound's %v", p.Policy, p.PerMillion, rep.Comparison.Bound.PerMillion)
		}
	}
}

// The built-in market parses, and files with mistakes are refused with where they are.
func TestInputs(t *testing.T) {
	if len(DefaultFleet().Classes) == 0 || len(DefaultDemand().Streams) == 0 {
		t.Fatal("the built-in market is empty")
	}
	var f Fleet
	if err := parseYAML("f", []byte("classes:\n  - name: x\n    cuont: 3\n"), &f); err == nil {
		t.Error("an unknown key was taken")
	}
	bad := []struct {
		class Class
		want  string
	}{
		{Class{Name: "x", Models: []string{"m"}}, "tokens_per_second"},
		{Class{Name: "x", Models: []string{"m"}, TokensPerSecond: 1, Windows: "mon 25:00-26:00"}, "windows"},
		{Class{Name: "x", Models: []string{"llama-3.1-70b"}, TokensPerSecond: 1, VRAMGB: 8}, "70b"},
		{Class{Name: "x", Models: []string{"m"}, TokensPerSecond: 1, Price: Price{Input: "abc"}}, "price.input"},
	}
	for _, b := range bad {
		_, err := Run(context.Background(), &Fleet{Classes: []Class{b.class}}, &Demand{}, Options{})
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), b.want) {
			t.Errorf("%+v: %v, want an error naming %s", b.class, err, b.want)
		}
	}
}

// A long run reports each partition's days as it ends them, and stops, with ctx's error,
// once ctx is done: a week at 100,000 nodes takes an hour or more, and ^C must stop it.
func TestRun_ProgressAndCancel(t *testing.T) {
	defer func(d time.Duration) { progressAfter = d }(progressAfter)
	progressAfter = 0
	var out strings.Builder
	rep, err := Run(context.Background(), DefaultFleet(), DefaultDemand(), Options{Seed: 1, Duration: 48 * time.Hour, Progress: &out})
	if err != nil || rep == nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	parts := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "simulate: day 2 of 2 done for ") {
			parts++
		}
	}
	if parts == 0 || len(lines) != 2*parts || !strings.HasPrefix(lines[0], "simulate: day 1 of 2 done for ") {
		t.Errorf("progress of 2 days:\n%s\nwant each partition's day 1 and day 2", out.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	stopAt := &cancelOnWrite{cancel: cancel}
	_, err = Run(ctx, DefaultFleet(), DefaultDemand(), Options{Seed: 1, Duration: 7 * 24 * time.Hour, Progress: stopAt, Workers: 1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run canceled at its first day: %v, want context.Canceled", err)
	}
	if stopAt.n > 1 {
		t.Errorf("%d days reported after the cancel at the first, want the run stopped", stopAt.n-1)
	}
}

// cancelOnWrite cancels at its first write, counting them.
type cancelOnWrite struct {
	cancel context.CancelFunc
	n      int
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	c.n++
	c.cancel()
	return len(p), nil
}
