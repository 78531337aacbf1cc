package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shareai/shareai/internal/store"
)

// Replicas' leases and the holds they own (docs/architecture.md, "Money"). A replica renews
// its lease while it runs; a replica whose lease has expired, or that has none, is dead, and
// its open holds are for a live replica to claim and close. Claiming moves the holds to the
// claimer with an UPDATE of open_holds.replica that locks each row: of two replicas claiming the
// same dead replica's holds at once, the second finds each row moved when the first commits
// (PostgreSQL re-checks the WHERE of a row it waited for), so every hold is claimed once.

// RenewLease records that replica is alive until expires.
func (db *DB) RenewLease(ctx context.Context, replica string, now, expires time.Time) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := db.txExec(ctx, tx, `INSERT INTO replica_leases (replica, expires_at, updated) VALUES (?, ?, ?)
ON CONFLICT (replica) DO UPDATE SET expires_at = excluded.expires_at, updated = excluded.updated`,
			replica, millis(expires), millis(now))
		return err
	})
	if err != nil {
		return fmt.Errorf("renew lease of replica %s: %w", replica, err)
	}
	return nil
}

// ReleaseLease deletes a replica's lease.
func (db *DB) ReleaseLease(ctx context.Context, replica string) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := db.txExec(ctx, tx, `DELETE FROM replica_leases WHERE replica = ?`, replica)
		return err
	})
	if err != nil {
		return fmt.Errorf("release lease of replica %s: %w", replica, err)
	}
	return nil
}

// ClaimHolds moves to replica the open holds of dead replicas (and with own, its own and the
// unowned ones), and returns them.
//
// Locking, on PostgreSQL: a dead replica's lease row, then its holds' rows, one replica at a
// time in the order of their names. A settlement locks holds and then ledger rows, never a
// lease, so the orders never cross.
func (db *DB) ClaimHolds(ctx context.Context, replica string, now time.Time, own bool) ([]*store.Hold, error) {
	var hs []*store.Hold
	err := db.writeRetrying(ctx, false, func(tx *sql.Tx) error {
		hs = hs[:0]
		if err := db.writeAllPending(ctx, tx); err != nil { // claimed from their rows
			return err
		}
		var dead []string
		err := db.queryEach(ctx, tx, `SELECT DISTINCT h.replica FROM open_holds h
WHERE h.replica <> '' AND h.replica <> ?
	AND NOT EXISTS (SELECT 1 FROM replica_leases l WHERE l.replica = h.replica AND l.expires_at >= ?)`,
			[]any{replica, millis(now)}, func(r *sql.Rows) error {
				var d string
				err := r.Scan(&d)
				dead = append(dead, d)
				return err
			})
		if err != nil {
			return err
		}
		slices.Sort(dead)
		var from []string
		for _, d := range dead {
			// Take the lease over, unless the replica renewed it meanwhile.
			var expires int64
			err := db.txQueryRow(ctx, tx, `SELECT expires_at FROM replica_leases WHERE replica = ?`+db.forUpdate(), d).Scan(&expires)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return err
			case expires >= millis(now):
				continue // alive after all
			default:
				if _, err := db.txExec(ctx, tx, `DELETE FROM replica_leases WHERE replica = ?`, d); err != nil {
					return err
				}
			}
			from = append(from, d)
		}
		if own {
			from = append(from, "", replica)
		}
		for _, f := range from {
			err := db.queryEach(ctx, tx, `UPDATE open_holds SET replica = ? WHERE replica = ?
RETURNING `+holdColumns, []any{replica, f}, func(r *sql.Rows) error {
				h, err := scanHold(r)
				if err == nil {
					hs = append(hs, h)
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim holds for replica %s: %w", replica, err)
	}
	slices.SortStableFunc(hs, func(a, b *store.Hold) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return hs, nil
}

// Postgres reports whether the database is PostgreSQL, which other processes (other
// coordinator replicas) may share; a SQLite file is one process's.
func (db *DB) Postgres() bool { return db.dialect == postgresDialect }
