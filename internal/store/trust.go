package store

import (
	"context"
	"time"

	"github.com/shareai/shareai/internal/money"
)

// Node levels (see docs/reputation.md): a node starts new, is verified once it passes its
// onboarding checks, and trusted once its record says so; quarantined nodes get no live
// traffic but are still probed; suspended nodes are cheats, whose pending earnings are clawed
// back.
const (
	LevelNew         = "new"
	LevelVerified    = "verified"
	LevelTrusted     = "trusted"
	LevelQuarantined = "quarantined"
	LevelSuspended   = "suspended"
)

// Kinds of node check.
const (
	CheckOnboarding = "onboarding" // a known-answer check before a node gets live traffic
	CheckProbe      = "probe"      // a canary request, indistinguishable from a buyer's
	// CheckQuarantine is a probe of a model quarantined on its node: it decides only whether
	// the model is released.
	CheckQuarantine = "quarantine"
	// CheckUsage records usage claims found implausible (Node.Overclaims grew): always failed,
	// and of no model.
	CheckUsage = "usage"
)

// OfferLevel is the level of one model on one node: each model a node serves is verified on
// its own (docs/reputation.md). Level is LevelNew, LevelVerified or LevelQuarantined.
type OfferLevel struct {
	NodeID    string
	Model     string
	Level     string
	Reason    string
	ChangedAt time.Time
}

// NodeCheck is the result of one verification of a node.
type NodeCheck struct {
	NodeID string
	At     time.Time
	Kind   string // CheckOnboarding or CheckProbe
	Model  string
	Passed bool
	Detail string // for a person to read: what was compared, how alike
}

// AuditEntry records an operator's decision, or the coordinator's own about a node's level.
type AuditEntry struct {
	ID     int64
	At     time.Time
	Actor  string // "admin:<name>", or "coordinator" for automatic changes
	Action string // such as "node.level", "node.suspend", "clawback"
	Target string // such as a node id
	Detail string
}

// LevelChange is an operator's change of a node's level, which Trust.ChangeNodeLevel makes in
// one transaction with its audit entries and, for a suspension, the clawback.
type LevelChange struct {
	NodeID string
	Level  string // one of the Level* constants
	Reason string
	At     time.Time
	// ClawBackRef, when not "", also claws back the node's pending earnings, as ClawBack with
	// this ref: a ref used already claws back nothing.
	ClawBackRef string
	// Audit returns the change's audit entries, given the node's level before it (as stored:
	// "" or LevelNew for a node never levelled) and the amount clawed back; they are recorded
	// in the same transaction, in order. Nil: none.
	Audit func(from string, clawedBack money.Nanos) []AuditEntry
}

// Trust is what the store keeps of nodes' verification and governance.
type Trust interface {
	// SetNodeLevel sets a node's level and why; ErrNotFound for an unknown node.
	SetNodeLevel(ctx context.Context, nodeID, level, reason string, at time.Time) error
	// ChangeNodeLevel sets a node's level as SetNodeLevel does, claws back its pending earnings
	// when c.ClawBackRef is set, and records c.Audit's entries, all in one transaction: on an
	// error nothing is written. It returns the node's level before and what was clawed back;
	// ErrNotFound for an unknown node.
	ChangeNodeLevel(ctx context.Context, c LevelChange) (from string, clawedBack money.Nanos, err error)
	// SetOfferLevel sets the level of a model on a node, why, and since when.
	SetOfferLevel(ctx context.Context, l OfferLevel) error
	// OfferLevels lists the levels of the models of a node, by model.
	OfferLevels(ctx context.Context, nodeID string) ([]OfferLevel, error)
	// CheckOverclaims turns the node's over-claims (Node.Overclaims) not counted yet into one
	// failed check of kind CheckUsage at at, in one transaction, and returns how many it
	// counted: 0, and no check, when there were none.
	CheckOverclaims(ctx context.Context, nodeID string, at time.Time) (int, error)
	// SetNodeScores records nodes' reputation scores (node id → score in [0, 1]).
	SetNodeScores(ctx context.Context, scores map[string]float64, at time.Time) error
	// AddNodeChecks records verification results, in one transaction.
	AddNodeChecks(ctx context.Context, checks []NodeCheck) error
	// NodeChecks lists a node's checks, newest first, at most limit.
	NodeChecks(ctx context.Context, nodeID string, limit int) ([]NodeCheck, error)
	// AddAudit records an entry and sets its ID.
	AddAudit(ctx context.Context, e *AuditEntry) error
	// AuditLog lists entries about target (every target when ""), newest first, at most limit.
	AuditLog(ctx context.Context, target string, limit int) ([]AuditEntry, error)
	// FundFromFees moves platform fees to a buyer account (the platform's own, which pays the
	// probes), in one transaction; ErrInsufficient when the fees fall short. ref makes it
	// idempotent (ErrConflict when reused).
	FundFromFees(ctx context.Context, accountID string, amount money.Nanos, ref string, at time.Time) error
	// ClawBack returns a node's earnings still pending (not released) to the buyers who paid
	// them, in one transaction, and returns how much. The platform's fee on them is returned
	// too. ref makes it idempotent: a second call with the same ref returns 0.
	ClawBack(ctx context.Context, nodeID, ref string, at time.Time) (money.Nanos, error)
}
