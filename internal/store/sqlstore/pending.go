package sqlstore

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// Lazy holds (store.Hold.Lazy), on SQLite. A hold is checked in its batch's write transaction
// as any other, against the balance and the caps less what the open holds and these pending
// ones hold, but it is kept here rather than written: most requests end within a second, and
// their settlement then writes the hold closed in its own transaction, so a request costs one
// commit instead of two, and none before its first token. A hold is written open when its
// request is checkpointed (streams that run for long), raised, or when a cap is set or holds
// are claimed, each of which reads the open holds from the database; the reads of Balance,
// Spending and OpenHolds add the pending ones.
//
// Every change here is made inside a write transaction, which on SQLite runs alone, and is
// undone if the transaction does not commit (end).

// pendingHolds are the lazy holds of this process that are not written yet.
type pendingHolds struct {
	mu       sync.Mutex
	holds    map[string]*pendingHold // by request id
	accounts map[string]money.Nanos  // a buyer's ledger account → what its pending holds hold
	windows  map[window]money.Nanos  // a spend window → what its pending holds hold
	undo     []func()                // the running transaction's changes, last first when undone
}

type pendingHold struct {
	hold    store.Hold
	windows []window
}

// add keeps a hold placed in the running transaction.
func (p *pendingHolds) add(h *store.Hold, ws []window) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holds == nil {
		p.holds, p.accounts, p.windows = map[string]*pendingHold{}, map[string]money.Nanos{}, map[window]money.Nanos{}
	}
	ph := &pendingHold{hold: *h, windows: ws}
	ph.hold.Lazy = false
	p.put(ph, 1)
	p.undo = append(p.undo, func() { p.put(ph, -1) })
}

// take removes a hold that the running transaction settles or writes, and returns it; nil when
// the request has no pending hold.
func (p *pendingHolds) take(requestID string) *pendingHold {
	p.mu.Lock()
	defer p.mu.Unlock()
	ph := p.holds[requestID]
	if ph != nil {
		p.put(ph, -1)
		p.undo = append(p.undo, func() { p.put(ph, 1) })
	}
	return ph
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
	for _, w := range ph.windows {
		p.windows[w] += sign * ph.hold.Amount
		if p.windows[w] == 0 {
			delete(p.windows, w)
		}
	}
}

// end ends the running transaction's changes: kept when it committed, undone when not.
func (p *pendingHolds) end(committed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !committed {
		for _, f := range slices.Backward(p.undo) {
			f()
		}
	}
	clear(p.undo)
	p.undo = p.undo[:0]
}

// get returns a request's pending hold, or nil.
func (p *pendingHolds) get(requestID string) *pendingHold {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holds[requestID]
}

// account returns what a buyer's pending holds hold.
func (p *pendingHolds) account(ledgerAccount string) money.Nanos {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accounts[ledgerAccount]
}

// window returns what the pending holds that count in a spend window hold.
func (p *pendingHolds) window(w window) money.Nanos {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.windows[w]
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

// ids returns the request ids of the pending holds, sorted.
func (p *pendingHolds) ids() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for id := range p.holds {
			if !yield(id) {
				return
			}
		}
	})
}

// before returns the request ids of the pending holds placed before t, sorted.
func (p *pendingHolds) before(t time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for id, ph := range p.holds {
		if ph.hold.CreatedAt.Before(t) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// writePending writes the pending holds of the requests open, in tx, as placeHolds writes a
// hold that is not lazy; requests with none are skipped.
func (db *DB) writePending(ctx context.Context, tx *sql.Tx, requestIDs []string) error {
	var rows [][]any
	held := map[string]money.Nanos{}
	windows := map[window]money.Nanos{}
	for _, id := range requestIDs {
		ph := db.pending.take(id)
		if ph == nil {
			continue
		}
		h := &ph.hold
		rows = append(rows, []any{h.RequestID, h.AccountID, h.KeyID, int64(h.Amount), formatWindows(ph.windows), millis(h.CreatedAt), h.Replica})
		held[buyerAccount(h.AccountID)] += h.Amount
		for _, w := range ph.windows {
			windows[w] += h.Amount
		}
	}
	if len(rows) == 0 {
		return nil
	}
	if err := db.insertRows(ctx, tx, openHoldsInsert, ``, rows, nil); err != nil {
		return err
	}
	return db.addHeld(ctx, tx, held, windows)
}

// writeAllPending writes every pending hold open, in tx: for what reads the open holds from the
// database.
func (db *DB) writeAllPending(ctx context.Context, tx *sql.Tx) error {
	return db.writePending(ctx, tx, db.pending.ids())
}

// pendingWindows adds to the windows of the pending holds about to settle those of the caps
// their scopes have now: a cap set by another process (shareai admin cap) while they were
// pending counted the window from the database, which did not have them, so their debits
// count in it when they settle. A cap set in this process wrote them first (setCap).
func (db *DB) pendingWindows(ctx context.Context, tx *sql.Tx, holds map[string]*openHold) error {
	var scopes []string
	for _, h := range holds {
		if h.pending {
			scopes = append(scopes, store.KeyScope(h.keyID), store.AccountScope(h.accountID))
		}
	}
	if len(scopes) == 0 {
		return nil
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
	for _, h := range holds {
		if !h.pending {
			continue
		}
		ws, err := parseWindows(h.windows)
		if err != nil {
			return err
		}
		created := fromMillis(h.createdAt)
		for _, scope := range []string{store.KeyScope(h.keyID), store.AccountScope(h.accountID)} {
			for _, period := range caps[scope] {
				if w := (window{scope, period, millis(store.WindowStart(period, created))}); !slices.Contains(ws, w) {
					ws = append(ws, w)
				}
			}
		}
		h.windows = formatWindows(ws)
	}
	return nil
}
