package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/shareai/shareai/internal/store"
)

// The nodes' activity (store.Activity): sessions, days, telemetry, events and receipts. NodesOf
// is in node.go. The tables have no foreign keys (see migration 0004): a batch never fails
// because one of its records names a node the database does not know.

// StartNodeSession records a node's new connection; store.ErrConflict if its id is taken.
func (db *DB) StartNodeSession(ctx context.Context, s *store.NodeSession) error {
	_, err := db.w.ExecContext(ctx, db.q(`INSERT INTO node_sessions
(id, node_id, connected_at, last_seen, busy_us, ended) VALUES (?, ?, ?, ?, ?, ?)`),
		s.ID, s.NodeID, millis(s.ConnectedAt), millis(s.LastSeen), micros(s.Busy), s.Ended)
	if err != nil {
		return fmt.Errorf("start session %s of node %s: %w", s.ID, s.NodeID, dbError(err))
	}
	return nil
}

// UpdateNodeSessions records the sessions' LastSeen, Busy and Ended, in one transaction.
// Unknown ids are skipped, and so are ended sessions: a late update never reopens one.
func (db *DB) UpdateNodeSessions(ctx context.Context, ss []*store.NodeSession) error {
	if len(ss) == 0 {
		return nil
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, db.q(`UPDATE node_sessions
SET last_seen = ?, busy_us = ?, ended = ? WHERE id = ? AND NOT ended`))
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, s := range ss {
			if _, err := stmt.ExecContext(ctx, millis(s.LastSeen), micros(s.Busy), s.Ended, s.ID); err != nil {
				return fmt.Errorf("session %s: %w", s.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("update %d node sessions: %w", len(ss), err)
	}
	return nil
}

// EndOpenSessions ends the sessions a crash left open, at their LastSeen; it returns how many.
func (db *DB) EndOpenSessions(ctx context.Context) (int, error) {
	res, err := db.w.ExecContext(ctx, `UPDATE node_sessions SET ended = TRUE WHERE NOT ended`)
	if err != nil {
		return 0, fmt.Errorf("end open node sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("end open node sessions: %w", err)
	}
	return int(n), nil
}

// EndSessionsSeenBefore ends the open sessions last seen before a time, at their LastSeen.
func (db *DB) EndSessionsSeenBefore(ctx context.Context, before time.Time) (int, error) {
	res, err := db.w.ExecContext(ctx, db.q(`UPDATE node_sessions SET ended = TRUE WHERE NOT ended AND last_seen < ?`), millis(before))
	if err != nil {
		return 0, fmt.Errorf("end stale node sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("end stale node sessions: %w", err)
	}
	return int(n), nil
}

// NodeSessions lists a node's sessions that were online at or after since (whose LastSeen is
// not before it), oldest first.
func (db *DB) NodeSessions(ctx context.Context, nodeID string, since time.Time) ([]*store.NodeSession, error) {
	ss, err := queryAll(ctx, db.r, db.q(`SELECT id, node_id, connected_at, last_seen, busy_us, ended
FROM node_sessions WHERE node_id = ? AND last_seen >= ?
ORDER BY connected_at, id`), []any{nodeID, millis(since)},
		func(rows *sql.Rows) (*store.NodeSession, error) {
			var (
				s               store.NodeSession
				connected, seen int64
				busy            int64
			)
			if err := rows.Scan(&s.ID, &s.NodeID, &connected, &seen, &busy, &s.Ended); err != nil {
				return nil, err
			}
			s.ConnectedAt, s.LastSeen, s.Busy = fromMillis(connected), fromMillis(seen), fromMicros(busy)
			return &s, nil
		})
	if err != nil {
		return nil, fmt.Errorf("sessions of node %s: %w", nodeID, err)
	}
	return ss, nil
}

// dayStart is the midnight UTC that begins t's UTC day.
func dayStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// AddNodeDays adds the counts to the nodes' days, in one transaction. Each Day counts for the
// UTC day it falls in.
//
// Counts of the same node and day are summed here first, since PostgreSQL refuses a statement
// that updates a row twice, and the rows are written in key order, so that two writers lock
// them in the same order.
func (db *DB) AddNodeDays(ctx context.Context, days []store.NodeDay) error {
	if len(days) == 0 {
		return nil
	}
	type key struct {
		node string
		day  int64
	}
	sums := make(map[key]*store.NodeDay, len(days))
	for _, d := range days {
		k := key{d.NodeID, millis(dayStart(d.Day))}
		s := sums[k]
		if s == nil {
			s = &store.NodeDay{NodeID: d.NodeID}
			sums[k] = s
		}
		s.Jobs += d.Jobs
		s.Failed += d.Failed
		s.PromptTokens += d.PromptTokens
		s.CompletionTokens += d.CompletionTokens
	}
	keys := make([]key, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.node, b.node), cmp.Compare(a.day, b.day))
	})
	rows := newRows(len(keys))
	for _, k := range keys {
		s := sums[k]
		rows.add(k.node, k.day, s.Jobs, s.Failed, s.PromptTokens, s.CompletionTokens)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		return db.insertRows(ctx, tx,
			`INSERT INTO node_days (node_id, day, jobs, failed, prompt_tokens, completion_tokens)`,
			`ON CONFLICT (node_id, day) DO UPDATE SET
	jobs              = node_days.jobs + excluded.jobs,
	failed            = node_days.failed + excluded.failed,
	prompt_tokens     = node_days.prompt_tokens + excluded.prompt_tokens,
	completion_tokens = node_days.completion_tokens + excluded.completion_tokens`,
			rows, nil)
	})
	if err != nil {
		return fmt.Errorf("add %d node days: %w", len(days), err)
	}
	return nil
}

