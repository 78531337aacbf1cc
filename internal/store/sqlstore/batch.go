package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/store"
)

// Files, batches and their lines (docs/architecture.md, "Batches"). A batch is run by one
// replica at a time, its runner: every write of the runner's (a line started, a batch ended)
// is conditional on its still being the runner, and a line's result on the line's still
// running under the attempt that wrote it, so that a replica that lost the batch to a peer
// writes nothing more of it.

const fileColumns = `id, account_id, purpose, filename, bytes, created_at, path`

func scanFile(row interface{ Scan(...any) error }) (*store.File, error) {
	var f store.File
	var created int64
	if err := row.Scan(&f.ID, &f.AccountID, &f.Purpose, &f.Filename, &f.Bytes, &created, &f.Path); err != nil {
		return nil, err
	}
	f.CreatedAt = fromMillis(created)
	return &f, nil
}

// CreateFile stores a file and its content.
func (db *DB) CreateFile(ctx context.Context, f *store.File, content []byte) error {
	err := db.write(ctx, func(tx *sql.Tx) error { return db.insertFile(ctx, tx, f, content) })
	if err != nil {
		return fmt.Errorf("create file %s: %w", f.ID, dbError(err))
	}
	return nil
}

func (db *DB) insertFile(ctx context.Context, tx *sql.Tx, f *store.File, content []byte) error {
	var c any
	if f.Path == "" {
		c = content
		if content == nil {
			c = []byte{}
		}
	}
	_, err := db.txExec(ctx, tx, `INSERT INTO files (`+fileColumns+`, content) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		f.ID, f.AccountID, f.Purpose, f.Filename, f.Bytes, millis(f.CreatedAt), f.Path, c)
	return err
}

// FileByID returns an account's file.
func (db *DB) FileByID(ctx context.Context, accountID, id string) (*store.File, error) {
	f, err := scanFile(db.r.QueryRowContext(ctx, db.q(`SELECT `+fileColumns+` FROM files WHERE id = ? AND account_id = ?`), id, accountID))
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", id, notFound(err))
	}
	return f, nil
}

// Files lists an account's files, newest first.
func (db *DB) Files(ctx context.Context, accountID, purpose, after string, limit int) ([]*store.File, error) {
	fs, err := queryAll(ctx, db.r, db.q(`SELECT `+fileColumns+` FROM files
WHERE account_id = ? AND (? = '' OR purpose = ?)
	AND (? = '' OR (created_at, id) < (SELECT created_at, id FROM files WHERE id = ? AND account_id = ?))
ORDER BY created_at DESC, id DESC LIMIT ?`), []any{accountID, purpose, purpose, after, after, accountID, limit},
		func(r *sql.Rows) (*store.File, error) { return scanFile(r) })
	if err != nil {
		return nil, fmt.Errorf("files of %s: %w", accountID, err)
	}
	return fs, nil
}

// FileContent opens the content of a file kept in the database.
func (db *DB) FileContent(ctx context.Context, accountID, id string) (io.ReadCloser, error) {
	var content []byte
	err := db.r.QueryRowContext(ctx, db.q(`SELECT content FROM files WHERE id = ? AND account_id = ? AND content IS NOT NULL`), id, accountID).Scan(&content)
	if err != nil {
		return nil, fmt.Errorf("content of file %s: %w", id, notFound(err))
	}
	return io.NopCloser(bytes.NewReader(content)), nil
}

// DeleteFile deletes an account's file.
func (db *DB) DeleteFile(ctx context.Context, accountID, id string) (*store.File, error) {
	var f *store.File
	err := db.write(ctx, func(tx *sql.Tx) error {
		var err error
		f, err = scanFile(db.txQueryRow(ctx, tx, `DELETE FROM files WHERE id = ? AND account_id = ? RETURNING `+fileColumns, id, accountID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete file %s: %w", id, notFound(err))
	}
	return f, nil
}

const batchColumns = `id, account_id, key_id, endpoint, input_file_id, completion_window, status, errors, metadata,
	output_file_id, error_file_id, total, runner, created_at, in_progress_at, expires_at, finalizing_at, completed_at,
	failed_at, expired_at, cancelling_at, cancelled_at`

func scanBatch(row interface{ Scan(...any) error }) (*store.Batch, error) {
	var (
		b          store.Batch
		errs, meta string
		ts         [9]int64
	)
	times := [9]*time.Time{&b.CreatedAt, &b.InProgressAt, &b.ExpiresAt, &b.FinalizingAt, &b.CompletedAt, &b.FailedAt, &b.ExpiredAt, &b.CancellingAt, &b.CancelledAt}
	if err := row.Scan(&b.ID, &b.AccountID, &b.KeyID, &b.Endpoint, &b.InputFileID, &b.CompletionWindow, &b.Status, &errs, &meta,
		&b.OutputFileID, &b.ErrorFileID, &b.Total, &b.Runner, &ts[0], &ts[1], &ts[2], &ts[3], &ts[4], &ts[5], &ts[6], &ts[7], &ts[8]); err != nil {
		return nil, err
	}
	for i, t := range times {
		*t = fromMillisOrZero(ts[i])
	}
	if errs != "" {
		b.Errors = []byte(errs)
	}
	if meta != "" {
		b.Metadata = []byte(meta)
	}
	return &b, nil
}

// millisOrZero is millis with the zero time as 0; fromMillisOrZero reads it back.
func millisOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return millis(t)
}

func fromMillisOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return fromMillis(ms)
}

// CreateBatch stores a batch and its lines in one transaction.
func (db *DB) CreateBatch(ctx context.Context, b *store.Batch, lines []*store.BatchLine) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := db.txExec(ctx, tx, `INSERT INTO batches (`+batchColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			b.ID, b.AccountID, b.KeyID, b.Endpoint, b.InputFileID, b.CompletionWindow, b.Status, string(b.Errors), string(b.Metadata),
			b.OutputFileID, b.ErrorFileID, b.Total, b.Runner, millis(b.CreatedAt), millisOrZero(b.InProgressAt), millis(b.ExpiresAt),
			millisOrZero(b.FinalizingAt), millisOrZero(b.CompletedAt), millisOrZero(b.FailedAt), millisOrZero(b.ExpiredAt),
			millisOrZero(b.CancellingAt), millisOrZero(b.CancelledAt))
		if err != nil {
			return err
		}
		rows := newRows(len(lines))
		for _, l := range lines {
			rows.add(b.ID, l.Line, l.CustomID, string(l.Body))
		}
		if rows.len() == 0 {
			return nil
		}
		return db.insertRows(ctx, tx, `INSERT INTO batch_lines (batch_id, line, custom_id, body)`, ``, rows, nil)
	})
	if err != nil {
		return fmt.Errorf("create batch %s: %w", b.ID, dbError(err))
	}
	return nil
}

// BatchByID returns an account's batch, with its counts.
func (db *DB) BatchByID(ctx context.Context, accountID, id string) (*store.Batch, error) {
	b, err := scanBatch(db.r.QueryRowContext(ctx, db.q(`SELECT `+batchColumns+` FROM batches WHERE id = ? AND (? = '' OR account_id = ?)`), id, accountID, accountID))
	if err != nil {
		return nil, fmt.Errorf("batch %s: %w", id, notFound(err))
	}
	if err := db.countLines(ctx, b); err != nil {
		return nil, err
	}
	return b, nil
}

// countLines reads a batch's counts of ended lines.
func (db *DB) countLines(ctx context.Context, b *store.Batch) error {
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT status, COUNT(*) FROM batch_lines WHERE batch_id = ? AND status IN ('done', 'failed') GROUP BY status`), b.ID)
	if err != nil {
		return fmt.Errorf("count lines of batch %s: %w", b.ID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return fmt.Errorf("count lines of batch %s: %w", b.ID, err)
		}
		if status == store.LineDone {
			b.Counts.Completed = n
		} else {
			b.Counts.Failed = n
		}
	}
	return rows.Err()
}

