package reputation

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/shareai/shareai/internal/store"
)

// Rules are the thresholds of the automatic level changes; docs/reputation.md states them.
type Rules struct {
	// OnboardingChecks: a new node is verified once this many onboarding checks in a row pass.
	OnboardingChecks int
	// A verified node becomes trusted with at least TrustedMinJobs jobs completed in the last
	// HistoryDays days, TrustedMinAge since it was first seen, a score of TrustedMinScore or
	// more, and none of its last QuarantineWindow checks failed.
	TrustedMinJobs  int
	TrustedMinAge   time.Duration
	TrustedMinScore float64
	// DemoteBelow: a trusted node whose score falls below it is verified again.
	DemoteBelow float64
	// A new, verified or trusted node is quarantined when QuarantineFailed of its last
	// QuarantineWindow checks (since its level last changed) failed; a verified or trusted
	// node, too, when its score falls below QuarantineBelow with at least QuarantineMinJobs
	// jobs in its record (before that, a low score only ranks it last).
	QuarantineFailed  int
	QuarantineWindow  int
	QuarantineBelow   float64
	QuarantineMinJobs int
	// A quarantined node is verified again once ReleaseAfterPassed checks in a row pass
	// (since it was quarantined) and its score is ReleaseMinScore or more.
	ReleaseAfterPassed int
	ReleaseMinScore    float64
	// A new, verified or trusted node is quarantined when UsageFailed of its usage checks
	// (store.CheckUsage: its usage claims found inflated) failed within UsageWindow, counting
	// only those since its level last changed.
	UsageFailed int
	UsageWindow time.Duration
}

// DefaultRules are the rules docs/reputation.md documents.
func DefaultRules() Rules {
	return Rules{
		OnboardingChecks:   3,
		TrustedMinJobs:     200,
		TrustedMinAge:      7 * 24 * time.Hour,
		TrustedMinScore:    0.90,
		DemoteBelow:        0.80,
		QuarantineFailed:   4,
		QuarantineWindow:   6,
		QuarantineBelow:    0.50,
		QuarantineMinJobs:  200,
		ReleaseAfterPassed: 3,
		ReleaseMinScore:    0.60,
		UsageFailed:        3,
		UsageWindow:        24 * time.Hour,
	}
}

// Validate reports rules that contradict themselves.
func (ru Rules) Validate() error {
	var errs []error
	if ru.OnboardingChecks < 1 {
		errs = append(errs, errors.New("onboarding checks must be at least 1"))
	}
	if ru.TrustedMinJobs < 0 || ru.TrustedMinAge < 0 || ru.QuarantineMinJobs < 0 {
		errs = append(errs, errors.New("minimum jobs and age must not be negative"))
	}
	if ru.QuarantineFailed < 1 || ru.QuarantineWindow < ru.QuarantineFailed {
		errs = append(errs, fmt.Errorf("quarantine needs 1 ≤ failed (%d) ≤ window (%d)", ru.QuarantineFailed, ru.QuarantineWindow))
	}
	if ru.ReleaseAfterPassed < 1 {
		errs = append(errs, errors.New("release after passed must be at least 1"))
	}
	if ru.UsageFailed < 1 || ru.UsageWindow <= 0 {
		errs = append(errs, errors.New("usage quarantine needs at least 1 failed check within a positive window"))
	}
	for _, s := range []float64{ru.QuarantineBelow, ru.ReleaseMinScore, ru.DemoteBelow, ru.TrustedMinScore} {
		if !(s >= 0 && s <= 1) {
			errs = append(errs, fmt.Errorf("score threshold %v is outside 0..1", s))
		}
	}
	if !(ru.QuarantineBelow <= ru.ReleaseMinScore && ru.DemoteBelow <= ru.TrustedMinScore && ru.QuarantineBelow <= ru.DemoteBelow) {
		errs = append(errs, errors.New("score thresholds must keep quarantine ≤ release, quarantine ≤ demote ≤ trusted"))
	}
	return errors.Join(errs...)
}

