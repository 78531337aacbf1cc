package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// NodeAskSchedule returns the ask schedule set for a node in the console, or "".
func (db *DB) NodeAskSchedule(ctx context.Context, nodeID string) (string, error) {
	var s string
	err := db.r.QueryRowContext(ctx, db.q(`SELECT schedule FROM node_ask_schedules WHERE node_id = ?`), nodeID).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("ask schedule of node %s: %w", nodeID, err)
	}
	return s, nil
}

// SetNodeAskSchedule sets a node's ask schedule; "" clears it.
func (db *DB) SetNodeAskSchedule(ctx context.Context, nodeID, schedule string, at time.Time) error {
	var err error
	if schedule == "" {
		_, err = db.w.ExecContext(ctx, db.q(`DELETE FROM node_ask_schedules WHERE node_id = ?`), nodeID)
	} else {
		_, err = db.w.ExecContext(ctx, db.q(`INSERT INTO node_ask_schedules (node_id, schedule, updated_at) VALUES (?, ?, ?)
ON CONFLICT (node_id) DO UPDATE SET schedule = excluded.schedule, updated_at = excluded.updated_at`), nodeID, schedule, millis(at))
	}
	if err != nil {
		return fmt.Errorf("set ask schedule of node %s: %w", nodeID, err)
	}
	return nil
}

// EarningsByAsk sums a provider's earnings since a time by the ask they were billed at, over
// the entries Earnings sums: those of its pending account that name a node.
func (db *DB) EarningsByAsk(ctx context.Context, accountID string, since time.Time) ([]store.AskEarning, error) {
	// surge_bp 0 (entries from before surge) is ×1, as 10000 is.
	es, err := queryAll(ctx, db.r, db.q(`SELECT ask_window, surge, COUNT(*), CAST(COALESCE(SUM(amount), 0) AS BIGINT)
FROM (SELECT ask_window, CASE WHEN surge_bp = 0 THEN 10000 ELSE surge_bp END AS surge, amount FROM ledger_entries
	WHERE account = ? AND node_id IS NOT NULL AND created_at >= ?) e
GROUP BY ask_window, surge ORDER BY 4 DESC, ask_window, surge`), []any{pendingAccount(accountID), millis(since)},
		func(rows *sql.Rows) (store.AskEarning, error) {
			var e store.AskEarning
			var earned int64
			if err := rows.Scan(&e.Window, &e.Surge, &e.Parts, &earned); err != nil {
				return e, err
			}
			e.Earned = money.Nanos(earned)
			return e, nil
		})
	if err != nil {
		return nil, fmt.Errorf("earnings by ask of %s: %w", accountID, err)
	}
	return es, nil
}