// ListBatches lists an account's batches, newest first.
func (db *DB) ListBatches(ctx context.Context, accountID, after string, limit int) ([]*store.Batch, error) {
	bs, err := queryAll(ctx, db.r, db.q(`SELECT `+batchColumns+` FROM batches
WHERE account_id = ?
	AND (? = '' OR (created_at, id) < (SELECT created_at, id FROM batches WHERE id = ? AND account_id = ?))
ORDER BY created_at DESC, id DESC LIMIT ?`), []any{accountID, after, after, accountID, limit},
		func(r *sql.Rows) (*store.Batch, error) { return scanBatch(r) })
	if err != nil {
		return nil, fmt.Errorf("batches of %s: %w", accountID, err)
	}
	for _, b := range bs {
		if err := db.countLines(ctx, b); err != nil {
			return nil, err
		}
	}
	return bs, nil
}

// CancelBatch moves an account's batch to cancelling.
func (db *DB) CancelBatch(ctx context.Context, accountID, id string, at time.Time) (*store.Batch, error) {
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := db.txExec(ctx, tx, `UPDATE batches SET status = 'cancelling', cancelling_at = ?
WHERE id = ? AND account_id = ? AND status IN ('validating', 'in_progress')`, millis(at), id, accountID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cancel batch %s: %w", id, err)
	}
	return db.BatchByID(ctx, accountID, id)
}

