package reputation

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCompute_Factors(t *testing.T) {
	day := func(ago, jobs, failed int) Day { return Day{Day: now.AddDate(0, 0, -ago), Jobs: jobs, Failed: failed} }
	tests := []struct {
		name   string
		edit   func(r *Record)
		want   float64
		factor string  // a factor to check, with its value
		value  float64 // when factor is set
	}{
		{name: "no record: the prior", edit: func(r *Record) {}, want: 0.75, factor: FactorPrior, value: 0.75},
		// 2 failed of 100, plus 1 of 20 pseudo-jobs: 3/120 failed, 1 − 5 × 0.025.
		{name: "success", edit: func(r *Record) { r.Days = []Day{day(0, 100, 2)} },
			want: 0.875, factor: FactorSuccess, value: 0.875},
		// 3 days ago weighs half: 150 jobs, 5 failed, (5+1)/(150+20).
		{name: "success decays", edit: func(r *Record) { r.Days = []Day{day(3, 100, 10), day(0, 100, 0)} },
			want: 1 - 5*6.0/170, factor: FactorSuccess, value: 1 - 5*6.0/170},
		{name: "success ignores days older than 30", edit: func(r *Record) { r.Days = []Day{day(30, 100, 100), day(0, 100, 2)} },
			want: 0.875},
		{name: "success: failed beyond jobs counts as jobs", edit: func(r *Record) { r.Days = []Day{day(0, 10, 50), day(0, -3, -1)} },
			want: 0, factor: FactorSuccess, value: 0},
		{name: "success: no jobs, not counted", edit: func(r *Record) { r.Days = []Day{day(0, 0, 0)} }, want: 0.75},
		// success 1 − 5 × 1/120; live 0.9 is lower.
		{name: "reliability lower than success", edit: func(r *Record) { r.Days = []Day{day(0, 100, 0)}; r.Reliability = 0.9 },
			want: (0.3*(1-5.0/120) + 0.2*0.9) / 0.5, factor: FactorReliability, value: 0.9},
		{name: "reliability no worse: counts as success", edit: func(r *Record) { r.Days = []Day{day(0, 100, 0)}; r.Reliability = 1 },
			want: 1 - 5.0/120, factor: FactorReliability, value: 1 - 5.0/120},
		{name: "reliability unknown: counts as success", edit: func(r *Record) { r.Days = []Day{day(0, 100, 0)} },
			want: 1 - 5.0/120, factor: FactorReliability, value: 1 - 5.0/120},
		{name: "reliability without a record: not counted", edit: func(r *Record) { r.Reliability = 0.1 }, want: 0.75},
		{name: "reliability 0", edit: func(r *Record) { r.Days = []Day{day(0, 100, 0)}; r.Reliability = 0 },
			want: 0.3 * (1 - 5.0/120) / 0.5, factor: FactorReliability, value: 0},
		// (10 + 2 × 0.75) / (10 + 2)
		{name: "verification", edit: func(r *Record) { r.Checks = slices.Repeat([]Check{probe(now, true)}, 10) },
			want: 11.5 / 12, factor: FactorVerification, value: 11.5 / 12},
		// (9 + 1.5) / (9 + 5 × 1 + 2): ages of an hour or so, weights near 1.
		{name: "a failed check weighs five", edit: func(r *Record) {
			r.Checks = []Check{probe(now, false)}
			for range 9 {
				r.Checks = append(r.Checks, probe(now, true))
			}
		}, want: 10.5 / 16},
		// the failed check 3 days ago weighs half: (9 + 1.5) / (9 + 2.5 + 2)
		{name: "verification decays", edit: func(r *Record) {
			r.Checks = []Check{probe(now.AddDate(0, 0, -3), false)}
			for range 9 {
				r.Checks = append(r.Checks, probe(now, true))
			}
		}, want: 10.5 / 13.5},
		{name: "verification ignores checks older than 30 days", edit: func(r *Record) {
			r.Checks = []Check{probe(now.AddDate(0, 0, -31), false), probe(now, true)}
		}, want: 2.5 / 3},
		{name: "uptime", edit: func(r *Record) { r.UptimeInWindows = 0.9 }, want: 0.9, factor: FactorUptime, value: 0.9},
		{name: "uptime above 1 counts as 1", edit: func(r *Record) { r.UptimeInWindows = 1.5 }, want: 1},
		{name: "NaN is unknown", edit: func(r *Record) {
			r.UptimeInWindows, r.Reliability, r.LatencyRatio, r.ThroughputRatio = math.NaN(), math.NaN(), math.NaN(), math.NaN()
		}, want: 0.75},
		{name: "weights renormalised over known factors", edit: func(r *Record) {
			r.UptimeInWindows = 0.5
			r.Checks = slices.Repeat([]Check{probe(now, true)}, 10)
		}, want: (0.3*11.5/12 + 0.2*0.5) / 0.5},
		// slowness 1.5: value 0.5, costs 2.5 points × 0.5
		{name: "latency 1.5× slower", edit: func(r *Record) { r.LatencyRatio = 1.5 },
			want: 0.75 - 0.0125, factor: FactorLatency, value: 0.5},
		{name: "latency 3× slower costs at most 2.5 points", edit: func(r *Record) { r.LatencyRatio = 3 }, want: 0.75 - 0.025},
		{name: "latency faster costs nothing", edit: func(r *Record) { r.LatencyRatio = 0.5 }, want: 0.75, factor: FactorLatency, value: 1},
		{name: "throughput half: slowness 2", edit: func(r *Record) { r.ThroughputRatio = 0.5 },
			want: 0.75 - 0.025, factor: FactorThroughput, value: 0},
		{name: "throughput 0.8: slowness 1.25", edit: func(r *Record) { r.ThroughputRatio = 0.8 },
			want: 0.75 - 0.025*0.25, factor: FactorThroughput, value: 0.75},
		{name: "slow and failing", edit: func(r *Record) {
			r.Days = []Day{day(0, 10, 10)}
			r.Checks = probes(false)
			r.UptimeInWindows, r.LatencyRatio, r.ThroughputRatio = 0, 10, 0.1
		}, want: 0.3*1.5/7 - 0.05},
		{name: "worse still: 0, not negative", edit: func(r *Record) {
			r.Days = []Day{day(0, 10, 10)}
			r.Checks = slices.Repeat([]Check{probe(now, false)}, 10)
			r.UptimeInWindows, r.LatencyRatio, r.ThroughputRatio = 0, 10, 0.1
		}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := blank()
			tt.edit(&r)
			s := Compute(r)
			if !near(s.Value, tt.want) {
				t.Errorf("score %.6f, want %.6f; reasons %+v", s.Value, tt.want, s.Reasons)
			}
			if tt.factor != "" {
				if got := factor(t, s, tt.factor); !near(got.Value, tt.value) {
					t.Errorf("%s %.6f, want %.6f", tt.factor, got.Value, tt.value)
				}
			}
			var shares float64
			for _, rs := range s.Reasons {
				if rs.Factor != FactorLatency && rs.Factor != FactorThroughput {
					shares += rs.Weight
				}
				if rs.Text == "" || !(rs.Value >= 0 && rs.Value <= 1) {
					t.Errorf("reason %+v: want a text and a value in 0..1", rs)
				}
			}
			if !near(shares, 1) {
				t.Errorf("shares sum to %v, want 1", shares)
			}
		})
	}
}

