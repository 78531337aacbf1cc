package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// Lazy holds (store.Hold.Lazy), on SQLite. Most requests end within a second, and a hold
// written open and deleted by its settlement a moment later costs the request a second
// commit, on its path to the first token. A lazy hold is kept in memory instead: placeLazy
// checks it against the balance and the caps less what the open holds and the pending ones
// hold, in one read on the readers' pool and no write transaction, and its settlement writes
// it closed, in one transaction with the money. It is written open when its request is
// checkpointed (a stream that runs for long), raised, or outlives the ledger's LazyFor
// (Writes.WriteLazy), and before SetCap and ClaimHolds, which read the open holds' rows;
// Balance, Spending and OpenHolds add the pending ones. A pending hold counts in every window
// of its key and account (potentialWindows), so that a cap set by a process that cannot see
// it (shareai admin cap) still counts it here, and it joins that cap's window when it is
// written or settled (capWindows).
//
// Exactness. db.lazyMu orders the decisions against the commits: placeLazy decides and adds
// under it, and every write transaction commits under it, together with its changes to the
// pending set, which it stages (take) until then. So a decision sees the database and the
// pending set as of one point between commits: a hold being settled still counts in full,
// and its debit not yet, which errs on the side of refusing (a debit never exceeds its hold).
// A write transaction that decides holds itself (placeHolds, RaiseHold, SetCap's count) holds
// db.lazyMu from its start. The lock order is the writer connection, then db.lazyMu.

// pendingHolds are the lazy holds of this process that are not written yet.
type pendingHolds struct {
	mu       sync.Mutex
	holds    map[string]*pendingHold // by request id
	accounts map[string]money.Nanos  // a buyer's ledger account → what its pending holds hold
	windows  map[window]money.Nanos  // a spend window → what the pending holds hold (potentialWindows)
	// taken are the holds the running write transaction settles or writes: still pending
	// for the others until it commits (end), gone for the transaction itself.
	taken map[string]*pendingHold
}

type pendingHold struct {
	hold    store.Hold
	windows []window
}

// add keeps a hold; by db.lazyMu.
func (p *pendingHolds) add(h *store.Hold, ws []window) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holds == nil {
		p.holds, p.accounts, p.windows = map[string]*pendingHold{}, map[string]money.Nanos{}, map[window]money.Nanos{}
	}
	ph := &pendingHold{hold: *h, windows: ws}
	ph.hold.Lazy = false
	p.put(ph, 1)
}

// take stages the removal of a hold that the running write transaction settles or writes, and
// returns it; nil when the request has no pending hold, or the transaction took it already.
func (p *pendingHolds) take(requestID string) *pendingHold {
	p.mu.Lock()
	defer p.mu.Unlock()
	ph := p.holds[requestID]
	if ph == nil || p.taken[requestID] != nil {
		return nil
	}
	if p.taken == nil {
		p.taken = map[string]*pendingHold{}
	}
	p.taken[requestID] = ph
	return ph
}

// end ends the running write transaction: the holds it took are gone if it committed, still
// pending if not. By db.lazyMu.
func (p *pendingHolds) end(committed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if committed {
		for _, ph := range p.taken {
			p.put(ph, -1)
		}
	}
	clear(p.taken)
}

// put adds (sign 1) or removes (-1) a hold and its amounts; by p.mu.
func (p *pendingHolds) put(ph *pendingHold, sign money.Nanos) {
	id, acct := ph.hold.RequestID, buyerAccount(ph.hold.AccountID)
	if sign > 0 {
		p.holds[id] = ph
	} else {
		delete(p.holds, id)
	}
	p.accounts[acct] += sign * ph.hold.Amount
	if p.accounts[acct] == 0 {
		delete(p.accounts, acct)
	}
	for _, w := range potentialWindows(&ph.hold) {
		p.windows[w] += sign * ph.hold.Amount
		if p.windows[w] == 0 {
			delete(p.windows, w)
		}
	}
}