// ClaimBatches makes replica the runner of the batches to run that no live replica runs.
//
// On PostgreSQL the UPDATE locks each row it changes: of two replicas claiming a batch at once,
// the second re-checks the row once the first commits, finds the first's live lease, and
// leaves it.
func (db *DB) ClaimBatches(ctx context.Context, replica string, now time.Time) ([]*store.Batch, error) {
	var bs []*store.Batch
	err := db.write(ctx, func(tx *sql.Tx) error {
		bs = bs[:0]
		return db.queryEach(ctx, tx, `UPDATE batches SET runner = ?
WHERE status IN ('in_progress', 'cancelling', 'finalizing')
	AND (runner = '' OR runner = ?
		OR NOT EXISTS (SELECT 1 FROM replica_leases l WHERE l.replica = batches.runner AND l.expires_at >= ?))
RETURNING `+batchColumns, []any{replica, replica, millis(now)}, func(r *sql.Rows) error {
			b, err := scanBatch(r)
			if err == nil {
				bs = append(bs, b)
			}
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("claim batches for replica %s: %w", replica, err)
	}
	slices.SortFunc(bs, func(a, b *store.Batch) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return bs, nil
}

// BatchLines lists a batch's lines of the given states, in line order.
func (db *DB) BatchLines(ctx context.Context, batchID string, from, limit int, states ...string) ([]*store.BatchLine, error) {
	if len(states) == 0 {
		states = []string{store.LinePending, store.LineRunning, store.LineDone, store.LineFailed}
	}
	// The states as one argument: a constant query text, whatever the states asked.
	ls, err := queryAll(ctx, db.r, db.q(`SELECT line, custom_id, body, status, request_id, tries, result FROM batch_lines
WHERE batch_id = ? AND line >= ? AND ? LIKE ('%,' || status || ',%')
ORDER BY line LIMIT ?`), []any{batchID, from, "," + strings.Join(states, ",") + ",", limit},
		func(r *sql.Rows) (*store.BatchLine, error) {
			l := store.BatchLine{BatchID: batchID}
			var body, result string
			if err := r.Scan(&l.Line, &l.CustomID, &body, &l.Status, &l.RequestID, &l.Tries, &result); err != nil {
				return nil, err
			}
			l.Body = []byte(body)
			if result != "" {
				l.Result = []byte(result)
			}
			return &l, nil
		})
	if err != nil {
		return nil, fmt.Errorf("lines of batch %s: %w", batchID, err)
	}
	return ls, nil
}

// StartLine starts an attempt of a line.
func (db *DB) StartLine(ctx context.Context, replica, batchID string, line int, requestID string) (int, error) {
	var tries int
	err := db.write(ctx, func(tx *sql.Tx) error {
		return db.txQueryRow(ctx, tx, `UPDATE batch_lines SET status = 'running', request_id = ?, tries = tries + 1
WHERE batch_id = ? AND line = ? AND status IN ('pending', 'running')
	AND EXISTS (SELECT 1 FROM batches WHERE id = ? AND runner = ?)
RETURNING tries`, requestID, batchID, line, batchID, replica).Scan(&tries)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("start line %d of batch %s: %w", line, batchID, store.ErrStale)
	}
	if err != nil {
		return 0, fmt.Errorf("start line %d of batch %s: %w", line, batchID, err)
	}
	return tries, nil
}

// StartLines starts attempts of many lines of a batch in one transaction.
func (db *DB) StartLines(ctx context.Context, replica, batchID string, lines []int, requestIDs []string) ([]int, error) {
	tries := make([]int, len(lines))
	err := db.write(ctx, func(tx *sql.Tx) error {
		clear(tries)
		var runner string
		err := db.txQueryRow(ctx, tx, `SELECT runner FROM batches WHERE id = ?`+db.forUpdate(), batchID).Scan(&runner)
		switch {
		case errors.Is(err, sql.ErrNoRows) || err == nil && runner != replica:
			return store.ErrStale
		case err != nil:
			return err
		}
		for i, l := range lines {
			err := db.txQueryRow(ctx, tx, `UPDATE batch_lines SET status = 'running', request_id = ?, tries = tries + 1
WHERE batch_id = ? AND line = ? AND status IN ('pending', 'running') RETURNING tries`, requestIDs[i], batchID, l).Scan(&tries[i])
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("start %d lines of batch %s: %w", len(lines), batchID, err)
	}
	return tries, nil
}

// FinishLine writes a line's result, for an attempt that settled nothing.
func (db *DB) FinishLine(ctx context.Context, r *store.LineResult) error {
	var ok bool
	err := db.write(ctx, func(tx *sql.Tx) error {
		var err error
		ok, err = db.finishLine(ctx, tx, r)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("finish line %d of batch %s: %w", r.Line, r.BatchID, err)
	case !ok:
		return fmt.Errorf("finish line %d of batch %s: %w", r.Line, r.BatchID, store.ErrStale)
	}
	return nil
}

// finishLine writes a line's result in tx if the line runs under r.RequestID, and says
// whether it did.
func (db *DB) finishLine(ctx context.Context, tx *sql.Tx, r *store.LineResult) (bool, error) {
	status := store.LineDone
	if r.Failed {
		status = store.LineFailed
	}
	res, err := db.txExec(ctx, tx, `UPDATE batch_lines SET status = ?, result = ?
WHERE batch_id = ? AND line = ? AND status = 'running' AND request_id = ?`, status, string(r.Result), r.BatchID, r.Line, r.RequestID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// statusColumns are the time columns batches' statuses set.
var statusColumns = map[string]string{
	store.BatchFinalizing: "finalizing_at", store.BatchCompleted: "completed_at", store.BatchFailed: "failed_at",
	store.BatchExpired: "expired_at", store.BatchCancelled: "cancelled_at", store.BatchInProgress: "in_progress_at",
}

// SetBatchStatus moves a batch that replica runs to a status.
func (db *DB) SetBatchStatus(ctx context.Context, replica, batchID, status string, at time.Time) error {
	col, ok := statusColumns[status]
	if !ok {
		return fmt.Errorf("set status of batch %s: unknown status %q", batchID, status)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := db.txExec(ctx, tx, `UPDATE batches SET status = ?, `+col+` = ? WHERE id = ? AND runner = ?`, status, millis(at), batchID, replica)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return cmpErr(err, store.ErrStale)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set status of batch %s: %w", batchID, err)
	}
	return nil
}

// FinishBatch ends a batch with its output and error files, in one transaction.
func (db *DB) FinishBatch(ctx context.Context, replica, batchID, status string, at time.Time, output, errFile *store.File, outputContent, errContent []byte) error {
	col, ok := statusColumns[status]
	if !ok {
		return fmt.Errorf("finish batch %s: unknown status %q", batchID, status)
	}
	var outID, errID string
	if output != nil {
		outID = output.ID
	}
	if errFile != nil {
		errID = errFile.ID
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := db.txExec(ctx, tx, `UPDATE batches SET status = ?, `+col+` = ?, output_file_id = ?, error_file_id = ?
WHERE id = ? AND runner = ? AND status IN ('in_progress', 'cancelling', 'finalizing')`, status, millis(at), outID, errID, batchID, replica)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return cmpErr(err, store.ErrStale)
		}
		if output != nil {
			if err := db.insertFile(ctx, tx, output, outputContent); err != nil {
				return err
			}
		}
		if errFile != nil {
			return db.insertFile(ctx, tx, errFile, errContent)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finish batch %s: %w", batchID, err)
	}
	return nil
}

// cmpErr is err, or else fallback.
func cmpErr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}