// The reasons a provider reads.
func TestCompute_Reasons(t *testing.T) {
	r := established()
	r.Days[len(r.Days)-1].Failed = 4
	r.Checks[len(r.Checks)-1].Passed = false
	r.Reliability = 0.8
	r.LatencyRatio = 1.4
	s := Compute(r)
	want := map[string]string{
		FactorSuccess:      "1,496 of 1,500 jobs completed in the last 30 days (99.7%); each percent failed costs 5, recent days weigh more: 90%",
		FactorReliability:  "its latest jobs' moving average is 80.0%, lower than its success: counts as 80%",
		FactorVerification: "179 of 180 checks passed in the last 30 days; a failed check weighs as much as 5 passed ones, recent checks weigh more: 83%",
		FactorUptime:       "online 97% of the time inside its availability windows over the last 7 days",
		FactorLatency:      "time to first token 1.40× slower than the median of nodes serving the same models: costs 1.0 points",
		FactorThroughput:   "tokens per second as good as the median of nodes serving the same models or better: costs nothing",
	}
	if len(s.Reasons) != len(want) {
		t.Errorf("%d reasons, want %d", len(s.Reasons), len(want))
	}
	for _, rs := range s.Reasons {
		if rs.Text != want[rs.Factor] {
			t.Errorf("%s:\n got %q\nwant %q", rs.Factor, rs.Text, want[rs.Factor])
		}
	}
}

