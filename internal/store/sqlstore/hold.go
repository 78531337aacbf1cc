package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// Holds and settlements come in batches that share one transaction, so that a busy coordinator
// pays for one commit (one disk flush) per batch. Every check of an item happens before its
// first write, so an item refused for a reason of its own (a limit, a hold already closed)
// writes nothing and leaves the others alone; an unexpected database error fails the batch.

// PlaceHold reserves h.Amount within the buyer's balance and spend caps.
func (db *DB) PlaceHold(ctx context.Context, h *store.Hold) error {
	return db.PlaceHolds(ctx, []*store.Hold{h})[0]
}

// PlaceHolds places holds in one transaction. A hold is checked against the balance and caps as
// the holds before it in the batch left them: SQLite's write transactions are exclusive, and on
// PostgreSQL each buyer's ledger row is locked before it is read, so holds of one account never
// interleave.
func (db *DB) PlaceHolds(ctx context.Context, hs []*store.Hold) []error {
	errs := make([]error, len(hs))
	err := db.write(ctx, func(tx *sql.Tx) error {
		clear(errs)
		for i, h := range hs {
			err := db.placeHold(ctx, tx, h)
			if le, ok := errors.AsType[*store.LimitError](err); ok {
				errs[i] = le
				continue
			}
			if errors.Is(err, store.ErrConflict) {
				errs[i] = fmt.Errorf("hold for request %s: %w", h.RequestID, err)
				continue
			}
			if err != nil {
				return fmt.Errorf("hold for request %s: %w", h.RequestID, err)
			}
		}
		return nil
	})
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

func (db *DB) placeHold(ctx context.Context, tx *sql.Tx, h *store.Hold) error {
	buyer := buyerAccount(h.AccountID)
	var balance, held int64
	err := tx.QueryRowContext(ctx, db.q(`SELECT balance, held FROM ledger_accounts WHERE id = ?`+db.forUpdate()), buyer).Scan(&balance, &held)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if avail := money.Nanos(balance - held); avail < h.Amount {
		return &store.LimitError{Available: max(avail, 0), Need: h.Amount}
	}
	// The caps of the key and the account, each with its current window's spending.
	at := h.CreatedAt
	rows, err := tx.QueryContext(ctx, db.q(`SELECT c.scope, c.period, c.limit_nanos, COALESCE(w.spent, 0), COALESCE(w.held, 0)
FROM spend_caps c LEFT JOIN spend_windows w ON w.scope = c.scope AND w.period = c.period AND w.window_start =
	CASE c.period WHEN 'daily' THEN CAST(? AS BIGINT) WHEN 'weekly' THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END
WHERE c.scope IN (?, ?)`),
		millis(store.WindowStart(store.Daily, at)), millis(store.WindowStart(store.Weekly, at)), millis(store.WindowStart(store.Monthly, at)),
		store.KeyScope(h.KeyID), store.AccountScope(h.AccountID))
	if err != nil {
		return err
	}
	var ws []window
	for rows.Next() {
		var c store.Cap
		var limit, spent, wheld int64
		if err := rows.Scan(&c.Scope, &c.Period, &limit, &spent, &wheld); err != nil {
			rows.Close()
			return err
		}
		c.Limit = money.Nanos(limit)
		if left := c.Limit - money.Nanos(spent+wheld); left < h.Amount {
			rows.Close()
			return &store.LimitError{Cap: &c, Available: max(left, 0), Need: h.Amount, ResetsAt: store.WindowEnd(c.Period, at)}
		}
		ws = append(ws, window{c.Scope, c.Period, millis(store.WindowStart(c.Period, at))})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, db.q(`INSERT INTO holds (request_id, account_id, key_id, amount, windows, status, created_at)
VALUES (?, ?, ?, ?, ?, 'open', ?) ON CONFLICT (request_id) DO NOTHING`),
		h.RequestID, h.AccountID, h.KeyID, int64(h.Amount), formatWindows(ws), millis(at))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return store.ErrConflict
	}
	if _, err := tx.ExecContext(ctx, db.q(`UPDATE ledger_accounts SET held = held + ? WHERE id = ?`), int64(h.Amount), buyer); err != nil {
		return err
	}
	for _, w := range ws {
		if _, err := tx.ExecContext(ctx, db.q(`INSERT INTO spend_windows (scope, period, window_start, held) VALUES (?, ?, ?, ?)
ON CONFLICT (scope, period, window_start) DO UPDATE SET held = spend_windows.held + excluded.held`),
			w.scope, w.period, w.start, int64(h.Amount)); err != nil {
			return err
		}
	}
	return nil
}

