package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// Holds and settlements come in batches that share one transaction, so that a busy coordinator
// pays for one commit (one disk flush) and a handful of statements per batch rather than per
// request. Every item is checked before anything is written, so an item refused for a reason
// of its own (a limit, a hold already closed) writes nothing and leaves the others alone; an
// unexpected database error fails the whole batch. On SQLite, whose writes run one at a time,
// the ledger commits its holds, settlements and checkpoints queued together in one
// transaction (Commit).

// PlaceHold reserves h.Amount within the buyer's balance and spend caps.
func (db *DB) PlaceHold(ctx context.Context, h *store.Hold) error {
	return db.PlaceHolds(ctx, []*store.Hold{h})[0]
}

// PlaceHolds places holds in one transaction, each checked against the balance and caps as the
// holds before it left them. SQLite's write transactions are exclusive; on PostgreSQL each
// buyer's ledger row is locked before it is read, so holds of one account never interleave.
func (db *DB) PlaceHolds(ctx context.Context, hs []*store.Hold) []error {
	errs, _, _ := db.Commit(ctx, &store.Writes{Holds: hs})
	return errs
}

// SerialWrites reports whether the database is SQLite, whose write transactions run one at a
// time (BEGIN IMMEDIATE on one connection).
func (db *DB) SerialWrites() bool { return db.dialect == sqliteDialect }

// Commit places holds, settles and records checkpoints in one transaction, in that order. On
// PostgreSQL it locks buyers' rows (the holds), then holds' rows and ledger rows (the
// settlements), then holds' rows again (the checkpoints), each in a fixed order, but the
// three orders together are not one: transactions that place holds and settle at once may
// deadlock, and are retried.
func (db *DB) Commit(ctx context.Context, w *store.Writes) (holds, settlements []error, checkpoints error) {
	holds = make([]error, len(w.Holds))
	settlements = make([]error, len(w.Settlements))
	cps, err := encodeCheckpoints(w.Checkpoints)
	if err != nil {
		checkpoints = fmt.Errorf("checkpoint %d requests: %w", len(w.Checkpoints), err)
		cps = nil
	}
	// Lazy holds are placed without a write transaction (placeLazy), before it; the others in
	// it, where written lists them and at says their places in w.Holds.
	var written []*store.Hold
	var at []int
	for i, h := range w.Holds {
		if h.Lazy && db.dialect == sqliteDialect {
			holds[i] = db.placeLazy(ctx, h)
		} else {
			written = append(written, h)
			at = append(at, i)
		}
	}
	var lazy []string
	if !w.WriteLazy.IsZero() {
		lazy = db.pending.before(w.WriteLazy)
	}
	if len(written) == 0 && len(w.Settlements) == 0 && len(cps) == 0 && len(lazy) == 0 {
		return holds, settlements, checkpoints
	}
	writtenErrs := make([]error, len(written))
	var made []string // ledger accounts the settlements created
	err = db.writeRetrying(ctx, len(written) > 0, func(tx *sql.Tx) error {
		clear(writtenErrs)
		clear(settlements)
		made = made[:0]
		if len(written) > 0 {
			if err := db.placeHolds(ctx, tx, written, writtenErrs); err != nil {
				return err
			}
		}
		if len(w.Settlements) > 0 {
			if err := db.settle(ctx, tx, w.Settlements, settlements, &made); err != nil {
				return err
			}
		}
		if err := db.checkpointHolds(ctx, tx, cps); err != nil {
			return err
		}
		return db.writePending(ctx, tx, lazy)
	})
	if err != nil {
		for _, i := range at {
			holds[i] = fmt.Errorf("place holds: %w", err)
		}
		for i := range settlements {
			settlements[i] = fmt.Errorf("settle: %w", err)
		}
		switch {
		case len(cps) > 0:
			checkpoints = fmt.Errorf("checkpoint %d requests: %w", len(w.Checkpoints), err)
		case len(lazy) > 0:
			checkpoints = fmt.Errorf("write %d holds open: %w", len(lazy), err)
		}
		return holds, settlements, checkpoints
	}
	for j, i := range at {
		holds[i] = writtenErrs[j]
	}
	for _, acct := range made {
		db.ensured.Store(acct, true)
	}
	return holds, settlements, checkpoints
}

type funds struct{ balance, held money.Nanos }