// The same record gives the same score, whatever the order of its days and checks.
func TestCompute_Deterministic(t *testing.T) {
	r := established()
	r.Checks[10].Passed = false
	r.Days[25].Failed = 7
	want := Compute(r)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		rng.Shuffle(len(r.Days), func(i, j int) { r.Days[i], r.Days[j] = r.Days[j], r.Days[i] })
		rng.Shuffle(len(r.Checks), func(i, j int) { r.Checks[i], r.Checks[j] = r.Checks[j], r.Checks[i] })
		if got := Compute(r); !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffled: %+v, want %+v", got, want)
		}
	}
}

// A coordinator restart loses what the fleet measured live (reliability, latency, throughput);
// the jobs it cut short are not in the record (the caller leaves them out). Whatever the
// record, the score after the restart is no lower than before it.
func TestCompute_RestartCostsNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		r := randomRecord(rng)
		before := Compute(r)
		after := r
		after.Reliability, after.LatencyRatio, after.ThroughputRatio = -1, 0, 0
		if got := Compute(after); got.Value < before.Value {
			t.Fatalf("record %d: score %v after a restart, %v before; record %+v", i, got.Value, before.Value, r)
		}
		// The level rules see nothing worse either.
		ru := DefaultRules()
		for _, lvl := range []string{"new", "verified", "trusted", "quarantined"} {
			l1, _, _ := ru.Next(lvl, r, before)
			l2, _, _ := ru.Next(lvl, after, Compute(after))
			if Rank(l2) < Rank(l1) || (l1 != "quarantined" && l2 == "quarantined") {
				t.Fatalf("record %d at %s: %s after a restart, %s before", i, lvl, l2, l1)
			}
		}
	}
}

func randomRecord(rng *rand.Rand) Record {
	r := Record{Now: now, FirstSeen: now.AddDate(0, 0, -rng.IntN(60)), LevelSince: now.AddDate(0, 0, -rng.IntN(20)),
		UptimeInWindows: rng.Float64()*1.2 - 0.2, Reliability: rng.Float64()*1.2 - 0.2,
		LatencyRatio: rng.Float64() * 3, ThroughputRatio: rng.Float64() * 2}
	for d := range rng.IntN(40) {
		jobs := rng.IntN(300)
		r.Days = append(r.Days, Day{Day: now.AddDate(0, 0, -d), Jobs: jobs, Failed: rng.IntN(jobs/5 + 1)})
	}
	for range rng.IntN(100) {
		r.Checks = append(r.Checks, Check{At: now.Add(-time.Duration(rng.IntN(40*24)) * time.Hour),
			Kind: []string{"onboarding", "probe"}[rng.IntN(2)], Passed: rng.IntN(10) > 0})
	}
	return r
}

func TestText(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1204: "1,204", 1234567: "1,234,567", -1204: "-1,204"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
	for v, want := range map[float64]string{0: "0%", 0.29: "29%", 0.999: "99%", 1: "100%", 0.5: "50%"} {
		if got := pct(v); got != want {
			t.Errorf("pct(%v) = %q, want %q", v, got, want)
		}
	}
	if got := pct1(0.9973); got != "99.7%" {
		t.Errorf("pct1 = %q", got)
	}
	if got := join([]string{"a", "b", "c"}); got != "a, b and c" {
		t.Errorf("join = %q", got)
	}
	if s := Compute(blank()); !strings.Contains(s.Reasons[len(s.Reasons)-3].Text, "starts at 75%") {
		t.Errorf("prior reason %+v", s.Reasons)
	}
}
