package reputation

import (
	"fmt"
	"slices"

	"github.com/shareai/shareai/internal/store"
)

// Each model a node serves is verified on its own: its checks move it between new, verified
// and quarantined on that node (NextOffer), and buyers reach the node for a model only while
// both the node and the model on it are verified (or the node trusted). The node's own level
// follows its models: it is verified once one of them is, and quarantined once all of them
// are. See docs/reputation.md, "Models".

// NextOffer applies the rules to one model of a node: o is the model as it stands, r the
// node's record (the checks of o.Model at or after o.Since count) and s = Compute(r). It
// returns the model's level on the node (store.LevelNew, LevelVerified or LevelQuarantined)
// and, when that differs from o.Level, why, in a sentence for the provider.
func (ru Rules) NextOffer(o Offer, r Record, s Score) (level, reason string, changed bool) {
	cur := o.Level
	if cur == "" {
		cur = store.LevelNew
	}
	var mine []Check
	for _, c := range checksSince(sortedChecks(r.Checks), o.Since) {
		if c.Model == o.Model {
			mine = append(mine, c)
		}
	}
	switch cur {
	case store.LevelNew, store.LevelVerified:
		if failed := failedIn(last(mine, ru.QuarantineWindow)); failed >= ru.QuarantineFailed {
			return store.LevelQuarantined, fmt.Sprintf(
				"%d of its last %s of this model failed: the model is quarantined on the node, no live traffic for it but still probed, until %s",
				failed, plural(min(len(mine), ru.QuarantineWindow), "check", "checks"), ru.release()), true
		}
		if n := passedInARow(mine, store.CheckOnboarding); cur == store.LevelNew && n >= ru.OnboardingChecks {
			return store.LevelVerified, fmt.Sprintf(
				"passed %s of this model in a row: verified, it gets live traffic for it",
				plural(n, "onboarding check", "onboarding checks")), true
		}
	case store.LevelQuarantined:
		if o.Quarantines > 1 {
			return cur, "", false // quarantined twice: the node is quarantined for it (Next)
		}
		if n := passedInARow(mine, ""); n >= ru.ReleaseAfterPassed && s.Value >= ru.ReleaseMinScore {
			return store.LevelVerified, fmt.Sprintf("%s of this model in a row passed and the score is %s: verified again",
				plural(n, "check", "checks"), pct(s.Value)), true
		}
	}
	return cur, "", false
}

// offerRules are the rules of Next that look at the node's models: the node is quarantined
// when every model it serves is, or when one is quarantined a second time in HistoryDays
// days; a new node is verified once one of its models is.
func (ru Rules) offerRules(cur string, r Record) (level, reason string, changed bool) {
	served, quarantined := 0, 0
	for _, o := range r.Offers {
		if !o.Served {
			continue
		}
		served++
		if o.Level == store.LevelQuarantined {
			quarantined++
			if o.Quarantines > 1 && !o.Since.Before(r.LevelSince) {
				return store.LevelQuarantined, fmt.Sprintf(
					"its model %s was quarantined %s in the last %d days: the node is quarantined, no live traffic but still probed, until %s",
					o.Model, plural(o.Quarantines, "time", "times"), HistoryDays, ru.release()), true
			}
		}
	}
	if served > 0 && quarantined == served {
		return store.LevelQuarantined, fmt.Sprintf(
			"every model it serves failed its checks (%s): quarantined, no live traffic but still probed, until %s",
			plural(served, "model", "models"), ru.release()), true
	}
	if cur == store.LevelNew {
		for _, o := range r.Offers {
			if o.Served && o.Level == store.LevelVerified {
				return store.LevelVerified, fmt.Sprintf(
					"its model %s passed %s in a row: verified, it gets live traffic for the models verified on it",
					o.Model, plural(ru.OnboardingChecks, "onboarding check", "onboarding checks")), true
			}
		}
	}
	return cur, "", false
}

// nodeChecks are the checks the node's own rules count, oldest first. With Offers: the checks
// of no model (usage), of a model the record does not know, and of a model verified on the
// node made since it was; a model new or quarantined on the node answers for its checks on
// its own (NextOffer), and a verified model's checks from before it was verified (its
// onboarding, or the failures that quarantined it before its release) are behind it. Probes
// of a quarantined model never count (see scored).
func nodeChecks(r Record, oldestFirst []Check) []Check {
	out := make([]Check, 0, len(oldestFirst))
	for _, c := range oldestFirst {
		if !scored(c) {
			continue
		}
		if o, ok := offerOf(r, c.Model); ok && (o.Level != store.LevelVerified || c.At.Before(o.Since)) {
			continue
		}
		out = append(out, c)
	}
	return out
}

func offerOf(r Record, model string) (Offer, bool) {
	if model == "" {
		return Offer{}, false
	}
	for _, o := range r.Offers {
		if o.Model == model {
			return o, true
		}
	}
	return Offer{}, false
}

// scored reports whether a check counts in the score and the node's rules: every check but a
// probe of a model quarantined on the node, so that a node whose one model is broken does not
// lose its standing for the others probe after probe.
func scored(c Check) bool { return c.Kind != store.CheckQuarantine }

// sortedChecks returns the checks sorted by At, oldest first (ties in the given order).
func sortedChecks(cs []Check) []Check {
	s := slices.Clone(cs)
	slices.SortStableFunc(s, func(a, b Check) int { return a.At.Compare(b.At) })
	return s
}

// newOfferProgress is the most onboarding checks in a row that a new model the node serves
// has passed since it became new; -1 when it serves no new model.
func newOfferProgress(r Record, oldestFirst []Check) int {
	best := -1
	for _, o := range r.Offers {
		if !o.Served || (o.Level != "" && o.Level != store.LevelNew) {
			continue
		}
		var mine []Check
		for _, c := range checksSince(oldestFirst, o.Since) {
			if c.Model == o.Model {
				mine = append(mine, c)
			}
		}
		best = max(best, passedInARow(mine, store.CheckOnboarding))
	}
	return best
}
