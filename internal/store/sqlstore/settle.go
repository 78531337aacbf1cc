package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// A settlement closes its request's hold: out of open_holds (or out of memory, for a lazy hold)
// into holds, with its ledger transaction (the buyer's debit, each node's pending earnings, the
// platform's fee), its usage record and its receipts, all in the transaction of its batch
// (Commit, in hold.go).

// Settle closes holds in one transaction.
func (db *DB) Settle(ctx context.Context, batch []*store.Settlement) []error {
	_, errs, _ := db.Commit(ctx, &store.Writes{Settlements: batch})
	return errs
}

// openHold is an open hold as a settlement finds it.
type openHold struct {
	accountID, keyID, windows, replica string
	amount                             money.Nanos
	createdAt                          int64
	closing                            bool // settled by a settlement before in the batch
	pending                            bool // lazy, not written: the database holds none of it
}

// settle closes a batch's holds in tx, appending to made the ledger accounts it ensured: it
// finds the holds, checks each settlement against its own and plans its rows, then writes
// them all, the rows every request shares last.
func (db *DB) settle(ctx context.Context, tx *sql.Tx, batch []*store.Settlement, errs []error, made *[]string) error {
	holds, closed, err := db.settlingHolds(ctx, tx, batch)
	if err != nil {
		return err
	}
	p := settlement{
		shut:     newRows(len(batch)),
		txns:     newRows(len(batch)),
		entries:  newRows(3 * len(batch)),
		uses:     newRows(len(batch)),
		receipts: newRows(len(batch)),
		balance:  map[string]money.Nanos{},
		held:     map[string]money.Nanos{},
		spent:    map[window][2]money.Nanos{},
		ensure:   map[string][2]string{},
		flagged:  map[string]int{},
	}
	for i, s := range batch {
		for _, r := range s.Receipts { // a record of the jobs that ran, whatever the money does
			addReceipt(&p.receipts, r)
		}
		h := holds[s.RequestID]
		if err := checkSettlement(s, h, closed[s.RequestID]); err != nil {
			errs[i] = err
			continue
		}
		ws, err := parseWindows(h.windows)
		if err != nil {
			errs[i] = err
			continue
		}
		if s.Line != nil {
			// A batch line's result commits with its money, or neither does.
			if ok, err := db.finishLine(ctx, tx, s.Line); err != nil {
				return err
			} else if !ok {
				errs[i] = fmt.Errorf("settle request %s: %w", s.RequestID, store.ErrStale)
				continue
			}
		}
		h.closing = true // a second settlement of it in this batch finds it closed
		if h.pending {
			db.pending.take(s.RequestID)
		}
		p.add(s, h, ws)
	}
	return db.writeSettlement(ctx, tx, &p, made)
}

// settlingHolds returns the holds a batch settles, open (locked, in the order of their ids)
// or pending, by request id, and which of the others have closed already (settling is
// idempotent); a request in neither was never held.
func (db *DB) settlingHolds(ctx context.Context, tx *sql.Tx, batch []*store.Settlement) (map[string]*openHold, map[string]bool, error) {
	ids := make([]string, len(batch))
	for i, s := range batch {
		ids[i] = s.RequestID
	}
	slices.Sort(ids) // holds are locked in the order of their ids, as checkpoints lock them
	holds := map[string]*openHold{}
	err := db.inChunks(ctx, tx, `SELECT request_id, account_id, key_id, amount, windows, created_at, replica FROM open_holds WHERE request_id IN `,
		` ORDER BY request_id`+db.forUpdate(), nil, ids,
		func(r *sql.Rows) error {
			var id string
			var h openHold
			var amount int64
			if err := r.Scan(&id, &h.accountID, &h.keyID, &amount, &h.windows, &h.createdAt, &h.replica); err != nil {
				return err
			}
			h.amount = money.Nanos(amount)
			holds[id] = &h
			return nil
		})
	if err != nil {
		return nil, nil, err
	}
	// The requests not held open: pending (lazy), closed already, or never held.
	var missing []string
	var pending []*pendingHold
	for _, id := range ids {
		if holds[id] != nil || (len(missing) > 0 && missing[len(missing)-1] == id) {
			continue
		}
		if ph := db.pending.getTx(id); ph != nil {
			if len(pending) == 0 || pending[len(pending)-1] != ph { // ids are sorted
				pending = append(pending, ph)
			}
			continue
		}
		missing = append(missing, id)
	}
	if len(pending) > 0 {
		hs, ws := make([]*store.Hold, len(pending)), make([][]window, len(pending))
		for i, ph := range pending {
			hs[i], ws[i] = &ph.hold, slices.Clone(ph.windows)
		}
		if err := db.capWindows(ctx, tx, hs, ws); err != nil {
			return nil, nil, err
		}
		for i, h := range hs {
			holds[h.RequestID] = &openHold{accountID: h.AccountID, keyID: h.KeyID, windows: formatWindows(ws[i]), replica: h.Replica,
				amount: h.Amount, createdAt: millis(h.CreatedAt), pending: true}
		}
	}
	closed := map[string]bool{}
	if len(missing) > 0 {
		if closed, err = db.heldRequests(ctx, tx, []string{"holds"}, missing); err != nil {
			return nil, nil, err
		}
	}
	return holds, closed, nil
}

