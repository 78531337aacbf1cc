package reputation

import (
	"fmt"
	"math"
	"time"
)

// The score's constants; docs/reputation.md explains each.
const (
	// Prior is the score of a node with no record at all, and the value the success and
	// verification factors lean towards while their evidence is thin.
	Prior = 0.75
	// halfLifeDays: a day's jobs or a check weighs half as much 3 days later.
	halfLifeDays = 3.0
	// The success factor counts each percent of jobs failed as 5 percent off (successScale),
	// and starts from priorJobs pseudo-jobs of which priorFailed failed: 5% failed, which is
	// worth Prior.
	successScale = 5.0
	priorJobs    = 20.0
	priorFailed  = 1.0
	// The verification factor starts from priorChecks pseudo-checks worth Prior.
	priorChecks = 2.0
	// failedCheckWeight: a failed check weighs as much as this many passed ones.
	failedCheckWeight = 5.0

	// The shares of the weighted mean, before unknown factors drop out.
	weightSuccess      = 0.30
	weightReliability  = 0.20
	weightVerification = 0.30
	weightUptime       = 0.20

	// maxPenalty is the most that slowness in time to first token, and again in tokens per
	// second, subtracts from the score; slownessFloor is the slowness at which it is reached.
	maxPenalty    = 0.025
	slownessFloor = 2.0
)

// Factors, as named in Reason.Factor.
const (
	FactorSuccess      = "success"      // jobs completed vs failed, by day
	FactorReliability  = "reliability"  // the live moving average, when worse than the record
	FactorVerification = "verification" // onboarding checks and probes passed
	FactorUptime       = "uptime"       // online inside the declared windows
	FactorPrior        = "prior"        // no record yet: only when none of the above counts
	FactorLatency      = "latency"      // time to first token against peers (a penalty)
	FactorThroughput   = "throughput"   // tokens per second against peers (a penalty)
)

// Score is a node's reputation, 0..1, with the reasons a provider reads.
type Score struct {
	Value   float64
	Reasons []Reason // one per factor, in the order of the Factor constants (prior only alone)
}

// Reason is one factor of a score.
type Reason struct {
	Factor string
	Value  float64 // the factor's value, 0..1 (1 is best)
	// Weight is, for the factors averaged into the score (success, reliability, verification,
	// uptime, prior), their share of the mean: the shares of the counted ones sum to 1, and a
	// factor not counted has 0. For latency and throughput it is the most the factor can
	// subtract; it subtracts Weight × (1 − Value).
	Weight float64
	Text   string // for the provider, such as "1,185 of 1,204 jobs completed …"
}