// Next applies the rules to a node at level cur ("" is taken as new) with record r and
// score s = Compute(r). It returns the level the node should have and, when that differs from
// cur, why, in a sentence for its provider. Suspended nodes, and levels it does not know,
// never change here: only an operator changes them.
func (ru Rules) Next(cur string, r Record, s Score) (level, reason string, changed bool) {
	if cur == "" {
		cur = store.LevelNew
	}
	t := tallyRecord(r)
	mine := nodeChecks(r, t.checksOldestFirst)
	since := checksSince(mine, r.LevelSince)
	switch cur {
	case store.LevelNew, store.LevelVerified, store.LevelTrusted:
	case store.LevelQuarantined:
		if r.Quarantines > 1 {
			return cur, "", false // a repeat offender: only an operator releases it
		}
		if n := passedInARow(since, ""); n >= ru.ReleaseAfterPassed && s.Value >= ru.ReleaseMinScore {
			return store.LevelVerified, fmt.Sprintf(
				"%s in a row passed and the score is %s: verified again",
				plural(n, "check", "checks"), pct(s.Value)), true
		}
		return cur, "", false
	default: // suspended, or unknown
		return cur, "", false
	}

	if len(r.Offers) > 0 {
		if level, reason, changed := ru.offerRules(cur, r); changed && level == store.LevelQuarantined {
			return level, reason, true
		}
	}
	if n := usageFailedSince(since, r.Now.Add(-ru.UsageWindow)); n >= ru.UsageFailed {
		return store.LevelQuarantined, fmt.Sprintf(
			"its usage claims were inflated %s in the last %s: quarantined, no live traffic but still probed, until %s",
			plural(n, "time", "times"), hours(ru.UsageWindow), ru.release()), true
	}
	if window := last(since, ru.QuarantineWindow); failedIn(window) >= ru.QuarantineFailed {
		return store.LevelQuarantined, fmt.Sprintf(
			"%d of its last %s failed, %s: quarantined, no live traffic but still probed, until %s",
			failedIn(window), plural(len(window), "check", "checks"), failedWhy(window), ru.release()), true
	}
	if cur != store.LevelNew && s.Value < ru.QuarantineBelow && t.jobs >= ru.QuarantineMinJobs {
		return store.LevelQuarantined, fmt.Sprintf(
			"its score %s fell below %s over %s in the last %d days: quarantined, no live traffic but still probed, until %s",
			pct(s.Value), pct(ru.QuarantineBelow), plural(t.jobs, "job", "jobs"), HistoryDays, ru.release()), true
	}

	switch cur {
	case store.LevelNew:
		if len(r.Offers) > 0 {
			return ru.offerRules(cur, r) // verified once one of its models is
		}
		if n := passedInARow(since, store.CheckOnboarding); n >= ru.OnboardingChecks {
			return store.LevelVerified, fmt.Sprintf(
				"passed %s in a row: verified, it gets live traffic", plural(n, "onboarding check", "onboarding checks")), true
		}
	case store.LevelVerified:
		if ru.trustable(r, t, mine, s) {
			return store.LevelTrusted, fmt.Sprintf(
				"%s completed in the last %d days, %s on the network, a score of %s and its last %s passed: trusted, first in the auction",
				plural(t.done, "job", "jobs"), HistoryDays, plural(ageDays(r), "day", "days"), pct(s.Value),
				plural(min(len(mine), ru.QuarantineWindow), "check", "checks")), true
		}
	case store.LevelTrusted:
		if s.Value < ru.DemoteBelow {
			return store.LevelVerified, fmt.Sprintf(
				"its score %s fell below %s: verified again, trusted once more at %s",
				pct(s.Value), pct(ru.DemoteBelow), pct(ru.TrustedMinScore)), true
		}
	}
	return cur, "", false
}

// Goal says what a node at level cur needs for its next level up, or to keep its level, in a
// sentence for its provider. It is not a reason for a level change.
func (ru Rules) Goal(cur string, r Record, s Score) string {
	if cur == "" {
		cur = store.LevelNew
	}
	t := tallyRecord(r)
	mine := nodeChecks(r, t.checksOldestFirst)
	since := checksSince(mine, r.LevelSince)
	switch cur {
	case store.LevelNew:
		if len(r.Offers) > 0 {
			n := newOfferProgress(r, t.checksOldestFirst)
			if n < 0 {
				return "verified once one of its models passes its onboarding checks"
			}
			return fmt.Sprintf("verified once one of its models passes %s in a row",
				plural(max(ru.OnboardingChecks-n, 1), "more onboarding check", "more onboarding checks"))
		}
		n := passedInARow(since, store.CheckOnboarding)
		return fmt.Sprintf("verified after %s in a row pass",
			plural(max(ru.OnboardingChecks-n, 1), "more onboarding check", "more onboarding checks"))
	case store.LevelVerified:
		var need []string
		if t.done < ru.TrustedMinJobs {
			need = append(need, plural(ru.TrustedMinJobs-t.done, "more completed job", "more completed jobs"))
		}
		if age := r.Now.Sub(r.FirstSeen); r.FirstSeen.IsZero() || age < ru.TrustedMinAge {
			if r.FirstSeen.IsZero() {
				age = 0
			}
			need = append(need, plural(int(math.Ceil((ru.TrustedMinAge-age).Hours()/24)), "more day", "more days")+" on the network")
		}
		if s.Value < ru.TrustedMinScore {
			need = append(need, fmt.Sprintf("a score of %s (now %s)", pct(ru.TrustedMinScore), pct(s.Value)))
		}
		if failedIn(last(mine, ru.QuarantineWindow)) > 0 {
			need = append(need, fmt.Sprintf("its last %d checks to pass", ru.QuarantineWindow))
		}
		if len(need) == 0 {
			return "trusted at the next evaluation"
		}
		return "trusted after " + join(need)
	case store.LevelTrusted:
		return fmt.Sprintf("stays trusted while its score is %s or more (now %s)", pct(ru.DemoteBelow), pct(s.Value))
	case store.LevelQuarantined:
		var need []string
		if n := passedInARow(since, ""); n < ru.ReleaseAfterPassed {
			need = append(need, plural(ru.ReleaseAfterPassed-n, "more check", "more checks")+" in a row to pass")
		}
		if s.Value < ru.ReleaseMinScore {
			need = append(need, fmt.Sprintf("a score of %s (now %s)", pct(ru.ReleaseMinScore), pct(s.Value)))
		}
		if len(need) == 0 {
			return "verified again at the next evaluation"
		}
		return "verified again after " + join(need)
	case store.LevelSuspended:
		return "suspended for fraud: only an operator can lift it; to appeal, contact the operator, whose decision is recorded in the audit log"
	}
	return ""
}