// settlement is what a batch of settlements writes: rows per request, and the sums of what
// they move on the rows they share.
type settlement struct {
	done                      []string // the requests whose holds leave open_holds
	txns, entries, uses, shut rows
	receipts                  rows
	balance                   map[string]money.Nanos    // ledger account → change
	held                      map[string]money.Nanos    // ledger account → change
	spent                     map[window][2]money.Nanos // spend window → change of spent, held
	ensure                    map[string][2]string      // ledger account → owner, kind
	flagged                   map[string]int            // node → over-claims
}

// add plans the rows of s, checked against h, its hold, which counts in the windows ws.
func (p *settlement) add(s *store.Settlement, h *openHold, ws []window) {
	status := "settled"
	if s.Debit == 0 {
		status = "voided"
	}
	// Values that several rows hold are put in an interface once, which allocates.
	id, at := any(s.RequestID), any(millis(s.At))
	p.shut.add(id, h.accountID, h.keyID, int64(h.amount), h.windows, status, h.createdAt, at, h.replica)
	buyer := buyerAccount(h.accountID)
	unheld := h.amount // what the database holds for it
	if h.pending {
		unheld = 0
	} else {
		p.done = append(p.done, s.RequestID)
	}
	p.held[buyer] -= unheld
	for _, w := range ws {
		d := p.spent[w]
		p.spent[w] = [2]money.Nanos{d[0] + s.Debit, d[1] - unheld}
	}
	if s.Usage != nil {
		addUsage(&p.uses, s.Usage)
	}
	for _, n := range s.Flagged {
		p.flagged[n]++
	}
	if s.Debit == 0 {
		return
	}
	txn := any("settle:" + s.RequestID)
	p.txns.add(txn, "settle", id, at)
	p.entries.add(txn, buyer, -int64(s.Debit), nil, nil, at, "", 0)
	p.balance[buyer] -= s.Debit
	for _, part := range s.Parts {
		if part.Earned > 0 {
			acct := pendingAccount(part.ProviderID)
			p.ensure[acct] = [2]string{part.ProviderID, "pending"}
			p.entries.add(txn, acct, int64(part.Earned), part.NodeID, nullMillis(s.ReleaseAt), at, part.AskWindow, part.Surge)
			p.balance[acct] += part.Earned
		}
	}
	if fee := s.Fee - s.Subsidy; fee != 0 {
		p.ensure[feesAccount] = [2]string{"", "fees"}
		p.entries.add(txn, feesAccount, int64(fee), nil, nil, at, "", 0)
		p.balance[feesAccount] += fee
	}
}

