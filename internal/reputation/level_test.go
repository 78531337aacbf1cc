package reputation

import (
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/store"
)

const (
	lNew         = store.LevelNew
	lVerified    = store.LevelVerified
	lTrusted     = store.LevelTrusted
	lQuarantined = store.LevelQuarantined
	lSuspended   = store.LevelSuspended
)

func TestRules_Next(t *testing.T) {
	ru := DefaultRules()
	ob := func(results ...bool) []Check {
		cs := probes(results...)
		for i := range cs {
			cs[i].Kind = store.CheckOnboarding
		}
		return cs
	}
	// score overrides the computed score when not 0.
	tests := []struct {
		name   string
		cur    string
		record func() Record
		score  float64
		want   string
		reason string // a part of the reason, when the level changes
	}{
		{name: "new: 3 onboarding checks pass", cur: lNew, record: func() Record {
			r := blank()
			r.Checks = ob(true, true, true)
			return r
		}, want: lVerified, reason: "passed 3 onboarding checks in a row: verified"},
		{name: "empty level is new", cur: "", record: func() Record {
			r := blank()
			r.Checks = ob(true, true, true)
			return r
		}, want: lVerified},
		{name: "new: 2 passed are not enough", cur: lNew, record: func() Record {
			r := blank()
			r.Checks = ob(true, true)
			return r
		}, want: lNew},
		{name: "new: a failure breaks the run", cur: lNew, record: func() Record {
			r := blank()
			r.Checks = ob(true, true, false, true, true)
			return r
		}, want: lNew},
		{name: "new: a failure, then 3 in a row", cur: lNew, record: func() Record {
			r := blank()
			r.Checks = ob(false, true, true, true)
			return r
		}, want: lVerified},
		{name: "new: probes are not onboarding", cur: lNew, record: func() Record {
			r := blank()
			r.Checks = probes(true, true, true)
			return r
		}, want: lNew},
		{name: "new: onboarding before its level are not counted (hardware changed)", cur: lNew, record: func() Record {
			r := blank()
			r.Checks = ob(true, true, true, true)
			r.LevelSince = r.Checks[2].At
			return r
		}, want: lNew},
		{name: "new: 4 of 6 onboarding checks fail", cur: lNew, record: func() Record {
			r := blank()
			r.Checks = ob(true, false, true, false, false, false)
			return r
		}, want: lQuarantined, reason: "4 of its last 6 checks failed"},
		{name: "new: 3 of 6 onboarding checks fail", cur: lNew, record: func() Record {
			r := blank()
			r.Checks = ob(true, false, true, false, true, false)
			return r
		}, want: lNew},
		{name: "new: a low score is no reason", cur: lNew, record: func() Record {
			r := blank()
			r.Checks = ob(false)
			return r
		}, want: lNew},

		{name: "verified → trusted", cur: lVerified, record: established, want: lTrusted,
			reason: "1,500 jobs completed in the last 30 days, 40 days on the network, a score of 97% and its last 6 checks passed: trusted"},
		{name: "verified: 199 jobs", cur: lVerified, record: func() Record {
			r := established()
			r.Days = []Day{{Day: now, Jobs: 199}}
			return r
		}, want: lVerified},
		{name: "verified: 200 jobs", cur: lVerified, record: func() Record {
			r := established()
			r.Days = []Day{{Day: now, Jobs: 200}}
			return r
		}, want: lTrusted},
		{name: "verified: failed jobs do not count", cur: lVerified, record: func() Record {
			r := established()
			r.Days = []Day{{Day: now, Jobs: 210, Failed: 11}}
			return r
		}, score: 0.95, want: lVerified},
		{name: "verified: 6 days old", cur: lVerified, record: func() Record {
			r := established()
			r.FirstSeen = now.Add(-6 * 24 * time.Hour)
			return r
		}, want: lVerified},
		{name: "verified: unknown age", cur: lVerified, record: func() Record {
			r := established()
			r.FirstSeen = time.Time{}
			return r
		}, want: lVerified},
		{name: "verified: score 0.89", cur: lVerified, record: established, score: 0.89, want: lVerified},
		{name: "verified: score 0.9", cur: lVerified, record: established, score: 0.9, want: lTrusted},
		{name: "verified: one of its last 6 checks failed", cur: lVerified, record: func() Record {
			r := established()
			r.Checks[len(r.Checks)-6].Passed = false
			return r
		}, score: 0.95, want: lVerified},

		{name: "trusted stays at 0.8", cur: lTrusted, record: established, score: 0.8, want: lTrusted},
		{name: "trusted → verified below 0.8", cur: lTrusted, record: established, score: 0.79, want: lVerified,
			reason: "its score 79% fell below 80%: verified again, trusted once more at 90%"},

		{name: "verified: 4 of the last 6 probes fail", cur: lVerified, record: func() Record {
			r := established()
			r.Checks = append(r.Checks, probes(false, true, false, false, true, false)...)
			return r
		}, want: lQuarantined,
			reason: "4 of its last 6 checks failed, answers unlike the model's: quarantined, no live traffic but still probed, until 3 checks in a row pass and its score is 60% or more"},
		{name: "trusted: 4 of the last 6 probes fail", cur: lTrusted, record: func() Record {
			r := established()
			r.Checks = append(r.Checks, probes(false, false, false, false)...)
			return r
		}, want: lQuarantined},
		{name: "verified: 3 of the last 6 fail", cur: lVerified, record: func() Record {
			r := established()
			r.Checks = append(r.Checks, probes(false, true, false, true, false, true)...)
			return r
		}, want: lVerified},
		{name: "verified: 4 failed, but 5 and more checks ago", cur: lVerified, record: func() Record {
			r := established()
			r.Checks = append(r.Checks, probes(false, false, false, false, true, true, true, true, true)...)
			return r
		}, score: 0.85, want: lVerified},
		{name: "verified: failures before an operator's decision are not counted", cur: lVerified, record: func() Record {
			r := established()
			r.Checks = append(r.Checks, probes(false, false, false, false, true)...)
			r.LevelSince = r.Checks[len(r.Checks)-1].At
			return r
		}, score: 0.85, want: lVerified},
		{name: "verified: score below 0.5", cur: lVerified, record: established, score: 0.49, want: lQuarantined,
			reason: "its score 49% fell below 50% over 1,500 jobs in the last 30 days: quarantined"},
		{name: "verified: score below 0.5 over 199 jobs", cur: lVerified, record: func() Record {
			r := established()
			r.Days = []Day{{Day: now, Jobs: 199, Failed: 60}}
			return r
		}, score: 0.3, want: lVerified},
		{name: "trusted: score below 0.5", cur: lTrusted, record: established, score: 0.3, want: lQuarantined},
		{name: "verified: score 0.5", cur: lVerified, record: established, score: 0.5, want: lVerified},

		{name: "quarantined → verified", cur: lQuarantined, record: func() Record {
			r := established()
			r.Checks = append(r.Checks, probes(false, false, false, true, true, true)...)
			r.LevelSince = r.Checks[len(r.Checks)-4].At
			return r
		}, score: 0.6, want: lVerified, reason: "3 checks in a row passed and the score is 60%: verified again"},
		{name: "quarantined: 2 in a row", cur: lQuarantined, record: func() Record {
			r := established()
			r.Checks = append(r.Checks, probes(false, false, false, true, true)...)
			r.LevelSince = r.Checks[len(r.Checks)-3].At
			return r
		}, score: 0.9, want: lQuarantined},
		{name: "quarantined: passes before quarantine do not count", cur: lQuarantined, record: func() Record {
			r := established()
			r.LevelSince = r.Checks[len(r.Checks)-1].At.Add(time.Second)
			return r
		}, score: 0.9, want: lQuarantined},
		{name: "quarantined: score 0.59", cur: lQuarantined, record: func() Record {
			r := established()
			r.Checks = append(r.Checks, probes(false, false, false, true, true, true)...)
			r.LevelSince = r.Checks[len(r.Checks)-4].At
			return r
		}, score: 0.59, want: lQuarantined},

		{name: "suspended never changes by itself", cur: lSuspended, record: established, want: lSuspended},
		{name: "an unknown level does not change", cur: "gold", record: established, want: "gold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.record()
			s := Compute(r)
			if tt.score != 0 {
				s.Value = tt.score
			}
			got, reason, changed := ru.Next(tt.cur, r, s)
			if got != tt.want {
				t.Fatalf("%s → %s (%s), want %s; score %.3f", tt.cur, got, reason, tt.want, s.Value)
			}
			if wantChanged := got != tt.cur && !(tt.cur == "" && got == lNew); changed != wantChanged {
				t.Errorf("changed %v, want %v", changed, wantChanged)
			}
			if changed != (reason != "") {
				t.Errorf("reason %q with changed %v", reason, changed)
			}
			if !strings.Contains(reason, tt.reason) {
				t.Errorf("reason %q, want it to contain %q", reason, tt.reason)
			}
		})
	}
}

