// Package reputation scores nodes from their record and moves them between trust levels
// (store.LevelNew … store.LevelSuspended) by written rules: docs/reputation.md states the
// formula, every constant and every rule, with worked examples, and this package is its
// implementation. Everything here is pure and deterministic: the caller gathers a node's
// Record (its days of jobs, its checks, what the fleet measures live) and the time, and gets
// back a Score with the reasons a provider reads, and the level the rules give.
//
// It imports the standard library and internal/store (for the level and check constants) only.
package reputation

import (
	"time"
)

// HistoryDays is how far back a record counts: days and checks older than this many days are
// ignored (with a half-life of 3 days they would weigh under a thousandth anyway).
const HistoryDays = 30

// Record is what the coordinator knows of one node at Now. The caller builds it so that it
// holds only the node's own faults: see docs/reputation.md, "What counts against a node".
type Record struct {
	// Quarantines counts the times the node was quarantined in the last HistoryDays days, the
	// current one included: a node quarantined a second time is not released by the rules,
	// only by an operator (a node that cheats only while live would otherwise come back each
	// time it passed its probes).
	Quarantines int

	Now time.Time
	// FirstSeen is when the node first registered; zero when unknown (then it has no age).
	FirstSeen time.Time
	// LevelSince is when the node got its current level (store.Node.LevelChangedAt). The rules
	// that count checks to leave a level (onboarding passes, quarantine, release) count only
	// checks at or after it, so that the checks which caused a change, or came before an
	// operator's decision or a hardware change, do not count twice. Zero: every check counts.
	LevelSince time.Time
	// Days are the node's job counts per UTC day; the caller passes at least the last
	// HistoryDays days, today's counts so far included. Order does not matter.
	Days []Day
	// Checks are the node's verification results, in any order; ties on At are taken in the
	// given order as oldest first. The caller passes at least the last HistoryDays days' and
	// at least the last few (Rules.QuarantineWindow) whatever their age.
	Checks []Check
	// UptimeInWindows is the share, 0..1, of the time inside its declared availability windows
	// over the last 7 days that the node was connected and not paused, counting only the time
	// the coordinator itself was up and reachable; -1 when unknown (no window time yet).
	UptimeInWindows float64
	// Reliability is the fleet's live moving average of the node's jobs completed (1) or failed
	// (0) since it last connected, 0..1; -1 when it has run no job since then, or since the
	// coordinator started. It reacts within minutes, so a node that starts to fail falls at once.
	Reliability float64
	// LatencyRatio is the node's measured time to first token over the median of the nodes
	// serving the same models (1 typical, 2 twice as slow); 0 when not measured.
	LatencyRatio float64
	// ThroughputRatio is the node's measured output tokens per second over the same median
	// (1 typical, 0.5 half as fast); 0 when not measured.
	ThroughputRatio float64
	// Offers are the node's models, each verified on its own ([Rules.NextOffer]): the ones it
	// serves now, and those it served that have a level. nil: the node is judged as a whole,
	// as if all its checks were of one model.
	Offers []Offer
}

// Offer is one model of a node, which the rules verify on its own: a node whose second model
// fails its checks loses that model, not the first.
type Offer struct {
	Model string
	// Level is the model's own level on the node: store.LevelNew (not verified yet),
	// store.LevelVerified or store.LevelQuarantined; "" is new.
	Level string
	// Since is when the model got Level on the node; the rules count only its checks at or
	// after it. Zero: every check counts.
	Since time.Time
	// Quarantines counts the times the model was quarantined on the node in the last
	// HistoryDays days, the current one included.
	Quarantines int
	// Served says that the node offers the model now.
	Served bool
}

// Day is a node's jobs on one UTC day.
type Day struct {
	Day time.Time // any time on the day; its UTC date is what counts
	// Jobs are the jobs that ended that day, however they ended, except those the coordinator
	// cut short itself (its restart, its own loss of connectivity).
	Jobs int
	// Failed are the jobs among Jobs that failed through the node's fault: it reported an
	// error, vanished or stalled mid-job. Not buyers' cancellations, nor requests the engine
	// rightly refused as invalid.
	Failed int
}

// Check is one verification result: store.CheckOnboarding, store.CheckProbe,
// store.CheckQuarantine (a probe of a model quarantined on the node, which decides only its
// release), or store.CheckUsage (usage claims found implausible: always failed).
type Check struct {
	At     time.Time
	Kind   string
	Passed bool
	// Model is the model checked; "" for a check of the node as a whole (usage). A record
	// without Offers ignores it.
	Model string
}