func (db *DB) placeHolds(ctx context.Context, tx *sql.Tx, hs []*store.Hold, errs []error) error {
	// The buyers' balances, locked in a fixed order.
	buyers := map[string]*funds{}
	var ids []string
	for _, h := range hs {
		if id := buyerAccount(h.AccountID); buyers[id] == nil {
			buyers[id] = &funds{}
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		var balance, held int64
		err := db.txQueryRow(ctx, tx, `SELECT balance, held FROM ledger_accounts WHERE id = ?`+db.forUpdate(), id).Scan(&balance, &held)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		buyers[id].balance, buyers[id].held = money.Nanos(balance), money.Nanos(held)+db.pending.accountTx(id)
	}

	// The caps of every key and account in the batch.
	caps := map[string][]store.Cap{}
	var scopes []string
	for _, h := range hs {
		for _, s := range []string{store.KeyScope(h.KeyID), store.AccountScope(h.AccountID)} {
			if _, ok := caps[s]; !ok {
				caps[s] = nil
				scopes = append(scopes, s)
			}
		}
	}
	err := db.inChunks(ctx, tx, `SELECT scope, period, limit_nanos FROM spend_caps WHERE scope IN `, ``, nil, scopes, func(r *sql.Rows) error {
		var c store.Cap
		var limit int64
		if err := r.Scan(&c.Scope, &c.Period, &limit); err != nil {
			return err
		}
		c.Limit = money.Nanos(limit)
		caps[c.Scope] = append(caps[c.Scope], c)
		return nil
	})
	if err != nil {
		return err
	}

	// Decide, in order, keeping the windows' spending in memory.
	spend := map[window]*funds{} // window → spent (as balance) and held
	held := make([][]window, len(hs))
	var accepted []int
	for i, h := range hs {
		b := buyers[buyerAccount(h.AccountID)]
		if avail := b.balance - b.held; avail < h.Amount {
			errs[i] = &store.LimitError{Available: max(avail, 0), Need: h.Amount}
			continue
		}
		var ws []window
		var refused error
		for _, c := range append(caps[store.KeyScope(h.KeyID)], caps[store.AccountScope(h.AccountID)]...) {
			w := window{c.Scope, c.Period, millis(store.WindowStart(c.Period, h.CreatedAt))}
			f, err := db.windowFunds(ctx, tx, spend, w)
			if err != nil {
				return err
			}
			if left := c.Limit - f.balance - f.held; left < h.Amount {
				refused = &store.LimitError{Cap: &c, Available: max(left, 0), Need: h.Amount, ResetsAt: store.WindowEnd(c.Period, h.CreatedAt)}
				break
			}
			ws = append(ws, w)
		}
		if refused != nil {
			errs[i] = refused
			continue
		}
		b.held += h.Amount
		for _, w := range ws {
			spend[w].held += h.Amount
		}
		held[i] = ws
		accepted = append(accepted, i)
	}
	if len(accepted) == 0 {
		return nil
	}

	rows := newRows(len(accepted))
	for _, i := range accepted {
		addOpenHold(&rows, hs[i], held[i])
	}
	inserted, err := db.insertHolds(ctx, tx, rows)
	if err != nil {
		return err
	}
	heldDelta := map[string]money.Nanos{}
	windowDelta := map[window]money.Nanos{}
	for _, i := range accepted {
		h := hs[i]
		if !inserted[h.RequestID] {
			errs[i] = fmt.Errorf("hold for request %s: %w", h.RequestID, store.ErrConflict)
			continue
		}
		delete(inserted, h.RequestID) // a second hold of the request in the batch conflicts
		if db.dialect == sqliteDialect {
			db.placing = append(db.placing, h.RequestID)
		}
		heldDelta[buyerAccount(h.AccountID)] += h.Amount
		for _, w := range held[i] {
			windowDelta[w] += h.Amount
		}
	}
	return db.addHeld(ctx, tx, heldDelta, windowDelta)
}

// addHeld adds to what buyers' ledger accounts and spend windows hold, in a fixed order.
func (db *DB) addHeld(ctx context.Context, tx *sql.Tx, accounts map[string]money.Nanos, windows map[window]money.Nanos) error {
	for _, id := range slices.Sorted(maps.Keys(accounts)) {
		if d := accounts[id]; d != 0 {
			if _, err := db.txExec(ctx, tx, `UPDATE ledger_accounts SET held = held + ? WHERE id = ?`, int64(d), id); err != nil {
				return err
			}
		}
	}
	for _, w := range sortedWindows(windows) {
		if _, err := db.txExec(ctx, tx, `INSERT INTO spend_windows (scope, period, window_start, held) VALUES (?, ?, ?, ?)
ON CONFLICT (scope, period, window_start) DO UPDATE SET held = spend_windows.held + excluded.held`,
			w.scope, w.period, w.start, int64(windows[w])); err != nil {
			return err
		}
	}
	return nil
}

// openHoldsInsert begins the statement that inserts open holds, the columns of addOpenHold's
// rows.
const openHoldsInsert = `INSERT INTO open_holds (request_id, account_id, key_id, amount, windows, created_at, replica)`

// addOpenHold adds the row of h, held in the spend windows ws, for openHoldsInsert.
func addOpenHold(rows *rows, h *store.Hold, ws []window) {
	rows.add(h.RequestID, h.AccountID, h.KeyID, int64(h.Amount), formatWindows(ws), millis(h.CreatedAt), h.Replica)
}

// insertHolds inserts new holds' rows into open_holds and returns the request ids it inserted:
// a request held already, open, pending or closed, is left as it was, and out of the result,
// and so is a second row of one request.
func (db *DB) insertHolds(ctx context.Context, tx *sql.Tx, rows rows) (map[string]bool, error) {
	ids := make([]string, rows.len())
	for i := range ids {
		ids[i] = rows.row(i)[0].(string)
	}
	inserted := make(map[string]bool, len(ids))
	if db.dialect == sqliteDialect {
		// The write transaction runs alone, so a read tells which requests are held already,
		// and a plain INSERT costs less than one that returns rows.
		held, err := db.heldRequests(ctx, tx, []string{"open_holds", "holds"}, ids)
		if err != nil {
			return nil, err
		}
		fresh := newRows(len(ids))
		for i, id := range ids {
			if !held[id] && !db.pending.has(id) {
				held[id] = true
				inserted[id] = true
				fresh.add(rows.row(i)...)
			}
		}
		return inserted, db.insertRows(ctx, tx, openHoldsInsert, ``, fresh, nil)
	}
	// PostgreSQL: the key of open_holds refuses a request held open, here or by a transaction
	// running beside this one, which the insert waits for. A request's closed hold is looked
	// for after the insert: a settlement that moved the request out of open_holds meanwhile has
	// committed by then, and its hold shows.
	err := db.insertRows(ctx, tx, openHoldsInsert, `ON CONFLICT (request_id) DO NOTHING RETURNING request_id`, rows, func(r *sql.Rows) error {
		var id string
		err := r.Scan(&id)
		inserted[id] = true
		return err
	})
	if err != nil || len(inserted) == 0 {
		return inserted, err
	}
	closed, err := db.heldRequests(ctx, tx, []string{"holds"}, slices.Sorted(maps.Keys(inserted)))
	if err != nil || len(closed) == 0 {
		return inserted, err
	}
	again := slices.Sorted(maps.Keys(closed))
	if err := db.inChunks(ctx, tx, `DELETE FROM open_holds WHERE request_id IN `, ``, nil, again, nil); err != nil {
		return nil, err
	}
	for _, id := range again {
		delete(inserted, id)
	}
	return inserted, nil
}

// heldRequests returns which of the request ids have a row in the tables (open_holds, holds),
// read in one statement a chunk.
func (db *DB) heldRequests(ctx context.Context, tx *sql.Tx, tables []string, ids []string) (map[string]bool, error) {
	held := map[string]bool{}
	for len(ids) > 0 {
		n := chunkSize(len(ids), true)
		take := min(n, len(ids))
		list := "(" + strings.Repeat("?, ", n-1) + "?)"
		var q strings.Builder
		args := make([]any, 0, n*len(tables))
		for i, table := range tables {
			if i > 0 {
				q.WriteString(" UNION ALL ")
			}
			q.WriteString("SELECT request_id FROM " + table + " WHERE request_id IN " + list)
			for j := range n {
				args = append(args, ids[min(j, take-1)]) // padded with the last, as inChunks
			}
		}
		err := db.queryEach(ctx, tx, q.String(), args, func(r *sql.Rows) error {
			var id string
			err := r.Scan(&id)
			held[id] = true
			return err
		})
		if err != nil {
			return nil, err
		}
		ids = ids[take:]
	}
	return held, nil
}

// windowFunds returns a spend window's spent and held amounts, pending holds' included, read
// once per batch.
func (db *DB) windowFunds(ctx context.Context, tx *sql.Tx, spend map[window]*funds, w window) (*funds, error) {
	if f := spend[w]; f != nil {
		return f, nil
	}
	var spent, held int64
	err := db.txQueryRow(ctx, tx, `SELECT spent, held FROM spend_windows WHERE scope = ? AND period = ? AND window_start = ?`,
		w.scope, w.period, w.start).Scan(&spent, &held)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	f := &funds{balance: money.Nanos(spent), held: money.Nanos(held) + db.pending.windowTx(w)}
	spend[w] = f
	return f, nil
}

func sortedWindows[V any](m map[window]V) []window {
	ws := make([]window, 0, len(m))
	for w := range m {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b window) int {
		return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.period, b.period), cmp.Compare(a.start, b.start))
	})
	return ws
}

