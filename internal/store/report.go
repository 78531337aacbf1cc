package store

import (
	"context"
	"time"

	"github.com/shareai/shareai/internal/money"
)

// Reports are the read-only queries behind the buyers' and providers' reporting endpoints and
// the operator's tools.
type Reports interface {
	// Accounts lists every account, by name.
	Accounts(ctx context.Context) ([]*Account, error)
	// KeyUsage sums what an account's key was charged for the requests it made since a time
	// (by the requests' start). It counts the account's records only, so a key id of another
	// account sums to zero.
	KeyUsage(ctx context.Context, accountID, keyID string, since time.Time) (money.Nanos, error)
}
