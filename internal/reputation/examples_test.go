package reputation

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/store"
)

// The worked examples of docs/reputation.md: if one of these fails, fix the document too.

// exampleNode is docs/reputation.md's example 3: 200 jobs today, 2 failed; 100 three days
// ago, 4 failed; 10 checks passed today and one failed three days ago; 90% uptime; live
// reliability 95%; time to first token 1.25× the median, tokens per second 1.1×.
func exampleNode() Record {
	return Record{
		Now:       now,
		FirstSeen: now.AddDate(0, 0, -12),
		Days: []Day{
			{Day: now, Jobs: 200, Failed: 2},
			{Day: now.AddDate(0, 0, -3), Jobs: 100, Failed: 4},
		},
		Checks:          append(slices.Repeat([]Check{probe(now, true)}, 10), probe(now.AddDate(0, 0, -3), false)),
		UptimeInWindows: 0.9, Reliability: 0.95, LatencyRatio: 1.25, ThroughputRatio: 1.1,
	}
}

func TestDocExamples(t *testing.T) {
	onboarded := blank()
	for range 3 {
		onboarded.Checks = append(onboarded.Checks, onboarding(now, true))
	}
	flapping := exampleNode()
	flapping.Days[0].Failed = 30
	flapping.Reliability = 0.6
	flapping.UptimeInWindows = 0.7
	cheater := exampleNode() // an hour later, 6 probes since, 4 failed
	cheater.Now = now.Add(time.Hour)
	for i, ok := range []bool{false, false, true, false, true, false} {
		cheater.Checks = append(cheater.Checks, probe(now.Add(time.Duration(10*(i+1))*time.Minute), ok))
	}
	restarted := exampleNode()
	restarted.Reliability, restarted.LatencyRatio, restarted.ThroughputRatio = -1, 0, 0

	ru := DefaultRules()
	for _, tt := range []struct {
		name  string
		r     Record
		level string // its level before
		score float64
		next  string
	}{
		{"1 no record", blank(), store.LevelNew, 0.75, store.LevelNew},
		{"2 onboarded", onboarded, store.LevelNew, 0.9, store.LevelVerified},
		{"3 established", exampleNode(), store.LevelTrusted, 0.865385, store.LevelTrusted},
		{"4 flapping", flapping, store.LevelTrusted, 0.566125, store.LevelVerified},
		{"5 cheater", cheater, store.LevelTrusted, 0.738222, store.LevelQuarantined},
		{"6 restarted", restarted, store.LevelTrusted, 0.871635, store.LevelTrusted},
	} {
		s := Compute(tt.r)
		next, reason, _ := ru.Next(tt.level, tt.r, s)
		t.Logf("%s: score %.6f, %s → %s (%s)", tt.name, s.Value, tt.level, next, reason)
		for _, rs := range s.Reasons {
			t.Logf("    %-12s value %.6f weight %.4f  %s", rs.Factor, rs.Value, rs.Weight, rs.Text)
		}
		if tt.score != 0 && fmt.Sprintf("%.4f", s.Value) != fmt.Sprintf("%.4f", tt.score) {
			t.Errorf("%s: score %.6f, want %.6f", tt.name, s.Value, tt.score)
		}
		if next != tt.next {
			t.Errorf("%s: %s → %s, want %s", tt.name, tt.level, next, tt.next)
		}
	}
}
