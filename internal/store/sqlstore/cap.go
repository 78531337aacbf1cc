package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// Spend caps. A window's spending lives in spend_windows, and holds and settlements keep it up
// to date for the windows each hold counts in (open_holds.windows): those of the caps that
// existed when it was placed. So that a cap set or changed mid-window counts what was spent before it,
// SetCap counts the cap's current window again from the ledger, in the transaction that sets
// the cap: the settled debits of the scope's holds created in the window, and the amounts of
// its open holds, which from then on count in the window too. The hot path (PlaceHolds,
// Settle) does no more than before.

// capAttempts bounds how often SetCap counts a window again while settlements keep it from
// adding the window to open holds (PostgreSQL only; see SetCap).
const capAttempts = 10

// settleSlack is how long before its hold's creation a settlement may be recorded (a clock
// stepped back): the account's ledger entries are searched from this long before the window.
const settleSlack = 24 * time.Hour

// SetCap sets or removes a spend cap. A cap set or changed counts what the scope spent in the
// cap's current window (by the store's clock) before it, settled or held: the next hold is
// checked against that, and Spending shows it.
//
// Locking: the buyer's ledger row first, as PlaceHolds locks it, so that no hold of the account
// is placed, and none with an amount settled, until the cap commits. On PostgreSQL the open
// holds that the window is added to are locked without waiting: a settlement that holds one
// waits for the buyer's row, so waiting for it would deadlock. Such a hold's amount counts as
// held in the window, which overstates the window (never understates it) once the hold
// settles without it; so after the commit SetCap waits for those settlements, with no lock
// held, and counts the window again. Every hold placed after the first commit counts in the
// window, so the second count finds none left.
func (db *DB) SetCap(ctx context.Context, c store.Cap) error {
	if !store.ValidPeriod(c.Period) {
		return fmt.Errorf("set cap: period %q is not daily, weekly or monthly", c.Period)
	}
	now := db.now()
	var busy []string
	for range capAttempts {
		// Deciding: no lazy hold is placed against the caps as they were while it counts.
		err := db.writeTx(ctx, true, func(tx *sql.Tx) error {
			var err error
			busy, err = db.setCap(ctx, tx, c, now)
			return err
		})
		if err == nil && len(busy) > 0 {
			err = db.waitHolds(ctx, busy)
		}
		if err != nil {
			return fmt.Errorf("set cap %s %s: %w", c.Scope, c.Period, err)
		}
		if len(busy) == 0 {
			return nil
		}
	}
	return fmt.Errorf("set cap %s %s: set, but %d open holds kept being settled: its window may count up to their amounts too much until the cap is set again",
		c.Scope, c.Period, len(busy))
}

// waitHolds waits until no transaction holds the rows of the holds, one at a time and each in
// a statement of its own, so that it never holds one lock while waiting for another.
func (db *DB) waitHolds(ctx context.Context, ids []string) error {
	for _, id := range ids {
		var got string
		err := db.w.QueryRowContext(ctx, db.q(`SELECT request_id FROM open_holds WHERE request_id = ?`+db.forUpdate()), id).Scan(&got)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	return nil
}

// setCap sets the cap and counts its window. It returns the open holds that the window could
// not be added to, being settled.
func (db *DB) setCap(ctx context.Context, tx *sql.Tx, c store.Cap, now time.Time) (busy []string, err error) {
	// The window is counted from the open holds' rows, and a removed cap's window stays up to
	// date through them.
	if err := db.writeAllPending(ctx, tx); err != nil {
		return nil, err
	}
	if c.Limit <= 0 {
		// The window's row stays: the open holds that count in it keep it up to date.
		_, err := db.txExec(ctx, tx, `DELETE FROM spend_caps WHERE scope = ? AND period = ?`, c.Scope, c.Period)
		return nil, err
	}
	sc, err := db.capScope(ctx, tx, c.Scope)
	if err != nil {
		return nil, err
	}
	if sc.accountID != "" {
		buyer := buyerAccount(sc.accountID)
		if err := db.ensureAccount(ctx, tx, buyer, sc.accountID, "buyer"); err != nil {
			return nil, err
		}
		var id string
		if err := db.txQueryRow(ctx, tx, `SELECT id FROM ledger_accounts WHERE id = ?`+db.forUpdate(), buyer).Scan(&id); err != nil {
			return nil, err
		}
	}
	_, err = db.txExec(ctx, tx, `INSERT INTO spend_caps (scope, period, limit_nanos) VALUES (?, ?, ?)
ON CONFLICT (scope, period) DO UPDATE SET limit_nanos = excluded.limit_nanos`, c.Scope, c.Period, int64(c.Limit))
	if err != nil {
		return nil, err
	}
	if sc.accountID == "" {
		return nil, nil // a key that does not exist has spent nothing
	}
	w := window{c.Scope, c.Period, millis(store.WindowStart(c.Period, now))}
	return db.recount(ctx, tx, sc, w, millis(store.WindowEnd(c.Period, now)))
}

// capScope is whose spending a cap limits: an account's, or one key's of an account.
type capScope struct {
	accountID string // "" for a key that does not exist
	keyID     string // "" for an account's cap
}

func (db *DB) capScope(ctx context.Context, tx *sql.Tx, scope string) (capScope, error) {
	if id, ok := strings.CutPrefix(scope, store.AccountScope("")); ok && id != "" {
		return capScope{accountID: id}, nil
	}
	id, ok := strings.CutPrefix(scope, store.KeyScope(""))
	if !ok || id == "" {
		return capScope{}, fmt.Errorf("scope %q is neither %s… nor %s…", scope, store.KeyScope(""), store.AccountScope(""))
	}
	sc := capScope{keyID: id}
	err := db.txQueryRow(ctx, tx, `SELECT account_id FROM api_keys WHERE id = ?`, id).Scan(&sc.accountID)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return capScope{}, err
	}
	return sc, nil
}

