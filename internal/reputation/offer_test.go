package reputation

import (
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/store"
)

// of returns cs as checks of model.
func of(model string, cs ...Check) []Check {
	for i := range cs {
		cs[i].Model = model
	}
	return cs
}

// kind returns cs as checks of kind.
func kind(k string, cs []Check) []Check {
	for i := range cs {
		cs[i].Kind = k
	}
	return cs
}

// at returns checks a minute apart, the last at now, oldest first: true passed.
func at(start time.Duration, results ...bool) []Check {
	var cs []Check
	for i, ok := range results {
		cs = append(cs, probe(now.Add(start+time.Duration(i)*time.Minute), ok))
	}
	return cs
}

func TestRules_NextOffer(t *testing.T) {
	ru := DefaultRules()
	tests := []struct {
		name   string
		offer  Offer
		checks []Check
		score  float64
		want   string
		reason string
	}{
		{name: "new: 3 onboarding checks of the model pass", offer: Offer{Model: "a"},
			checks: of("a", kind(store.CheckOnboarding, at(-3*time.Minute, true, true, true))...),
			want:   lVerified, reason: "passed 3 onboarding checks of this model in a row: verified"},
		{name: "new: another model's passes do not count", offer: Offer{Model: "a"},
			checks: of("b", kind(store.CheckOnboarding, at(-3*time.Minute, true, true, true))...), want: lNew},
		{name: "new: the other model's failures do not break the run", offer: Offer{Model: "a", Level: lNew},
			checks: append(of("a", kind(store.CheckOnboarding, at(-6*time.Minute, true, true, true))...),
				of("b", kind(store.CheckOnboarding, at(-5*time.Minute, false, false, false, false))...)...),
			want: lVerified},
		{name: "new: 4 of its 6 fail", offer: Offer{Model: "b"},
			checks: append(of("a", kind(store.CheckOnboarding, at(-9*time.Minute, true, true, true))...),
				of("b", kind(store.CheckOnboarding, at(-5*time.Minute, false, false, false, false))...)...),
			want: lQuarantined, reason: "4 of its last 4 checks of this model failed: the model is quarantined on the node"},
		{name: "new: checks before it became new do not count", offer: Offer{Model: "a", Since: now.Add(-90 * time.Second)},
			checks: of("a", kind(store.CheckOnboarding, at(-3*time.Minute, true, true, true))...), want: lNew},
		{name: "verified: 4 of 6 probes fail", offer: Offer{Model: "a", Level: lVerified},
			checks: of("a", at(-6*time.Minute, true, false, false, true, false, false)...), want: lQuarantined},
		{name: "verified: 3 of 6", offer: Offer{Model: "a", Level: lVerified},
			checks: of("a", at(-6*time.Minute, true, false, true, true, false, false)...), want: lVerified},
		{name: "quarantined: 3 in a row pass", offer: Offer{Model: "a", Level: lQuarantined, Since: now.Add(-time.Hour), Quarantines: 1},
			checks: of("a", kind(store.CheckQuarantine, at(-3*time.Minute, true, true, true))...), score: 0.7,
			want: lVerified, reason: "3 checks of this model in a row passed and the score is 70%: verified again"},
		{name: "quarantined: the score too low", offer: Offer{Model: "a", Level: lQuarantined, Since: now.Add(-time.Hour), Quarantines: 1},
			checks: of("a", kind(store.CheckQuarantine, at(-3*time.Minute, true, true, true))...), score: 0.5, want: lQuarantined},
		{name: "quarantined twice: only an operator", offer: Offer{Model: "a", Level: lQuarantined, Since: now.Add(-time.Hour), Quarantines: 2},
			checks: of("a", kind(store.CheckQuarantine, at(-3*time.Minute, true, true, true))...), score: 0.9, want: lQuarantined},
		{name: "usage checks are no model's", offer: Offer{Model: "a", Level: lVerified},
			checks: kind(store.CheckUsage, at(-6*time.Minute, false, false, false, false, false, false)), want: lVerified},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := blank()
			r.Checks = tt.checks
			r.Offers = []Offer{tt.offer}
			s := Compute(r)
			if tt.score != 0 {
				s.Value = tt.score
			}
			got, reason, changed := ru.NextOffer(tt.offer, r, s)
			if got != tt.want || changed != (got != tt.offer.Level && !(tt.offer.Level == "" && got == lNew)) {
				t.Fatalf("NextOffer = %s, %q, %v; want %s", got, reason, changed, tt.want)
			}
			if !strings.Contains(reason, tt.reason) {
				t.Errorf("reason %q, want it to contain %q", reason, tt.reason)
			}
		})
	}
}