func TestRules_Goal(t *testing.T) {
	ru := DefaultRules()
	young := func() Record {
		r := established()
		r.FirstSeen = now.Add(-4 * 24 * time.Hour)
		r.Days = []Day{{Day: now, Jobs: 150}}
		r.Checks = append(r.Checks, probes(false)...)
		return r
	}
	quarantined := func() Record {
		r := established()
		r.Checks = append(r.Checks, probes(false, false, false, true)...)
		r.LevelSince = r.Checks[len(r.Checks)-2].At
		return r
	}
	tests := []struct {
		cur   string
		r     Record
		score float64
		want  string
	}{
		{lNew, func() Record {
			r := blank()
			r.Checks = probes(true)
			r.Checks[0].Kind = store.CheckOnboarding
			return r
		}(), 0,
			"verified after 2 more onboarding checks in a row pass"},
		{lVerified, young(), 0.85,
			"trusted after 50 more completed jobs, 3 more days on the network, a score of 90% (now 85%) and its last 6 checks to pass"},
		{lVerified, established(), 0, "trusted at the next evaluation"},
		{lTrusted, established(), 0.85, "stays trusted while its score is 80% or more (now 85%)"},
		{lQuarantined, quarantined(), 0.55, "verified again after 2 more checks in a row to pass and a score of 60% (now 55%)"},
		{lSuspended, established(), 0, "suspended for fraud: only an operator can lift it"},
	}
	for _, tt := range tests {
		t.Run(tt.cur, func(t *testing.T) {
			s := Compute(tt.r)
			if tt.score != 0 {
				s.Value = tt.score
			}
			if got := ru.Goal(tt.cur, tt.r, s); !strings.HasPrefix(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestRank(t *testing.T) {
	tests := []struct {
		level          string
		rank           int
		live           bool
		trustedTraffic bool
	}{
		{lTrusted, 2, true, true},
		{lVerified, 1, true, false},
		{lNew, 0, false, false},
		{lQuarantined, 0, false, false},
		{lSuspended, 0, false, false},
		{"", 0, false, false},
	}
	for _, tt := range tests {
		if got := Rank(tt.level); got != tt.rank {
			t.Errorf("Rank(%q) = %d, want %d", tt.level, got, tt.rank)
		}
		if got := Live(tt.level); got != tt.live {
			t.Errorf("Live(%q) = %v, want %v", tt.level, got, tt.live)
		}
		if got := AtLeast(tt.level, lTrusted); got != tt.trustedTraffic {
			t.Errorf("AtLeast(%q, trusted) = %v, want %v", tt.level, got, tt.trustedTraffic)
		}
		if got := AtLeast(tt.level, lVerified); got != tt.live {
			t.Errorf("AtLeast(%q, verified) = %v, want %v", tt.level, got, tt.live)
		}
	}
}

func TestRules_Validate(t *testing.T) {
	if err := DefaultRules().Validate(); err != nil {
		t.Fatalf("default rules: %v", err)
	}
	for name, edit := range map[string]func(*Rules){
		"no onboarding":            func(r *Rules) { r.OnboardingChecks = 0 },
		"failed beyond window":     func(r *Rules) { r.QuarantineFailed = 7 },
		"release below quarantine": func(r *Rules) { r.ReleaseMinScore = 0.4 },
		"score above 1":            func(r *Rules) { r.TrustedMinScore = 1.1 },
		"demote above trusted":     func(r *Rules) { r.DemoteBelow = 0.95 },
		"negative age":             func(r *Rules) { r.TrustedMinAge = -time.Hour },
		"no release":               func(r *Rules) { r.ReleaseAfterPassed = 0 },
		"no usage window":          func(r *Rules) { r.UsageWindow = 0 },
	} {
		ru := DefaultRules()
		edit(&ru)
		if err := ru.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
