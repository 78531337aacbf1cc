package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// Accounts lists every account, by name.
func (db *DB) Accounts(ctx context.Context) ([]*store.Account, error) {
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT id, name, created_at FROM accounts ORDER BY name`))
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	defer rows.Close()
	var as []*store.Account
	for rows.Next() {
		var a store.Account
		var ms int64
		if err := rows.Scan(&a.ID, &a.Name, &ms); err != nil {
			return nil, fmt.Errorf("list accounts: %w", err)
		}
		a.CreatedAt = fromMillis(ms)
		as = append(as, &a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	return as, nil
}

// KeyUsage sums the cost of an account's key's requests made since a time. The filter on the
// account lets the usage_account_created index serve the query.
func (db *DB) KeyUsage(ctx context.Context, accountID, keyID string, since time.Time) (money.Nanos, error) {
	var sum int64
	err := db.r.QueryRowContext(ctx, db.q(`SELECT CAST(COALESCE(SUM(cost), 0) AS BIGINT) FROM usage
WHERE account_id = ? AND created_at >= ? AND key_id = ?`), accountID, millis(since), keyID).Scan(&sum)
	if err != nil {
		return 0, fmt.Errorf("usage of key %s since %s: %w", keyID, since.UTC().Format(time.RFC3339), err)
	}
	return money.Nanos(sum), nil
}
