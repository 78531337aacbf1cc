package store

import (
	"context"
	"time"

	"github.com/shareai/shareai/internal/money"
)

// Pricing holds what dynamic pricing keeps (docs/architecture.md, "Dynamic pricing"): the ask
// schedules providers set for their nodes in the console, and their earnings by the ask they
// were billed at.
type Pricing interface {
	// NodeAskSchedule returns the ask schedule set for a node (the JSON of a
	// protocol.AskSchedule), or "" when none is.
	NodeAskSchedule(ctx context.Context, nodeID string) (string, error)
	// SetNodeAskSchedule sets a node's ask schedule; "" clears it.
	SetNodeAskSchedule(ctx context.Context, nodeID, schedule string, at time.Time) error
	// EarningsByAsk sums a provider's earnings since a time by the ask they were billed at:
	// the ask schedule's window and the surge multiplier, dearest first. They add up to what
	// Earnings lists over the same time.
	EarningsByAsk(ctx context.Context, accountID string, since time.Time) ([]AskEarning, error)
}

// AskEarning is what a provider earned at one ask.
type AskEarning struct {
	Window string      // the ask schedule's window; "": the flat ask
	Surge  int64       // the surge multiplier in basis points; 10000: ×1
	Parts  int         // the requests' parts billed at it
	Earned money.Nanos // pending and available
}