// batchTotals gathers a settlement batch's changes to shared rows, applied once at the end of
// the batch.
type batchTotals struct {
	balance map[string]money.Nanos // ledger account → change of balance
	held    map[string]money.Nanos // buyer ledger account → change of held
	spent   map[window][2]money.Nanos
	exists  map[string]bool // ledger accounts known to exist in this transaction
}

// ensure makes sure a ledger account exists before entries refer to it, once per batch.
func (db *DB) ensure(ctx context.Context, tx *sql.Tx, t *batchTotals, id, owner, kind string) error {
	if t.exists[id] {
		return nil
	}
	if err := db.ensureAccount(ctx, tx, id, owner, kind); err != nil {
		return err
	}
	t.exists[id] = true
	return nil
}

// Settle closes holds in one transaction.
func (db *DB) Settle(ctx context.Context, batch []*store.Settlement) []error {
	errs := make([]error, len(batch))
	err := db.write(ctx, func(tx *sql.Tx) error {
		clear(errs)
		t := batchTotals{
			balance: map[string]money.Nanos{},
			held:    map[string]money.Nanos{}, spent: map[window][2]money.Nanos{}, exists: map[string]bool{},
		}
		for i, s := range batch {
			err := db.settle(ctx, tx, s, &t)
			var refused *refusal
			if errors.As(err, &refused) {
				errs[i] = refused.err
				continue
			}
			if err != nil {
				return fmt.Errorf("settle request %s: %w", s.RequestID, err)
			}
		}
		return db.applyTotals(ctx, tx, &t)
	})
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// refusal is a settlement refused before it wrote anything.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }

func (db *DB) settle(ctx context.Context, tx *sql.Tx, s *store.Settlement, t *batchTotals) error {
	var (
		accountID, windows, status string
		amount                     int64
	)
	err := tx.QueryRowContext(ctx, db.q(`SELECT account_id, amount, windows, status FROM holds WHERE request_id = ?`+db.forUpdate()),
		s.RequestID).Scan(&accountID, &amount, &windows, &status)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return &refusal{fmt.Errorf("settle request %s: %w", s.RequestID, store.ErrNotFound)}
		}
		return err
	}
	if status != "open" {
		return &refusal{fmt.Errorf("settle request %s: %w", s.RequestID, store.ErrClosed)}
	}
	var earned money.Nanos
	for _, p := range s.Parts {
		if p.Earned < 0 {
			return &refusal{fmt.Errorf("settle request %s: negative earnings for node %s", s.RequestID, p.NodeID)}
		}
		earned += p.Earned
	}
	switch {
	case s.Fee < 0 || s.Debit != earned+s.Fee:
		return &refusal{fmt.Errorf("settle request %s: debit %d is not earnings %d plus fee %d", s.RequestID, s.Debit, earned, s.Fee)}
	case s.Debit > money.Nanos(amount):
		return &refusal{fmt.Errorf("settle request %s: debit %d exceeds the hold of %d", s.RequestID, s.Debit, amount)}
	}
	ws, err := parseWindows(windows)
	if err != nil {
		return &refusal{err}
	}

	closed := "settled"
	if s.Debit == 0 {
		closed = "voided"
	}
	if _, err := tx.ExecContext(ctx, db.q(`UPDATE holds SET status = ?, closed_at = ? WHERE request_id = ?`), closed, millis(s.At), s.RequestID); err != nil {
		return err
	}
	buyer := buyerAccount(accountID)
	t.held[buyer] -= money.Nanos(amount)
	for _, w := range ws {
		d := t.spent[w]
		t.spent[w] = [2]money.Nanos{d[0] + s.Debit, d[1] - money.Nanos(amount)}
	}
	if s.Debit > 0 {
		txn := "settle:" + s.RequestID
		if _, err := tx.ExecContext(ctx, db.q(`INSERT INTO ledger_txns (id, kind, ref, created_at) VALUES (?, 'settle', ?, ?)`), txn, s.RequestID, millis(s.At)); err != nil {
			return err
		}
		// One statement for all the entries: the buyer's debit, each node's earnings, the fee.
		var q strings.Builder
		q.WriteString(`INSERT INTO ledger_entries (txn_id, account, amount, node_id, release_at, created_at) VALUES (?, ?, ?, NULL, NULL, ?)`)
		args := []any{txn, buyer, -int64(s.Debit), millis(s.At)}
		t.balance[buyer] -= s.Debit
		for _, p := range s.Parts {
			if p.Earned == 0 {
				continue
			}
			acct := pendingAccount(p.ProviderID)
			if err := db.ensure(ctx, tx, t, acct, p.ProviderID, "pending"); err != nil {
				return err
			}
			q.WriteString(`, (?, ?, ?, ?, ?, ?)`)
			args = append(args, txn, acct, int64(p.Earned), p.NodeID, nullMillis(s.ReleaseAt), millis(s.At))
			t.balance[acct] += p.Earned
		}
		if s.Fee > 0 {
			if err := db.ensure(ctx, tx, t, feesAccount, "", "fees"); err != nil {
				return err
			}
			q.WriteString(`, (?, ?, ?, NULL, NULL, ?)`)
			args = append(args, txn, feesAccount, int64(s.Fee), millis(s.At))
			t.balance[feesAccount] += s.Fee
		}
		if _, err := tx.ExecContext(ctx, db.q(q.String()), args...); err != nil {
			return err
		}
	}
	if s.Usage != nil {
		if _, err := tx.ExecContext(ctx, db.q(insertUsageSQL), usageArgs(s.Usage)...); err != nil {
			return fmt.Errorf("record usage: %w", err)
		}
	}
	return nil
}