// Compute scores a node's record. It is deterministic: the same record gives the same score.
func Compute(r Record) Score {
	t := tallyRecord(r)
	var reasons []Reason
	var sum, weights float64
	add := func(factor string, v, w float64, text string) {
		reasons = append(reasons, Reason{Factor: factor, Value: v, Weight: w, Text: text})
		sum += w * v
		weights += w
	}
	skip := func(factor, text string) {
		reasons = append(reasons, Reason{Factor: factor, Text: text})
	}

	success := math.NaN()
	if t.effJobs > 0 {
		failed := (t.effJobs - t.effDone + priorFailed) / (t.effJobs + priorJobs)
		success = max(1-successScale*failed, 0)
		add(FactorSuccess, success, weightSuccess, fmt.Sprintf(
			"%s of %s jobs completed in the last %d days (%s); each percent failed costs %d, recent days weigh more: %s",
			count(t.done), count(t.jobs), HistoryDays, pct1(float64(t.done)/float64(t.jobs)), int(successScale), pct(success)))
	} else {
		skip(FactorSuccess, fmt.Sprintf("no jobs in the last %d days: not counted", HistoryDays))
	}

	switch live, ok := known01(r.Reliability); {
	case math.IsNaN(success):
		skip(FactorReliability, "not counted without jobs in the record")
	case !ok:
		add(FactorReliability, success, weightReliability, fmt.Sprintf(
			"no jobs since it connected: counts as its success, %s", pct(success)))
	case live < success:
		add(FactorReliability, live, weightReliability, fmt.Sprintf(
			"its latest jobs' moving average is %s, lower than its success: counts as %s", pct1(live), pct(live)))
	default:
		add(FactorReliability, success, weightReliability, fmt.Sprintf(
			"its latest jobs' moving average is %s, no lower than its success: counts as %s",
			pct1(live), pct(success)))
	}

	if t.effChecks > 0 {
		v := (t.effPassed + priorChecks*Prior) / (t.effPassed + failedCheckWeight*t.effFailedChecks + priorChecks)
		add(FactorVerification, v, weightVerification, fmt.Sprintf(
			"%s of %s checks passed in the last %d days; a failed check weighs as much as %d passed ones, recent checks weigh more: %s",
			count(t.passed), count(t.checks), HistoryDays, int(failedCheckWeight), pct(v)))
	} else {
		skip(FactorVerification, fmt.Sprintf("no checks in the last %d days: not counted", HistoryDays))
	}

	if u, ok := known01(r.UptimeInWindows); ok {
		add(FactorUptime, u, weightUptime, fmt.Sprintf(
			"online %s of the time inside its availability windows over the last 7 days", pct(u)))
	} else {
		skip(FactorUptime, "no time inside its availability windows measured yet: not counted")
	}

	value := Prior
	if weights > 0 {
		value = sum / weights
		for i := range reasons {
			reasons[i].Weight /= weights
		}
	} else {
		reasons = append(reasons, Reason{Factor: FactorPrior, Value: Prior, Weight: 1, Text: fmt.Sprintf(
			"no record yet: a node starts at %s", pct(Prior))})
	}

	for _, p := range []struct {
		factor, what string
		slowness     float64
	}{
		{FactorLatency, "time to first token", r.LatencyRatio},
		{FactorThroughput, "tokens per second", inverse(r.ThroughputRatio)},
	} {
		if !(p.slowness > 0) || math.IsInf(p.slowness, 0) {
			reasons = append(reasons, Reason{Factor: p.factor, Value: 1, Weight: maxPenalty,
				Text: fmt.Sprintf("%s not measured yet: costs nothing", p.what)})
			continue
		}
		v := min(max(slownessFloor-p.slowness, 0), 1)
		value -= maxPenalty * (1 - v)
		reasons = append(reasons, Reason{Factor: p.factor, Value: v, Weight: maxPenalty,
			Text: penaltyText(p.what, p.slowness, v)})
	}
	return Score{Value: min(max(value, 0), 1), Reasons: reasons}
}

func penaltyText(what string, slowness, v float64) string {
	if v == 1 {
		return fmt.Sprintf("%s as good as the median of nodes serving the same models or better: costs nothing", what)
	}
	return fmt.Sprintf("%s %.2f× slower than the median of nodes serving the same models: costs %.1f points",
		what, slowness, 100*maxPenalty*(1-v))
}

// tally is a record's counts within HistoryDays, raw and weighted by age.
type tally struct {
	jobs, done           int
	effJobs, effDone     float64
	checks, passed       int
	effChecks, effPassed float64
	effFailedChecks      float64
	checksOldestFirst    []Check // every check of the record, sorted by At (scored or not)
}

func tallyRecord(r Record) tally {
	var t tally
	// Count by age first, so that the sums do not depend on the order of the days.
	var jobs, done [HistoryDays]int
	today := utcDate(r.Now)
	for _, d := range r.Days {
		age := max(int(today.Sub(utcDate(d.Day))/(24*time.Hour)), 0)
		if age >= HistoryDays {
			continue
		}
		j := max(d.Jobs, 0)
		jobs[age] += j
		done[age] += j - min(max(d.Failed, 0), j)
	}
	for age := range HistoryDays {
		w := decay(float64(age))
		t.jobs += jobs[age]
		t.done += done[age]
		t.effJobs += w * float64(jobs[age])
		t.effDone += w * float64(done[age])
	}
	t.checksOldestFirst = sortedChecks(r.Checks)
	for _, c := range t.checksOldestFirst {
		age := r.Now.Sub(c.At).Hours() / 24
		if age >= HistoryDays || !scored(c) {
			continue
		}
		w := decay(max(age, 0))
		t.checks++
		t.effChecks += w
		if c.Passed {
			t.passed++
			t.effPassed += w
		} else {
			t.effFailedChecks += w
		}
	}
	return t
}

// decay is the weight of evidence ageDays old.
func decay(ageDays float64) float64 { return math.Exp2(-ageDays / halfLifeDays) }

func utcDate(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// known01 returns x clamped to 0..1, and whether it is known (not negative, not NaN).
func known01(x float64) (float64, bool) {
	if !(x >= 0) {
		return 0, false
	}
	return min(x, 1), true
}

func inverse(x float64) float64 {
	if !(x > 0) {
		return 0
	}
	return 1 / x
}