// writeSettlement writes p's rows in tx: each request's, then the rows they share, each once,
// in a fixed order so that concurrent batches of several coordinators cannot deadlock.
func (db *DB) writeSettlement(ctx context.Context, tx *sql.Tx, p *settlement, made *[]string) error {
	for _, acct := range slices.Sorted(maps.Keys(p.ensure)) {
		if _, ok := db.ensured.Load(acct); ok {
			continue
		}
		if err := db.ensureAccount(ctx, tx, acct, p.ensure[acct][0], p.ensure[acct][1]); err != nil {
			return err
		}
		*made = append(*made, acct)
	}
	// The holds close: out of open_holds (their rows locked above), into holds.
	slices.Sort(p.done)
	if err := db.inChunks(ctx, tx, `DELETE FROM open_holds WHERE request_id IN `, ``, nil, p.done, nil); err != nil {
		return err
	}
	if err := db.insertRows(ctx, tx, `INSERT INTO holds (request_id, account_id, key_id, amount, windows, status, created_at, closed_at, replica)`, ``, p.shut, nil); err != nil {
		return err
	}
	if p.txns.len() > 0 {
		if err := db.insertRows(ctx, tx, `INSERT INTO ledger_txns (id, kind, ref, created_at)`, ``, p.txns, nil); err != nil {
			return err
		}
		if err := db.insertRows(ctx, tx, `INSERT INTO ledger_entries (txn_id, account, amount, node_id, release_at, created_at, ask_window, surge_bp)`, ``, p.entries, nil); err != nil {
			return err
		}
	}
	if err := db.insertReceipts(ctx, tx, p.receipts); err != nil {
		return err
	}
	if p.uses.len() > 0 {
		if err := db.insertRows(ctx, tx, `INSERT INTO usage (`+usageColumns+`)`, `ON CONFLICT (request_id) DO NOTHING`, p.uses, nil); err != nil {
			return fmt.Errorf("record usage: %w", err)
		}
	}
	for _, node := range slices.Sorted(maps.Keys(p.flagged)) {
		if _, err := db.txExec(ctx, tx, `UPDATE nodes SET overclaims = overclaims + ? WHERE id = ?`, p.flagged[node], node); err != nil {
			return err
		}
	}
	for _, acct := range slices.Sorted(maps.Keys(mergeKeys(p.balance, p.held))) {
		if b, h := p.balance[acct], p.held[acct]; b != 0 || h != 0 {
			if _, err := db.txExec(ctx, tx, `UPDATE ledger_accounts SET balance = balance + ?, held = held + ? WHERE id = ?`,
				int64(b), int64(h), acct); err != nil {
				return err
			}
		}
	}
	for _, w := range sortedWindows(p.spent) {
		// A window only pending holds counted in has no row yet.
		d := p.spent[w]
		if _, err := db.txExec(ctx, tx, `INSERT INTO spend_windows (scope, period, window_start, spent, held) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (scope, period, window_start) DO UPDATE SET spent = spend_windows.spent + excluded.spent, held = spend_windows.held + excluded.held`,
			w.scope, w.period, w.start, int64(d[0]), int64(d[1])); err != nil {
			return err
		}
	}
	return nil
}

// checkSettlement refuses a settlement whose hold is missing or closed (h nil and closed, or
// closing), or whose amounts do not add up.
func checkSettlement(s *store.Settlement, h *openHold, closed bool) error {
	if h == nil && !closed {
		return fmt.Errorf("settle request %s: %w", s.RequestID, store.ErrNotFound)
	}
	if h == nil || h.closing {
		return fmt.Errorf("settle request %s: %w", s.RequestID, store.ErrClosed)
	}
	var earned money.Nanos
	for _, p := range s.Parts {
		if p.Earned < 0 {
			return fmt.Errorf("settle request %s: negative earnings for node %s", s.RequestID, p.NodeID)
		}
		earned += p.Earned
	}
	switch {
	case s.Fee < 0 || s.Subsidy < 0 || s.Debit+s.Subsidy != earned+s.Fee:
		return fmt.Errorf("settle request %s: debit %d and subsidy %d are not earnings %d plus fee %d", s.RequestID, s.Debit, s.Subsidy, earned, s.Fee)
	case s.Debit > h.amount:
		return fmt.Errorf("settle request %s: debit %d exceeds the hold of %d", s.RequestID, s.Debit, h.amount)
	}
	return nil
}

func mergeKeys(a, b map[string]money.Nanos) map[string]bool {
	m := make(map[string]bool, len(a)+len(b))
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}