// RaiseHold raises an open hold to amount, within the buyer's balance and the spend caps of the
// windows the hold counts in, in one transaction: as a card's incremental authorization, for a
// request whose retry goes to a dearer node. A hold already as large is left alone.
func (db *DB) RaiseHold(ctx context.Context, requestID string, amount money.Nanos) error {
	err := db.writeRetrying(ctx, true, func(tx *sql.Tx) error {
		if err := db.writePending(ctx, tx, []string{requestID}); err != nil {
			return err
		}
		var accountID, windows string
		var was int64
		err := db.txQueryRow(ctx, tx, `SELECT account_id, amount, windows FROM open_holds WHERE request_id = ?`+db.forUpdate(), requestID).
			Scan(&accountID, &was, &windows)
		if errors.Is(err, sql.ErrNoRows) {
			closed, err := db.heldRequests(ctx, tx, []string{"holds"}, []string{requestID})
			switch {
			case err != nil:
				return err
			case closed[requestID]:
				return store.ErrClosed
			}
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		delta := amount - money.Nanos(was)
		if delta <= 0 {
			return nil
		}
		buyer := buyerAccount(accountID)
		var balance, held int64
		if err := db.txQueryRow(ctx, tx, `SELECT balance, held FROM ledger_accounts WHERE id = ?`+db.forUpdate(), buyer).Scan(&balance, &held); err != nil {
			return err
		}
		if avail := money.Nanos(balance-held) - db.pending.accountTx(buyer); avail < delta {
			return &store.LimitError{Available: max(avail, 0), Need: delta}
		}
		ws, err := parseWindows(windows)
		if err != nil {
			return err
		}
		spend := map[window]*funds{}
		for _, w := range ws {
			var limit int64
			err := db.txQueryRow(ctx, tx, `SELECT limit_nanos FROM spend_caps WHERE scope = ? AND period = ?`, w.scope, w.period).Scan(&limit)
			if errors.Is(err, sql.ErrNoRows) {
				continue // the cap was removed: the window still counts the hold, unbounded
			}
			if err != nil {
				return err
			}
			f, err := db.windowFunds(ctx, tx, spend, w)
			if err != nil {
				return err
			}
			if left := money.Nanos(limit) - f.balance - f.held; left < delta {
				c := store.Cap{Scope: w.scope, Period: w.period, Limit: money.Nanos(limit)}
				return &store.LimitError{Cap: &c, Available: max(left, 0), Need: delta, ResetsAt: store.WindowEnd(w.period, fromMillis(w.start))}
			}
		}
		if _, err := db.txExec(ctx, tx, `UPDATE open_holds SET amount = ? WHERE request_id = ?`, int64(amount), requestID); err != nil {
			return err
		}
		if _, err := db.txExec(ctx, tx, `UPDATE ledger_accounts SET held = held + ? WHERE id = ?`, int64(delta), buyer); err != nil {
			return err
		}
		for _, w := range ws {
			if _, err := db.txExec(ctx, tx, `UPDATE spend_windows SET held = held + ? WHERE scope = ? AND period = ? AND window_start = ?`,
				int64(delta), w.scope, w.period, w.start); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("raise hold %s: %w", requestID, err)
	}
	return nil
}
