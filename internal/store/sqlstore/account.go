package sqlstore

import (
	"context"
	"fmt"

	"github.com/shareai/shareai/internal/store"
)

// CreateAccount creates an account; store.ErrConflict if its name or id is taken.
func (db *DB) CreateAccount(ctx context.Context, a *store.Account) error {
	_, err := db.w.ExecContext(ctx,
		db.q(`INSERT INTO accounts (id, name, created_at) VALUES (?, ?, ?)`),
		a.ID, a.Name, millis(a.CreatedAt))
	if err != nil {
		return fmt.Errorf("create account %q: %w", a.Name, dbError(err))
	}
	return nil
}

// Account returns an account by id or, failing that, by name; store.ErrNotFound.
func (db *DB) Account(ctx context.Context, idOrName string) (*store.Account, error) {
	var (
		a  store.Account
		ms int64
	)
	err := db.r.QueryRowContext(ctx, db.q(`
SELECT id, name, created_at FROM accounts
WHERE id = ? OR name = ?
ORDER BY CASE WHEN id = ? THEN 0 ELSE 1 END
LIMIT 1`), idOrName, idOrName, idOrName).Scan(&a.ID, &a.Name, &ms)
	if err != nil {
		return nil, fmt.Errorf("account %q: %w", idOrName, notFound(err))
	}
	a.CreatedAt = fromMillis(ms)
	return &a, nil
}

// MarkProvider records that an account provides nodes. Idempotent; store.ErrNotFound if there
// is no such account.
func (db *DB) MarkProvider(ctx context.Context, accountID string) error {
	_, err := db.w.ExecContext(ctx, db.q(`
INSERT INTO providers (account_id, created_at) VALUES (?, ?)
ON CONFLICT (account_id) DO NOTHING`), accountID, millis(db.now()))
	if err != nil {
		return fmt.Errorf("mark provider %s: %w", accountID, dbError(err))
	}
	return nil
}