// A node's level follows its models': verified once one is, quarantined once all are or one
// is quarantined twice; a broken model alone costs the node nothing more.
func TestRules_NextWithOffers(t *testing.T) {
	ru := DefaultRules()
	served := func(model, level string) Offer { return Offer{Model: model, Level: level, Served: true} }
	tests := []struct {
		name   string
		cur    string
		record func() Record
		want   string
		reason string
	}{
		{name: "new: verified with its first verified model", cur: lNew, record: func() Record {
			r := blank()
			r.Checks = append(of("a", kind(store.CheckOnboarding, at(-6*time.Minute, true, true, true))...),
				of("b", kind(store.CheckOnboarding, at(-3*time.Minute, false, false, false))...)...)
			r.Offers = []Offer{served("a", lVerified), served("b", lNew)}
			return r
		}, want: lVerified, reason: "its model a passed 3 onboarding checks in a row: verified"},
		{name: "new: no model verified yet", cur: lNew, record: func() Record {
			r := blank()
			r.Checks = of("a", kind(store.CheckOnboarding, at(-6*time.Minute, true, true, true))...)
			r.Offers = []Offer{served("a", lNew)}
			return r
		}, want: lNew},
		{name: "every model quarantined", cur: lVerified, record: func() Record {
			r := established()
			r.Offers = []Offer{served("a", lQuarantined), served("b", lQuarantined), {Model: "c", Level: lVerified}}
			return r
		}, want: lQuarantined, reason: "every model it serves failed its checks (2 models)"},
		{name: "one model of two quarantined", cur: lTrusted, record: func() Record {
			r := established()
			r.Checks = append(r.Checks, of("b", kind(store.CheckQuarantine, at(-6*time.Minute, false, false, false, false, false, false))...)...)
			r.Offers = []Offer{served("a", lVerified), served("b", lQuarantined)}
			return r
		}, want: lTrusted},
		{name: "a new model failing its onboarding costs a verified node nothing", cur: lTrusted, record: func() Record {
			r := established()
			r.LevelSince = now.Add(-time.Hour)
			r.Checks = append(r.Checks, of("b", kind(store.CheckOnboarding, at(-5*time.Minute, false, false, false, false))...)...)
			r.Offers = []Offer{served("a", lVerified), {Model: "b", Level: lQuarantined, Served: true, Since: now}}
			return r
		}, want: lTrusted},
		{name: "a released model's old failures are behind it", cur: lTrusted, record: func() Record {
			r := established()
			r.LevelSince = now.Add(-time.Hour)
			r.Checks = append(r.Checks, of("b", at(-30*time.Minute, false, false, false, false)...)...)
			r.Checks = append(r.Checks, of("b", kind(store.CheckQuarantine, at(-10*time.Minute, true, true, true))...)...)
			r.Offers = []Offer{served("a", lVerified), {Model: "b", Level: lVerified, Served: true, Since: now.Add(-5 * time.Minute)}}
			return r
		}, want: lTrusted},
		{name: "a model quarantined a second time", cur: lVerified, record: func() Record {
			r := established()
			r.LevelSince = now.Add(-time.Hour)
			r.Offers = []Offer{served("a", lVerified), {Model: "b", Level: lQuarantined, Served: true, Since: now, Quarantines: 2}}
			return r
		}, want: lQuarantined, reason: "its model b was quarantined 2 times in the last 30 days: the node is quarantined"},
		{name: "a model quarantined twice, before an operator's release", cur: lTrusted, record: func() Record {
			r := established()
			r.LevelSince = now
			r.Offers = []Offer{served("a", lVerified), {Model: "b", Level: lQuarantined, Served: true, Since: now.Add(-time.Hour), Quarantines: 2}}
			return r
		}, want: lTrusted},
		{name: "failing on every model: quarantined at the 4th probe", cur: lVerified, record: func() Record {
			r := established()
			r.Checks = append(r.Checks, of("a", at(-4*time.Minute, false)...)...)
			r.Checks = append(r.Checks, of("b", at(-3*time.Minute, false)...)...)
			r.Checks = append(r.Checks, of("a", at(-2*time.Minute, false)...)...)
			r.Checks = append(r.Checks, of("b", at(-1*time.Minute, false)...)...)
			r.Offers = []Offer{served("a", lVerified), served("b", lVerified)}
			return r
		}, want: lQuarantined, reason: "4 of its last 6 checks failed, answers unlike the model's"},
		{name: "3 usage checks failed in a day", cur: lTrusted, record: func() Record {
			r := established()
			r.Checks = append(r.Checks, kind(store.CheckUsage, at(-20*time.Hour, false))...)
			r.Checks = append(r.Checks, probes(true, true, true)...)
			r.Checks = append(r.Checks, kind(store.CheckUsage, at(-2*time.Minute, false, false))...)
			return r
		}, want: lQuarantined, reason: "its usage claims were inflated 3 times in the last 24 hours"},
		{name: "usage checks failed over more than a day", cur: lVerified, record: func() Record {
			r := established()
			r.Checks = append(r.Checks, kind(store.CheckUsage, at(-25*time.Hour, false))...)
			r.Checks = append(r.Checks, probes(true, true, true)...)
			r.Checks = append(r.Checks, kind(store.CheckUsage, at(-2*time.Minute, false, false))...)
			return r
		}, want: lVerified},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.record()
			got, reason, _ := ru.Next(tt.cur, r, Compute(r))
			if got != tt.want || !strings.Contains(reason, tt.reason) {
				t.Errorf("Next = %s (%q); want %s (%q)", got, reason, tt.want, tt.reason)
			}
		})
	}
}

// The probes of a model quarantined on a node decide only its release: they cost the node's
// score nothing, while the checks that quarantined it count.
func TestCompute_QuarantinedModelProbes(t *testing.T) {
	r := established()
	before := Compute(r).Value
	r.Checks = append(r.Checks, of("b", kind(store.CheckQuarantine, at(-30*time.Minute, repeat(false, 30)...))...)...)
	r.Offers = []Offer{{Model: "b", Level: lQuarantined, Served: true, Since: now.Add(-time.Hour)}}
	if after := Compute(r).Value; !near(after, before) {
		t.Errorf("score %.4f after 30 failed probes of a quarantined model; want %.4f, unchanged", after, before)
	}
	r.Checks = append(r.Checks, of("b", at(-2*time.Hour, false, false, false, false)...)...)
	if after := Compute(r).Value; after >= before {
		t.Errorf("score %.4f with the failures that quarantined the model; want below %.4f", after, before)
	}
}
