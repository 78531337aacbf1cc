package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

const usageColumns = `request_id, account_id, key_id, model, node_id, endpoint, stream,
	prompt_tokens, completion_tokens, ttft_us, duration_us, outcome, error, created_at,
	cost, finish_reason, region, service_tier, queue_us, split`

// insertUsageSQL inserts one record; a request id already recorded keeps its first record.
const insertUsageSQL = `INSERT INTO usage (` + usageColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (request_id) DO NOTHING`

// addUsage adds a record's row of usageColumns.
func addUsage(rows *rows, u *store.Usage) {
	rows.add(u.RequestID, u.AccountID, u.KeyID, u.Model, u.NodeID, u.Endpoint, u.Stream,
		u.PromptTokens, u.CompletionTokens, micros(u.TTFT), micros(u.Duration),
		u.Outcome, u.Error, millis(u.CreatedAt), int64(u.Cost), u.FinishReason, u.Region,
		u.ServiceTier, micros(u.QueueTime), u.Split)
}

// InsertUsage records requests in one transaction. A request id already recorded keeps its
// first record.
func (db *DB) InsertUsage(ctx context.Context, us []*store.Usage) error {
	if len(us) == 0 {
		return nil
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, db.q(insertUsageSQL))
		if err != nil {
			return err
		}
		defer stmt.Close()
		row := newRows(1)
		for _, u := range us {
			row.args = row.args[:0]
			addUsage(&row, u)
			if _, err := stmt.ExecContext(ctx, row.args...); err != nil {
				return fmt.Errorf("request %s: %w", u.RequestID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("insert %d usage records: %w", len(us), err)
	}
	return nil
}

// UsageByRequest returns one request's record; store.ErrNotFound.
func (db *DB) UsageByRequest(ctx context.Context, requestID string) (*store.Usage, error) {
	u, err := scanUsage(db.r.QueryRowContext(ctx,
		db.q(`SELECT `+usageColumns+` FROM usage WHERE request_id = ?`), requestID))
	if err != nil {
		return nil, fmt.Errorf("usage of request %s: %w", requestID, notFound(err))
	}
	return u, nil
}

// Usages lists an account's records, newest first, at most limit; none if limit is not
// positive.
func (db *DB) Usages(ctx context.Context, accountID string, limit int) ([]*store.Usage, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT `+usageColumns+` FROM usage
WHERE account_id = ?
ORDER BY created_at DESC, request_id DESC
LIMIT ?`), accountID, limit)
	if err != nil {
		return nil, fmt.Errorf("usage of account %s: %w", accountID, err)
	}
	defer rows.Close()
	var us []*store.Usage
	for rows.Next() {
		u, err := scanUsage(rows)
		if err != nil {
			return nil, fmt.Errorf("usage of account %s: %w", accountID, err)
		}
		us = append(us, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage of account %s: %w", accountID, err)
	}
	return us, nil
}

// scanUsage reads one row of usageColumns.
func scanUsage(row interface{ Scan(...any) error }) (*store.Usage, error) {
	var (
		u                               store.Usage
		ttft, dur, created, cost, queue int64
	)
	if err := row.Scan(&u.RequestID, &u.AccountID, &u.KeyID, &u.Model, &u.NodeID, &u.Endpoint,
		&u.Stream, &u.PromptTokens, &u.CompletionTokens, &ttft, &dur, &u.Outcome, &u.Error,
		&created, &cost, &u.FinishReason, &u.Region, &u.ServiceTier, &queue, &u.Split); err != nil {
		return nil, err
	}
	u.Cost = money.Nanos(cost)
	u.TTFT = fromMicros(ttft)
	u.Duration = fromMicros(dur)
	u.QueueTime = fromMicros(queue)
	u.CreatedAt = fromMillis(created)
	return &u, nil
}
