package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// The web console's users, their roles and sessions (migrations 0006_users.sql).

// CreateUser stores a user with its roles; store.ErrConflict when the email (or the id) is
// taken, store.ErrNotFound when the account does not exist. The email is stored in lower case.
func (db *DB) CreateUser(ctx context.Context, u *store.User) error {
	email := strings.ToLower(u.Email)
	err := db.write(ctx, func(tx *sql.Tx) error {
		if _, err := db.txExec(ctx, tx, `INSERT INTO users (id, email, password_hash, account_id, lang, created_at)
VALUES (?, ?, ?, ?, ?, ?)`, u.ID, email, u.PasswordHash, u.AccountID, u.Lang, millis(u.CreatedAt)); err != nil {
			return dbError(err)
		}
		return db.insertRoles(ctx, tx, u.ID, u.Roles)
	})
	if err != nil {
		return fmt.Errorf("create user %s: %w", u.ID, err)
	}
	return nil
}

// insertRoles adds roles to a user, each once.
func (db *DB) insertRoles(ctx context.Context, tx *sql.Tx, userID string, roles []string) error {
	for _, role := range uniqueRoles(roles) {
		if _, err := db.txExec(ctx, tx, `INSERT INTO user_roles (user_id, role) VALUES (?, ?)`, userID, role); err != nil {
			return dbError(err)
		}
	}
	return nil
}

// uniqueRoles returns roles sorted, without duplicates or empty ones, as the store returns them.
func uniqueRoles(roles []string) []string {
	out := slices.DeleteFunc(slices.Clone(roles), func(r string) bool { return r == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// userSQL selects a user with its roles, one row per role (one row with a NULL role for a user
// without any), roles in order.
const userSQL = `SELECT u.id, u.email, u.password_hash, u.account_id, u.lang, u.created_at, r.role
FROM users u LEFT JOIN user_roles r ON r.user_id = u.id`

// UserByEmail finds a user by email, in any case; store.ErrNotFound.
func (db *DB) UserByEmail(ctx context.Context, email string) (*store.User, error) {
	u, err := db.scanUser(db.r.QueryContext(ctx, db.q(userSQL+` WHERE u.email = ? ORDER BY r.role`), strings.ToLower(email)))
	if err != nil {
		return nil, fmt.Errorf("user %q: %w", email, err)
	}
	return u, nil
}

// User finds a user by id; store.ErrNotFound.
func (db *DB) User(ctx context.Context, id string) (*store.User, error) {
	u, err := db.scanUser(db.r.QueryContext(ctx, db.q(userSQL+` WHERE u.id = ? ORDER BY r.role`), id))
	if err != nil {
		return nil, fmt.Errorf("user %s: %w", id, err)
	}
	return u, nil
}

// scanUser reads the rows of userSQL for one user; store.ErrNotFound when there are none.
func (db *DB) scanUser(rows *sql.Rows, err error) (*store.User, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var u *store.User
	for rows.Next() {
		var (
			row  store.User
			ms   int64
			role sql.NullString
		)
		if err := rows.Scan(&row.ID, &row.Email, &row.PasswordHash, &row.AccountID, &row.Lang, &ms, &role); err != nil {
			return nil, err
		}
		if u == nil {
			row.CreatedAt = fromMillis(ms)
			u = &row
		}
		if role.Valid {
			u.Roles = append(u.Roles, role.String)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if u == nil {
		return nil, store.ErrNotFound
	}
	return u, nil
}

// SetUserRoles replaces a user's roles; store.ErrNotFound if there is no such user.
func (db *DB) SetUserRoles(ctx context.Context, id string, roles []string) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		var got string
		if err := db.txQueryRow(ctx, tx, `SELECT id FROM users WHERE id = ?`+db.forUpdate(), id).Scan(&got); err != nil {
			return notFound(err)
		}
		if _, err := db.txExec(ctx, tx, `DELETE FROM user_roles WHERE user_id = ?`, id); err != nil {
			return err
		}
		return db.insertRoles(ctx, tx, id, roles)
	})
	if err != nil {
		return fmt.Errorf("set roles of user %s: %w", id, err)
	}
	return nil
}

// CreateWebSession stores a session, and forgets the user's sessions expired by its CreatedAt,
// so that a user's expired sessions do not pile up. store.ErrNotFound if there is no such user.
func (db *DB) CreateWebSession(ctx context.Context, s *store.WebSession) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		if _, err := db.txExec(ctx, tx, `DELETE FROM web_sessions WHERE user_id = ? AND expires_at <= ?`,
			s.UserID, millis(s.CreatedAt)); err != nil {
			return err
		}
		_, err := db.txExec(ctx, tx, `INSERT INTO web_sessions (hash, user_id, csrf, created_at, expires_at)
VALUES (?, ?, ?, ?, ?)`, s.Hash, s.UserID, s.CSRF, millis(s.CreatedAt), millis(s.ExpiresAt))
		return dbError(err)
	})
	if err != nil {
		return fmt.Errorf("create web session of user %s: %w", s.UserID, err)
	}
	return nil
}

// WebSession finds a session by its hash; store.ErrNotFound if there is none, or it expired at
// now.
func (db *DB) WebSession(ctx context.Context, hash []byte, now time.Time) (*store.WebSession, error) {
	s := store.WebSession{Hash: hash}
	var created, expires int64
	err := db.r.QueryRowContext(ctx, db.q(`SELECT user_id, csrf, created_at, expires_at FROM web_sessions
WHERE hash = ? AND expires_at > ?`), hash, millis(now)).Scan(&s.UserID, &s.CSRF, &created, &expires)
	if err != nil {
		return nil, fmt.Errorf("web session: %w", notFound(err))
	}
	s.CreatedAt, s.ExpiresAt = fromMillis(created), fromMillis(expires)
	return &s, nil
}

// DeleteWebSession removes a session (logging out). Removing one that is not there is not an
// error: the browser is logged out either way.
func (db *DB) DeleteWebSession(ctx context.Context, hash []byte) error {
	if _, err := db.w.ExecContext(ctx, db.q(`DELETE FROM web_sessions WHERE hash = ?`), hash); err != nil {
		return fmt.Errorf("delete web session: %w", err)
	}
	return nil
}

// UsageByDay sums an account's requests per UTC day and model since a time, oldest first and,
// within a day, by model. Every request counts, whatever its outcome; failed ones cost nothing.
func (db *DB) UsageByDay(ctx context.Context, accountID string, since time.Time) ([]store.UsageDay, error) {
	// The day's length is written into the query, as in Earnings: PostgreSQL cannot tell that
	// "created_at / $1" and "created_at / $3" group alike.
	const day = int64(24 * time.Hour / time.Millisecond)
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT created_at / 86400000 AS day, model, COUNT(*),
	CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT),
	CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT),
	CAST(COALESCE(SUM(cost), 0) AS BIGINT)
FROM usage WHERE account_id = ? AND created_at >= ?
GROUP BY created_at / 86400000, model ORDER BY day, model`), accountID, millis(since))
	if err != nil {
		return nil, fmt.Errorf("usage by day of %s: %w", accountID, err)
	}
	defer rows.Close()
	var out []store.UsageDay
	for rows.Next() {
		var (
			u    store.UsageDay
			d    int64
			cost int64
		)
		if err := rows.Scan(&d, &u.Model, &u.Requests, &u.PromptTokens, &u.CompletionTokens, &cost); err != nil {
			return nil, fmt.Errorf("usage by day of %s: %w", accountID, err)
		}
		u.Day, u.Cost = fromMillis(d*day), money.Nanos(cost)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage by day of %s: %w", accountID, err)
	}
	return out, nil
}
