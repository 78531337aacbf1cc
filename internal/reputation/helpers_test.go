package reputation

import (
	"math"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/store"
)

// now is the time of the tests' records: midday UTC.
var now = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// blank is a record with nothing known.
func blank() Record { return Record{Now: now, UptimeInWindows: -1, Reliability: -1} }

func probe(at time.Time, passed bool) Check {
	return Check{At: at, Kind: store.CheckProbe, Passed: passed}
}

func onboarding(at time.Time, passed bool) Check {
	return Check{At: at, Kind: store.CheckOnboarding, Passed: passed}
}

// probes returns checks a minute apart ending at now, oldest first: true passed.
func probes(results ...bool) []Check {
	var cs []Check
	for i, ok := range results {
		cs = append(cs, probe(now.Add(-time.Duration(len(results)-1-i)*time.Minute), ok))
	}
	return cs
}

func repeat(ok bool, n int) []bool {
	bs := make([]bool, n)
	for i := range bs {
		bs[i] = ok
	}
	return bs
}

// established is the record of an honest node with 40 days on the network: 50 jobs a day, 6
// probes a day passed (the last an hour ago), 97% uptime, typical speed.
func established() Record {
	r := Record{Now: now, FirstSeen: now.AddDate(0, 0, -40), UptimeInWindows: 0.97, Reliability: 1,
		LatencyRatio: 1, ThroughputRatio: 1}
	for d := HistoryDays - 1; d >= 0; d-- {
		r.Days = append(r.Days, Day{Day: now.AddDate(0, 0, -d), Jobs: 50})
		for p := 5; p >= 0; p-- {
			r.Checks = append(r.Checks, probe(now.AddDate(0, 0, -d).Add(-time.Duration(4*p+1)*time.Hour), true))
		}
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func factor(t *testing.T, s Score, name string) Reason {
	t.Helper()
	for _, r := range s.Reasons {
		if r.Factor == name {
			return r
		}
	}
	t.Fatalf("no reason %q in %+v", name, s.Reasons)
	return Reason{}
}