// applyTotals writes a batch's changes to shared rows, in a fixed order of rows so that
// concurrent batches (several coordinators) cannot deadlock.
func (db *DB) applyTotals(ctx context.Context, tx *sql.Tx, t *batchTotals) error {
	accounts := make([]string, 0, len(t.balance)+len(t.held))
	for a := range t.balance {
		accounts = append(accounts, a)
	}
	for a := range t.held {
		if _, ok := t.balance[a]; !ok {
			accounts = append(accounts, a)
		}
	}
	slices.Sort(accounts)
	for _, a := range accounts {
		bal, held := t.balance[a], t.held[a]
		if bal == 0 && held == 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, db.q(`UPDATE ledger_accounts SET balance = balance + ?, held = held + ? WHERE id = ?`),
			int64(bal), int64(held), a); err != nil {
			return err
		}
	}
	wins := make([]window, 0, len(t.spent))
	for w := range t.spent {
		wins = append(wins, w)
	}
	slices.SortFunc(wins, func(a, b window) int {
		return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.period, b.period), cmp.Compare(a.start, b.start))
	})
	for _, w := range wins {
		d := t.spent[w]
		if _, err := tx.ExecContext(ctx, db.q(`UPDATE spend_windows SET spent = spent + ?, held = held + ?
WHERE scope = ? AND period = ? AND window_start = ?`), int64(d[0]), int64(d[1]), w.scope, w.period, w.start); err != nil {
			return err
		}
	}
	return nil
}