// NodeDays lists a node's days from since's UTC day on, oldest first.
func (db *DB) NodeDays(ctx context.Context, nodeID string, since time.Time) ([]store.NodeDay, error) {
	days, err := queryAll(ctx, db.r, db.q(`SELECT node_id, day, jobs, failed, prompt_tokens, completion_tokens
FROM node_days WHERE node_id = ? AND day >= ? ORDER BY day`), []any{nodeID, millis(dayStart(since))},
		func(rows *sql.Rows) (store.NodeDay, error) {
			var (
				d   store.NodeDay
				day int64
			)
			if err := rows.Scan(&d.NodeID, &day, &d.Jobs, &d.Failed, &d.PromptTokens, &d.CompletionTokens); err != nil {
				return d, err
			}
			d.Day = fromMillis(day)
			return d, nil
		})
	if err != nil {
		return nil, fmt.Errorf("days of node %s: %w", nodeID, err)
	}
	return days, nil
}

// InsertTelemetry records samples, in one transaction. A sample's At counts for the minute it
// falls in; a sample of a node and minute already recorded, or earlier in samples, is replaced.
func (db *DB) InsertTelemetry(ctx context.Context, samples []store.TelemetrySample) error {
	if len(samples) == 0 {
		return nil
	}
	type key struct {
		node string
		at   int64
	}
	// One row per node and minute, the last: PostgreSQL refuses to update a row twice in one
	// statement.
	last := make(map[key]int, len(samples))
	rows := newRows(len(samples))
	for _, s := range samples {
		k := key{s.NodeID, millis(s.At.Truncate(time.Minute))}
		if i, ok := last[k]; ok {
			rows.row(i)[2] = jsonText(s.Data)
			continue
		}
		last[k] = rows.len()
		rows.add(k.node, k.at, jsonText(s.Data))
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		return db.insertRows(ctx, tx, `INSERT INTO node_telemetry (node_id, at, data)`,
			`ON CONFLICT (node_id, at) DO UPDATE SET data = excluded.data`, rows, nil)
	})
	if err != nil {
		return fmt.Errorf("insert %d telemetry samples: %w", len(samples), err)
	}
	return nil
}

// Telemetry lists a node's samples at or after since, oldest first.
func (db *DB) Telemetry(ctx context.Context, nodeID string, since time.Time) ([]store.TelemetrySample, error) {
	ss, err := queryAll(ctx, db.r, db.q(`SELECT node_id, at, data FROM node_telemetry
WHERE node_id = ? AND at >= ? ORDER BY at`), []any{nodeID, millis(since)},
		func(rows *sql.Rows) (store.TelemetrySample, error) {
			var (
				s    store.TelemetrySample
				at   int64
				data sql.NullString
			)
			if err := rows.Scan(&s.NodeID, &at, &data); err != nil {
				return s, err
			}
			s.At, s.Data = fromMillis(at), fromJSONText(data)
			return s, nil
		})
	if err != nil {
		return nil, fmt.Errorf("telemetry of node %s: %w", nodeID, err)
	}
	return ss, nil
}