func (ru Rules) release() string {
	return fmt.Sprintf("%d checks in a row pass and its score is %s or more", ru.ReleaseAfterPassed, pct(ru.ReleaseMinScore))
}

func (ru Rules) trustable(r Record, t tally, checks []Check, s Score) bool {
	return t.done >= ru.TrustedMinJobs &&
		!r.FirstSeen.IsZero() && r.Now.Sub(r.FirstSeen) >= ru.TrustedMinAge &&
		s.Value >= ru.TrustedMinScore &&
		failedIn(last(checks, ru.QuarantineWindow)) == 0
}

// usageFailedSince counts the failed usage checks among cs at or after from.
func usageFailedSince(cs []Check, from time.Time) int {
	n := 0
	for _, c := range cs {
		if c.Kind == store.CheckUsage && !c.Passed && !c.At.Before(from) {
			n++
		}
	}
	return n
}

func hours(d time.Duration) string {
	if h := d.Hours(); h == float64(int(h)) {
		return plural(int(h), "hour", "hours")
	}
	return d.String()
}

// failedWhy says what the failed checks among cs were about.
func failedWhy(cs []Check) string {
	answers, usage := 0, 0
	for _, c := range cs {
		switch {
		case c.Passed:
		case c.Kind == store.CheckUsage:
			usage++
		default:
			answers++
		}
	}
	switch {
	case usage == 0:
		return "answers unlike the model's"
	case answers == 0:
		return "usage claims inflated"
	}
	return "answers unlike the model's and usage claims inflated"
}

// Rank orders levels in the auction: a higher rank comes first. Trusted is 2, verified 1; the
// levels that get no live traffic are 0.
func Rank(level string) int {
	switch level {
	case store.LevelTrusted:
		return 2
	case store.LevelVerified:
		return 1
	}
	return 0
}

// Live reports whether a node at level gets buyers' traffic: verified and trusted nodes do;
// new nodes get only onboarding checks, quarantined ones only probes, suspended ones nothing.
func Live(level string) bool { return Rank(level) > 0 }

// AtLeast reports whether a node at level may take traffic that asks for level min or better,
// such as higher-value traffic kept for trusted nodes.
func AtLeast(level, min string) bool { return Live(level) && Rank(level) >= Rank(min) }

func checksSince(oldestFirst []Check, since time.Time) []Check {
	for i, c := range oldestFirst {
		if !c.At.Before(since) {
			return oldestFirst[i:]
		}
	}
	return nil
}

func last(cs []Check, n int) []Check { return cs[max(len(cs)-n, 0):] }

func failedIn(cs []Check) int {
	n := 0
	for _, c := range cs {
		if !c.Passed {
			n++
		}
	}
	return n
}

// passedInARow counts the newest checks of kind ("" for any) that passed in a row.
func passedInARow(oldestFirst []Check, kind string) int {
	n := 0
	for i := len(oldestFirst) - 1; i >= 0; i-- {
		c := oldestFirst[i]
		if kind != "" && c.Kind != kind {
			continue
		}
		if !c.Passed {
			break
		}
		n++
	}
	return n
}

func ageDays(r Record) int {
	if r.FirstSeen.IsZero() {
		return 0
	}
	return int(r.Now.Sub(r.FirstSeen).Hours() / 24)
}

func join(parts []string) string {
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	s := parts[0]
	for _, p := range parts[1 : len(parts)-1] {
		s += ", " + p
	}
	return s + " and " + parts[len(parts)-1]
}