// recount sets window w (which ends at end) of a scope to what the ledger says was spent in it:
// the debits of the scope's settled holds created in it, and the amounts of its open holds
// created in it, each of which then counts in the window, so that its settlement moves its
// amount from held to spent there; but for those being settled, which it returns. The caller
// holds the buyer's ledger row.
func (db *DB) recount(ctx context.Context, tx *sql.Tx, sc capScope, w window, end int64) (busy []string, err error) {
	openQuery := `SELECT request_id, amount, windows FROM open_holds
WHERE account_id = ? AND created_at >= ? AND created_at < ?`
	args := []any{sc.accountID, w.start, end}
	if sc.keyID != "" {
		openQuery += ` AND key_id = ?`
		args = append(args, sc.keyID)
	}
	var held money.Nanos
	patch := map[string]string{} // request → its windows, w added
	err = db.queryEach(ctx, tx, openQuery, args, func(r *sql.Rows) error {
		var id, windows string
		var amount int64
		if err := r.Scan(&id, &amount, &windows); err != nil {
			return err
		}
		held += money.Nanos(amount)
		ws, err := parseWindows(windows)
		if err != nil {
			return fmt.Errorf("hold %s: %w", id, err)
		}
		if !slices.Contains(ws, w) {
			patch[id] = formatWindows(append(ws, w))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ids := slices.Sorted(maps.Keys(patch))
	if db.dialect == postgresDialect && len(ids) > 0 {
		locked := map[string]bool{}
		err := db.inChunks(ctx, tx, `SELECT request_id FROM open_holds WHERE request_id IN `, ` FOR UPDATE SKIP LOCKED`, nil, ids,
			func(r *sql.Rows) error {
				var id string
				err := r.Scan(&id)
				locked[id] = true
				return err
			})
		if err != nil {
			return nil, err
		}
		var free []string
		for _, id := range ids {
			if locked[id] {
				free = append(free, id)
			} else {
				busy = append(busy, id)
			}
		}
		ids = free
	}
	for _, id := range ids {
		if _, err := db.txExec(ctx, tx, `UPDATE open_holds SET windows = ? WHERE request_id = ?`, patch[id], id); err != nil {
			return nil, err
		}
	}

	// The settled debits: a key's holds by their index, an account's by its ledger entries.
	var spent int64
	if sc.keyID != "" {
		err = db.txQueryRow(ctx, tx, `SELECT CAST(COALESCE(SUM(-e.amount), 0) AS BIGINT) FROM holds h
JOIN ledger_entries e ON e.txn_id = 'settle:' || h.request_id AND e.account = ?
WHERE h.key_id = ? AND h.created_at >= ? AND h.created_at < ? AND h.status = 'settled'`,
			buyerAccount(sc.accountID), sc.keyID, w.start, end).Scan(&spent)
	} else {
		err = db.txQueryRow(ctx, tx, `SELECT CAST(COALESCE(SUM(-e.amount), 0) AS BIGINT) FROM ledger_entries e
JOIN holds h ON h.request_id = substr(e.txn_id, 8)
WHERE e.account = ? AND e.created_at >= ? AND e.txn_id LIKE 'settle:%'
	AND h.account_id = ? AND h.created_at >= ? AND h.created_at < ? AND h.status = 'settled'`,
			buyerAccount(sc.accountID), w.start-settleSlack.Milliseconds(), sc.accountID, w.start, end).Scan(&spent)
	}
	if err != nil {
		return nil, err
	}
	_, err = db.txExec(ctx, tx, `INSERT INTO spend_windows (scope, period, window_start, spent, held) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (scope, period, window_start) DO UPDATE SET spent = excluded.spent, held = excluded.held`,
		w.scope, w.period, w.start, spent, int64(held))
	return busy, err
}

// Spending lists the caps of the scopes with their current windows.
func (db *DB) Spending(ctx context.Context, now time.Time, scopes ...string) ([]store.Spend, error) {
	var out []store.Spend
	for _, scope := range scopes {
		rows, err := db.r.QueryContext(ctx, db.q(`SELECT period, limit_nanos FROM spend_caps WHERE scope = ? ORDER BY period`), scope)
		if err != nil {
			return nil, fmt.Errorf("spending of %s: %w", scope, err)
		}
		var caps []store.Cap
		for rows.Next() {
			c := store.Cap{Scope: scope}
			var limit int64
			if err := rows.Scan(&c.Period, &limit); err != nil {
				rows.Close()
				return nil, err
			}
			c.Limit = money.Nanos(limit)
			caps = append(caps, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("spending of %s: %w", scope, err)
		}
		for _, c := range caps {
			sp := store.Spend{Cap: c, ResetsAt: store.WindowEnd(c.Period, now)}
			var spent, held int64
			err := db.r.QueryRowContext(ctx, db.q(`SELECT spent, held FROM spend_windows WHERE scope = ? AND period = ? AND window_start = ?`),
				scope, c.Period, millis(store.WindowStart(c.Period, now))).Scan(&spent, &held)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, err
			}
			sp.Spent, sp.Held = money.Nanos(spent), money.Nanos(held)+db.pending.window(window{scope, c.Period, millis(store.WindowStart(c.Period, now))})
			out = append(out, sp)
		}
	}
	return out, nil
}