// PruneTelemetry deletes the samples older than before, of every node; it returns how many.
// It deletes in one statement, so prune often enough that each call finds little to delete.
func (db *DB) PruneTelemetry(ctx context.Context, before time.Time) (int, error) {
	res, err := db.w.ExecContext(ctx, db.q(`DELETE FROM node_telemetry WHERE at < ?`), millis(before))
	if err != nil {
		return 0, fmt.Errorf("prune telemetry before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune telemetry before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return int(n), nil
}

// AddNodeEvent records an event.
func (db *DB) AddNodeEvent(ctx context.Context, e *store.NodeEvent) error {
	_, err := db.w.ExecContext(ctx, db.q(`INSERT INTO node_events (node_id, at, kind, detail)
VALUES (?, ?, ?, ?)`), e.NodeID, millis(e.At), e.Kind, e.Detail)
	if err != nil {
		return fmt.Errorf("add %s event of node %s: %w", e.Kind, e.NodeID, err)
	}
	return nil
}

// NodeEvents lists a node's events, newest first (of events at the same time, the last
// recorded first), at most limit; none if limit is not positive.
func (db *DB) NodeEvents(ctx context.Context, nodeID string, limit int) ([]*store.NodeEvent, error) {
	if limit <= 0 {
		return nil, nil
	}
	es, err := queryAll(ctx, db.r, db.q(`SELECT node_id, at, kind, detail FROM node_events
WHERE node_id = ? ORDER BY at DESC, id DESC LIMIT ?`), []any{nodeID, limit},
		func(rows *sql.Rows) (*store.NodeEvent, error) {
			var (
				e  store.NodeEvent
				at int64
			)
			if err := rows.Scan(&e.NodeID, &at, &e.Kind, &e.Detail); err != nil {
				return nil, err
			}
			e.At = fromMillis(at)
			return &e, nil
		})
	if err != nil {
		return nil, fmt.Errorf("events of node %s: %w", nodeID, err)
	}
	return es, nil
}

// InsertReceipts stores receipts, in one transaction; a job's receipt stored already, or
// earlier in rs, is kept (a job serves one request: receipts are keyed by request and job).
func (db *DB) InsertReceipts(ctx context.Context, rs []*store.Receipt) error {
	if len(rs) == 0 {
		return nil
	}
	rows := newRows(len(rs))
	for _, r := range rs {
		addReceipt(&rows, r)
	}
	if err := db.write(ctx, func(tx *sql.Tx) error { return db.insertReceipts(ctx, tx, rows) }); err != nil {
		return fmt.Errorf("insert %d receipts: %w", len(rs), err)
	}
	return nil
}

// addReceipt adds a receipt's row for insertReceipts.
func addReceipt(rows *rows, r *store.Receipt) {
	rows.add(r.RequestID, r.JobID, r.NodeID, jsonText(r.Signed), millis(r.CreatedAt))
}

// insertReceipts inserts receipts' rows (addReceipt) in tx, keeping those stored already.
func (db *DB) insertReceipts(ctx context.Context, tx *sql.Tx, rows rows) error {
	if rows.len() == 0 {
		return nil
	}
	return db.insertRows(ctx, tx, `INSERT INTO receipts (request_id, job_id, node_id, data, created_at)`,
		`ON CONFLICT (request_id, job_id) DO NOTHING`, rows, nil)
}

// Receipts lists a request's receipts in the order of its jobs: by CreatedAt, then job id.
func (db *DB) Receipts(ctx context.Context, requestID string) ([]*store.Receipt, error) {
	rs, err := queryAll(ctx, db.r, db.q(`SELECT request_id, job_id, node_id, data, created_at
FROM receipts WHERE request_id = ? ORDER BY created_at, job_id`), []any{requestID},
		func(rows *sql.Rows) (*store.Receipt, error) {
			var (
				r       store.Receipt
				data    sql.NullString
				created int64
			)
			if err := rows.Scan(&r.RequestID, &r.JobID, &r.NodeID, &data, &created); err != nil {
				return nil, err
			}
			r.Signed, r.CreatedAt = fromJSONText(data), fromMillis(created)
			return &r, nil
		})
	if err != nil {
		return nil, fmt.Errorf("receipts of request %s: %w", requestID, err)
	}
	return rs, nil
}

// queryAll runs query, already rebound, on conn and reads every row with scan.
func queryAll[T any](ctx context.Context, conn *sql.DB, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	rows, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
