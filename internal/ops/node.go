package ops

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// SettableLevels are the levels SetNodeLevel sets; suspension is SuspendNode, as it also claws
// back the node's pending earnings.
var SettableLevels = []string{store.LevelNew, store.LevelVerified, store.LevelTrusted, store.LevelQuarantined}

// Actions of the audit log that the node operations record.
const (
	ActionLevel    = "node.level"
	ActionSuspend  = "node.suspend"
	ActionClawBack = "clawback"
)

// Decision is an operator's decision about a node.
type Decision struct {
	NodeID string
	Reason string    // why: required; trimmed, then recorded with the level and in the audit log
	Actor  string    // who, in the audit log: "admin:<name>"
	At     time.Time // when: required
}

// LevelSet is what a change of a node's level did.
type LevelSet struct {
	Node     *store.Node // the node as it was before the change
	From, To string      // its level before (LevelNew for a node never levelled) and now
	// ClawedBack is what went back to the buyers, and Ref the clawback's reference; zero for a
	// change that is not a suspension.
	ClawedBack money.Nanos
	Ref        string
	// Live says whether the live fleet has the level already: false when the operation had no
	// fleet, or the node is not connected.
	Live bool
}

// SetNodeLevel sets a node's level (one of SettableLevels) and records it in the audit log,
// in one transaction, then gives it to the node at once when fl has it connected. fl may be
// nil.
func SetNodeLevel(ctx context.Context, st store.Store, fl Fleet, level string, d Decision) (*LevelSet, error) {
	if !slices.Contains(SettableLevels, level) {
		return nil, fmt.Errorf("level %q of node %s: %w", level, d.NodeID, ErrLevel)
	}
	return changeLevel(ctx, st, fl, level, d)
}

// SuspendNode suspends a node that cheated: its level becomes suspended, so it gets no more
// work, and its earnings still pending release go back to the buyers who paid them, with the
// platform's fee on them (store.Trust.ClawBack); the suspension and the clawback are recorded
// in the audit log. All of it is one transaction: on an error nothing is written, and the
// suspension can be run again. Then the node gets its level at once when fl has it connected.
// fl may be nil. Suspending a suspended node claws back what it earned since.
func SuspendNode(ctx context.Context, st store.Store, fl Fleet, d Decision) (*LevelSet, error) {
	return changeLevel(ctx, st, fl, store.LevelSuspended, d)
}

func changeLevel(ctx context.Context, st store.Store, fl Fleet, level string, d Decision) (*LevelSet, error) {
	d.Reason = strings.TrimSpace(d.Reason)
	switch {
	case d.Reason == "":
		return nil, fmt.Errorf("level of node %s: %w", d.NodeID, ErrNoReason)
	case d.At.IsZero():
		return nil, fmt.Errorf("level of node %s: no time given", d.NodeID)
	}
	n, err := st.Node(ctx, d.NodeID)
	if err != nil {
		return nil, err
	}
	res := &LevelSet{Node: n, To: level}
	change := store.LevelChange{NodeID: n.ID, Level: level, Reason: d.Reason, At: d.At}
	if level == store.LevelSuspended {
		res.Ref = fmt.Sprintf("suspend:%s:%d", n.ID, d.At.UnixMilli())
		change.ClawBackRef = res.Ref
	}
	change.Audit = func(from string, clawed money.Nanos) []store.AuditEntry {
		from = cmp.Or(from, store.LevelNew)
		if level != store.LevelSuspended {
			return []store.AuditEntry{{At: d.At, Actor: d.Actor, Action: ActionLevel, Target: n.ID,
				Detail: from + " → " + level + ": " + d.Reason}}
		}
		return []store.AuditEntry{
			{At: d.At, Actor: d.Actor, Action: ActionSuspend, Target: n.ID, Detail: from + " → " + level + ": " + d.Reason},
			{At: d.At, Actor: d.Actor, Action: ActionClawBack, Target: n.ID,
				Detail: fmt.Sprintf("$%s returned to buyers (ref %s)", clawed, res.Ref)},
		}
	}
	from, clawed, err := st.ChangeNodeLevel(ctx, change)
	if err != nil {
		return nil, err
	}
	res.From, res.ClawedBack = cmp.Or(from, store.LevelNew), clawed
	if fl != nil {
		res.Live = fl.ApplyLevel(n.ID, level)
	}
	return res, nil
}