// potentialWindows are the windows a hold would count in were its key and its account capped
// for every period: a pending hold counts in them all, so that a cap set where this process
// cannot see (shareai admin cap, on the file) still finds the pending holds of its scope
// counted against it here.
func potentialWindows(h *store.Hold) []window {
	ws := make([]window, 0, 6)
	for _, scope := range []string{store.KeyScope(h.KeyID), store.AccountScope(h.AccountID)} {
		for _, period := range []string{store.Daily, store.Weekly, store.Monthly} {
			ws = append(ws, window{scope, period, millis(store.WindowStart(period, h.CreatedAt))})
		}
	}
	return ws
}

// The views. Outside a write transaction (placeLazy, Balance, Spending, OpenHolds) the
// pending holds are those committed; inside one (the Tx views), less those it took.

// has says whether a request has a pending hold, taken or not.
func (p *pendingHolds) has(requestID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holds[requestID] != nil
}

// getTx returns a request's pending hold as the running transaction sees it, or nil.
func (p *pendingHolds) getTx(requestID string) *pendingHold {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.taken[requestID] != nil {
		return nil
	}
	return p.holds[requestID]
}

// account returns what a buyer's pending holds hold; accountTx, as the running transaction
// sees them.
func (p *pendingHolds) account(ledgerAccount string) money.Nanos {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accounts[ledgerAccount]
}

func (p *pendingHolds) accountTx(ledgerAccount string) money.Nanos {
	return p.account(ledgerAccount) - p.takenWhere(func(ph *pendingHold) bool { return buyerAccount(ph.hold.AccountID) == ledgerAccount })
}

// window returns what the pending holds that count in a spend window hold; windowTx, as the
// running transaction sees them.
func (p *pendingHolds) window(w window) money.Nanos {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.windows[w]
}

func (p *pendingHolds) windowTx(w window) money.Nanos {
	return p.window(w) - p.takenWhere(func(ph *pendingHold) bool { return slices.Contains(potentialWindows(&ph.hold), w) })
}

// takenWhere sums the amounts of the holds the running transaction took that match. Only the
// transaction changes what it took, so the sum and the view it is taken from agree.
func (p *pendingHolds) takenWhere(match func(*pendingHold) bool) money.Nanos {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n money.Nanos
	for _, ph := range p.taken {
		if match(ph) {
			n += ph.hold.Amount
		}
	}
	return n
}

// list returns the pending holds, as copies.
func (p *pendingHolds) list() []*store.Hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := make([]*store.Hold, 0, len(p.holds))
	for _, ph := range p.holds {
		h := ph.hold
		hs = append(hs, &h)
	}
	return hs
}

