package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/store"
)

// ErrAmbiguous is returned by RevokeKey when a prefix names more than one key.
var ErrAmbiguous = errors.New("ambiguous")

const keyColumns = `id, account_id, kind, name, prefix, hash, created_at, revoked_at, routing, models, rpm_limit, tpm_limit, concurrent_limit, service_tier, split`

// CreateKey stores a key; its ID and Hash must be set. store.ErrConflict if the id or hash is
// taken, store.ErrNotFound if the account does not exist.
func (db *DB) CreateKey(ctx context.Context, k *store.Key) error {
	if err := checkKey(k); err != nil {
		return err
	}
	_, err := db.w.ExecContext(ctx, db.q(keyInsert), keyArgs(k)...)
	if err != nil {
		return fmt.Errorf("create key %s: %w", k.ID, dbError(err))
	}
	return nil
}

const keyInsert = `INSERT INTO api_keys (` + keyColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

func keyArgs(k *store.Key) []any {
	return []any{k.ID, k.AccountID, k.Kind, k.Name, k.Prefix, k.Hash, millis(k.CreatedAt), nullMillis(k.RevokedAt),
		jsonText(k.Routing), strings.Join(k.Models, ","),
		k.Limits.RequestsPerMinute, k.Limits.TokensPerMinute, k.Limits.Concurrent, k.ServiceTier, jsonText(k.Split)}
}

// checkKey refuses a key that CreateKey cannot store.
func checkKey(k *store.Key) error {
	if k.ID == "" || len(k.Hash) == 0 {
		return fmt.Errorf("create key: id and hash must be set")
	}
	if k.Kind != store.KeyBuyer && k.Kind != store.KeyProvider {
		return fmt.Errorf("create key %s: unknown kind %q", k.ID, k.Kind)
	}
	return nil
}