// before returns the request ids of the pending holds placed before t, sorted; the zero time:
// all of them.
func (p *pendingHolds) before(t time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for id, ph := range p.holds {
		if t.IsZero() || ph.hold.CreatedAt.Before(t) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// lazyRead is what placeLazy reads, in one statement on the readers' pool, prepared once: a
// row of kind 0 with the buyer's balance and held amount, unless it has no ledger account
// yet; a row of kind 1 for each cap of the key's and the account's scopes (?4, ?5), with its
// current window's spending (the window of each period starts at one of ?1, ?2, ?3); a row of
// kind 2 if the request is held already, open or closed.
const lazyRead = `SELECT 0, '', '', balance, 0, held FROM ledger_accounts WHERE id = ?6
UNION ALL
SELECT 1, c.scope, c.period, c.limit_nanos, COALESCE(w.spent, 0), COALESCE(w.held, 0)
FROM spend_caps c LEFT JOIN spend_windows w ON w.scope = c.scope AND w.period = c.period
	AND w.window_start = CASE c.period WHEN 'daily' THEN ?1 WHEN 'weekly' THEN ?2 ELSE ?3 END
WHERE c.scope = ?4
UNION ALL
SELECT 1, c.scope, c.period, c.limit_nanos, COALESCE(w.spent, 0), COALESCE(w.held, 0)
FROM spend_caps c LEFT JOIN spend_windows w ON w.scope = c.scope AND w.period = c.period
	AND w.window_start = CASE c.period WHEN 'daily' THEN ?1 WHEN 'weekly' THEN ?2 ELSE ?3 END
WHERE c.scope = ?5
UNION ALL
SELECT 2, '', '', 0, 0, 0 FROM open_holds WHERE request_id = ?7
UNION ALL
SELECT 2, '', '', 0, 0, 0 FROM holds WHERE request_id = ?7`

// placeLazy places a lazy hold: checked against the balance and the caps less the open and
// pending holds, then kept pending. It returns a *store.LimitError as placeHolds does, and
// store.ErrConflict for a request held already. What it read of the buyer's money is kept
// until the next commit (lazyFunds), and whether the request was held is known without the
// database for the ids this process made lately (heldIDs): then it decides in memory.
func (db *DB) placeLazy(ctx context.Context, h *store.Hold) error {
	k := newLazyKey(h)
	db.lazyMu.Lock()
	defer db.lazyMu.Unlock()
	if f := db.funds.get(k, db.commits, db.now()); f != nil {
		if held, sure := db.held.known(h.RequestID); sure {
			// A refusal is decided on a fresh read: the money may have come since, from
			// another process (shareai admin credit).
			if ws, err := db.decideLazy(h, &k, f); err == nil {
				if held || db.pending.has(h.RequestID) {
					return fmt.Errorf("hold for request %s: %w", h.RequestID, store.ErrConflict)
				}
				db.addLazy(h, ws)
				return nil
			}
		}
	}
	f, conflict, err := db.readLazy(ctx, &k, h.RequestID)
	if err != nil {
		return err
	}
	db.funds.put(k, f, db.commits, db.now())
	ws, err := db.decideLazy(h, &k, f)
	if err != nil {
		return err
	}
	if conflict || db.pending.has(h.RequestID) {
		return fmt.Errorf("hold for request %s: %w", h.RequestID, store.ErrConflict)
	}
	db.addLazy(h, ws)
	return nil
}

// addLazy keeps h pending, counted in windows ws; by db.lazyMu.
func (db *DB) addLazy(h *store.Hold, ws []window) {
	db.pending.add(h, ws)
	db.held.add(h.RequestID, time.Now())
}

// readLazy reads what the database holds of k's money and caps, and whether request id is
// held, open or closed; by db.lazyMu.
func (db *DB) readLazy(ctx context.Context, k *lazyKey, id string) (f *lazyFunds, conflict bool, err error) {
	st, err := db.readStmt(ctx, lazyRead)
	if err != nil {
		return nil, false, err
	}
	rows, err := st.QueryContext(ctx, k.windows[0], k.windows[1], k.windows[2], k.key, k.account, k.buyer, id)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	f = &lazyFunds{}
	for rows.Next() {
		var kind int
		var cf capFunds
		var a, b, c int64
		if err := rows.Scan(&kind, &cf.c.Scope, &cf.c.Period, &a, &b, &c); err != nil {
			return nil, false, err
		}
		switch kind {
		case 0:
			f.balance, f.held = money.Nanos(a), money.Nanos(c)
		case 1:
			cf.c.Limit, cf.spent, cf.held = money.Nanos(a), money.Nanos(b), money.Nanos(c)
			f.caps = append(f.caps, cf)
		default:
			conflict = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	// The key's caps before the account's, as placeHolds checks them.
	slices.SortStableFunc(f.caps, func(a, b capFunds) int {
		if (a.c.Scope == k.key) != (b.c.Scope == k.key) {
			if a.c.Scope == k.key {
				return -1
			}
			return 1
		}
		return 0
	})
	return f, conflict, nil
}

// decideLazy checks h against f less the pending holds, and returns the windows it counts
// in; by db.lazyMu.
func (db *DB) decideLazy(h *store.Hold, k *lazyKey, f *lazyFunds) ([]window, error) {
	if avail := f.balance - f.held - db.pending.account(k.buyer); avail < h.Amount {
		return nil, &store.LimitError{Available: max(avail, 0), Need: h.Amount}
	}
	var ws []window
	for _, cf := range f.caps {
		w := window{cf.c.Scope, cf.c.Period, millis(store.WindowStart(cf.c.Period, h.CreatedAt))}
		if left := cf.c.Limit - cf.spent - cf.held - db.pending.window(w); left < h.Amount {
			c := cf.c
			return nil, &store.LimitError{Cap: &c, Available: max(left, 0), Need: h.Amount, ResetsAt: store.WindowEnd(c.Period, h.CreatedAt)}
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// readStmt returns query prepared on the readers' pool.
func (db *DB) readStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := db.readStmts.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := db.r.PrepareContext(ctx, db.q(query))
	if err != nil {
		return nil, err
	}
	if prev, loaded := db.readStmts.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// writePending writes the pending holds of the requests open, in tx, as placeHolds writes a
// hold that is not lazy; requests with none are skipped.
func (db *DB) writePending(ctx context.Context, tx *sql.Tx, requestIDs []string) error {
	var hs []*store.Hold
	var ws [][]window
	for _, id := range requestIDs {
		if ph := db.pending.take(id); ph != nil {
			hs = append(hs, &ph.hold)
			ws = append(ws, slices.Clone(ph.windows))
		}
	}
	if len(hs) == 0 {
		return nil
	}
	if err := db.capWindows(ctx, tx, hs, ws); err != nil {
		return err
	}
	rows := newRows(len(hs))
	held := map[string]money.Nanos{}
	windows := map[window]money.Nanos{}
	for i, h := range hs {
		addOpenHold(&rows, h, ws[i])
		held[buyerAccount(h.AccountID)] += h.Amount
		for _, w := range ws[i] {
			windows[w] += h.Amount
		}
	}
	if err := db.insertRows(ctx, tx, openHoldsInsert, ``, rows, nil); err != nil {
		return err
	}
	return db.addHeld(ctx, tx, held, windows)
}

// writeAllPending writes every pending hold open, in tx: for what reads the open holds from the
// database.
func (db *DB) writeAllPending(ctx context.Context, tx *sql.Tx) error {
	return db.writePending(ctx, tx, db.pending.before(time.Time{}))
}

// capWindows adds to each hold's windows (ws[i], of holds[i]) those of the caps its key and
// account have now: a pending hold's windows are those of the caps when it was placed, and a
// cap set since by another process (shareai admin cap, on the file) counted its window from
// the database, without it. Written or settled, the hold then counts in the window, as one
// placed after the cap would. A cap set in this process wrote the pending holds first (setCap).
func (db *DB) capWindows(ctx context.Context, tx *sql.Tx, holds []*store.Hold, ws [][]window) error {
	if len(holds) == 0 {
		return nil
	}
	var scopes []string
	for _, h := range holds {
		scopes = append(scopes, store.KeyScope(h.KeyID), store.AccountScope(h.AccountID))
	}
	slices.Sort(scopes)
	caps := map[string][]string{} // scope → periods
	err := db.inChunks(ctx, tx, `SELECT scope, period FROM spend_caps WHERE scope IN `, ``, nil, slices.Compact(scopes), func(r *sql.Rows) error {
		var scope, period string
		err := r.Scan(&scope, &period)
		caps[scope] = append(caps[scope], period)
		return err
	})
	if err != nil || len(caps) == 0 {
		return err
	}
	for i, h := range holds {
		for _, scope := range []string{store.KeyScope(h.KeyID), store.AccountScope(h.AccountID)} {
			for _, period := range caps[scope] {
				if w := (window{scope, period, millis(store.WindowStart(period, h.CreatedAt))}); !slices.Contains(ws[i], w) {
					ws[i] = append(ws[i], w)
				}
			}
		}
	}
	return nil
}