// CreateKeyWithCaps stores a new key with its spend caps, and marks a provider token's account
// as a provider, in one transaction. Each cap's Scope must be store.KeyScope(k.ID) and its
// Limit positive. store.ErrConflict if the id or hash is taken, store.ErrNotFound if the account
// does not exist; on any error nothing is written.
//
// The key is inserted first, so that each cap is set as SetCap sets a key's (the buyer's
// ledger row locked, the window counted, empty for a key just made) and the key never exists
// without its caps.
func (db *DB) CreateKeyWithCaps(ctx context.Context, k *store.Key, caps []store.Cap) error {
	if err := checkKey(k); err != nil {
		return err
	}
	for _, c := range caps {
		switch {
		case c.Scope != store.KeyScope(k.ID):
			return fmt.Errorf("create key %s: a cap of scope %q is not the key's", k.ID, c.Scope)
		case !store.ValidPeriod(c.Period):
			return fmt.Errorf("create key %s: cap period %q is not daily, weekly or monthly", k.ID, c.Period)
		case c.Limit <= 0:
			return fmt.Errorf("create key %s: a cap's limit must be positive, not %s", k.ID, c.Limit)
		}
	}
	now := db.now()
	err := db.write(ctx, func(tx *sql.Tx) error {
		if k.Kind == store.KeyProvider {
			if _, err := db.txExec(ctx, tx, `INSERT INTO providers (account_id, created_at) VALUES (?, ?)
ON CONFLICT (account_id) DO NOTHING`, k.AccountID, millis(now)); err != nil {
				return dbError(err)
			}
		}
		if _, err := db.txExec(ctx, tx, keyInsert, keyArgs(k)...); err != nil {
			return dbError(err)
		}
		for _, c := range caps {
			busy, err := db.setCap(ctx, tx, c, now)
			if err != nil {
				return fmt.Errorf("cap %s: %w", c.Period, err)
			}
			if len(busy) > 0 { // a key made in this transaction has no holds
				return fmt.Errorf("cap %s: %d holds of a new key", c.Period, len(busy))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create key %s: %w", k.ID, err)
	}
	return nil
}

// KeyByHash returns the key, revoked or not, with this hash; store.ErrNotFound.
func (db *DB) KeyByHash(ctx context.Context, hash []byte) (*store.Key, error) {
	k, err := scanKey(db.r.QueryRowContext(ctx, db.q(`SELECT `+keyColumns+` FROM api_keys WHERE hash = ?`), hash))
	if err != nil {
		return nil, fmt.Errorf("key by hash: %w", notFound(err))
	}
	return k, nil
}

// Keys lists an account's keys of a kind, newest first, revoked included. An empty accountID
// lists every account's keys, an empty kind every kind.
func (db *DB) Keys(ctx context.Context, accountID, kind string) ([]*store.Key, error) {
	var (
		where []string
		args  []any
	)
	if accountID != "" {
		where, args = append(where, "account_id = ?"), append(args, accountID)
	}
	if kind != "" {
		where, args = append(where, "kind = ?"), append(args, kind)
	}
	q := `SELECT ` + keyColumns + ` FROM api_keys`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY created_at DESC, id DESC`
	rows, err := db.r.QueryContext(ctx, db.q(q), args...)
	if err != nil {
		return nil, fmt.Errorf("keys of %q: %w", accountID, err)
	}
	defer rows.Close()
	var ks []*store.Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("keys of %q: %w", accountID, err)
		}
		ks = append(ks, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("keys of %q: %w", accountID, err)
	}
	return ks, nil
}

// RevokeKey revokes the key with this id or, failing that, the one key with this prefix, and
// returns it. A key already revoked keeps its first revocation time. store.ErrNotFound if no
// key matches, ErrAmbiguous if the prefix names more than one.
func (db *DB) RevokeKey(ctx context.Context, idOrPrefix string, at time.Time) (*store.Key, error) {
	if at.IsZero() {
		return nil, fmt.Errorf("revoke key %s: zero time", idOrPrefix)
	}
	var k *store.Key
	err := db.write(ctx, func(tx *sql.Tx) error {
		id, err := db.keyID(ctx, tx, idOrPrefix)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			db.q(`UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`),
			millis(at), id); err != nil {
			return err
		}
		k, err = scanKey(tx.QueryRowContext(ctx, db.q(`SELECT `+keyColumns+` FROM api_keys WHERE id = ?`), id))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("revoke key %s: %w", idOrPrefix, err)
	}
	return k, nil
}

// SetKeyLimits replaces the rate limits of the key with this id or, failing that, the one key
// with this prefix, revoked or not, and returns it. store.ErrNotFound if no key matches,
// ErrAmbiguous if the prefix names more than one.
func (db *DB) SetKeyLimits(ctx context.Context, idOrPrefix string, l store.RateLimits) (*store.Key, error) {
	k, err := db.updateKey(ctx, idOrPrefix, `rpm_limit = ?, tpm_limit = ?, concurrent_limit = ?`,
		l.RequestsPerMinute, l.TokensPerMinute, l.Concurrent)
	if err != nil {
		return nil, fmt.Errorf("set limits of key %s: %w", idOrPrefix, err)
	}
	return k, nil
}

// SetKeyServiceTier replaces the default service tier of the key with this id or, failing
// that, the one key with this prefix, revoked or not, and returns it. The tier is stored as
// given: the caller names it as store.Key.ServiceTier says. store.ErrNotFound if no key
// matches, ErrAmbiguous if the prefix names more than one.
func (db *DB) SetKeyServiceTier(ctx context.Context, idOrPrefix, tier string) (*store.Key, error) {
	k, err := db.updateKey(ctx, idOrPrefix, `service_tier = ?`, tier)
	if err != nil {
		return nil, fmt.Errorf("set service tier of key %s: %w", idOrPrefix, err)
	}
	return k, nil
}

// updateKey runs UPDATE api_keys SET set (with args) on the key with this id or prefix (see
// keyID), and returns the key as it is then.
func (db *DB) updateKey(ctx context.Context, idOrPrefix, set string, args ...any) (*store.Key, error) {
	var k *store.Key
	err := db.write(ctx, func(tx *sql.Tx) error {
		id, err := db.keyID(ctx, tx, idOrPrefix)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, db.q(`UPDATE api_keys SET `+set+` WHERE id = ?`), append(args, id)...); err != nil {
			return err
		}
		k, err = scanKey(tx.QueryRowContext(ctx, db.q(`SELECT `+keyColumns+` FROM api_keys WHERE id = ?`), id))
		return err
	})
	return k, err
}

// keyID resolves an id or a prefix to one key's id.
func (db *DB) keyID(ctx context.Context, tx *sql.Tx, idOrPrefix string) (string, error) {
	var n int
	err := tx.QueryRowContext(ctx, db.q(`SELECT COUNT(*) FROM api_keys WHERE id = ?`), idOrPrefix).Scan(&n)
	if err != nil {
		return "", err
	}
	if n == 1 {
		return idOrPrefix, nil
	}
	rows, err := tx.QueryContext(ctx, db.q(`SELECT id FROM api_keys WHERE prefix = ? LIMIT 2`), idOrPrefix)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return "", err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	switch len(ids) {
	case 0:
		return "", store.ErrNotFound
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("prefix names more than one key, give the key's id: %w", ErrAmbiguous)
}

// scanKey reads one row of keyColumns.
func scanKey(row interface{ Scan(...any) error }) (*store.Key, error) {
	var (
		k       store.Key
		created int64
		revoked sql.NullInt64
		routing sql.NullString
		split   sql.NullString
		models  string
	)
	if err := row.Scan(&k.ID, &k.AccountID, &k.Kind, &k.Name, &k.Prefix, &k.Hash, &created, &revoked, &routing, &models,
		&k.Limits.RequestsPerMinute, &k.Limits.TokensPerMinute, &k.Limits.Concurrent, &k.ServiceTier, &split); err != nil {
		return nil, err
	}
	k.Routing, k.Split = fromJSONText(routing), fromJSONText(split)
	if models != "" {
		k.Models = strings.Split(models, ",")
	}
	k.CreatedAt = fromMillis(created)
	k.RevokedAt = fromNullMillis(revoked)
	return &k, nil
}
