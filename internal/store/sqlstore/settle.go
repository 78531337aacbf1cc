package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
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

// settle closes a batch's holds in tx, appending to made the ledger accounts it ensured.
func (db *DB) settle(ctx context.Context, tx *sql.Tx, batch []*store.Settlement, errs []error, made *[]string) error {
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
		return err
	}
	// The requests not held open: pending (lazy), closed already (settling is idempotent), or
	// never held.
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
			return err
		}
		for i, h := range hs {
			holds[h.RequestID] = &openHold{accountID: h.AccountID, keyID: h.KeyID, windows: formatWindows(ws[i]), replica: h.Replica,
				amount: h.Amount, createdAt: millis(h.CreatedAt), pending: true}
		}
	}
	closed := map[string]bool{}
	if len(missing) > 0 {
		if closed, err = db.heldRequests(ctx, tx, []string{"holds"}, missing); err != nil {
			return err
		}
	}

	var (
		done                      []string // the requests whose holds close
		txns, entries, uses, shut [][]any
		receipts                  [][]any
		balance                   = map[string]money.Nanos{}
		held                      = map[string]money.Nanos{}
		spent                     = map[window][2]money.Nanos{}
		ensure                    = map[string][2]string{} // ledger account → owner, kind
		flagged                   = map[string]int{}       // node → over-claims
	)
	for i, s := range batch {
		for _, r := range s.Receipts { // a record of the jobs that ran, whatever the money does
			receipts = append(receipts, receiptArgs(r))
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
		status := "settled"
		if s.Debit == 0 {
			status = "voided"
		}
		shut = append(shut, []any{s.RequestID, h.accountID, h.keyID, int64(h.amount), h.windows, status, h.createdAt, millis(s.At), h.replica})
		buyer := buyerAccount(h.accountID)
		unheld := h.amount // what the database holds for it
		if h.pending {
			db.pending.take(s.RequestID)
			unheld = 0
		} else {
			done = append(done, s.RequestID)
		}
		held[buyer] -= unheld
		for _, w := range ws {
			d := spent[w]
			spent[w] = [2]money.Nanos{d[0] + s.Debit, d[1] - unheld}
		}
		if s.Usage != nil {
			uses = append(uses, usageArgs(s.Usage))
		}
		for _, n := range s.Flagged {
			flagged[n]++
		}
		if s.Debit == 0 {
			continue
		}
		txn := "settle:" + s.RequestID
		txns = append(txns, []any{txn, "settle", s.RequestID, millis(s.At)})
		entries = append(entries, []any{txn, buyer, -int64(s.Debit), nil, nil, millis(s.At), "", 0})
		balance[buyer] -= s.Debit
		for _, p := range s.Parts {
			if p.Earned > 0 {
				acct := pendingAccount(p.ProviderID)
				ensure[acct] = [2]string{p.ProviderID, "pending"}
				entries = append(entries, []any{txn, acct, int64(p.Earned), p.NodeID, nullMillis(s.ReleaseAt), millis(s.At), p.AskWindow, p.Surge})
				balance[acct] += p.Earned
			}
		}
		if fee := s.Fee - s.Subsidy; fee != 0 {
			ensure[feesAccount] = [2]string{"", "fees"}
			entries = append(entries, []any{txn, feesAccount, int64(fee), nil, nil, millis(s.At), "", 0})
			balance[feesAccount] += fee
		}
	}

	for _, acct := range sortedKeys(ensure) {
		if _, ok := db.ensured.Load(acct); ok {
			continue
		}
		if err := db.ensureAccount(ctx, tx, acct, ensure[acct][0], ensure[acct][1]); err != nil {
			return err
		}
		*made = append(*made, acct)
	}
	// The holds close: out of open_holds (their rows locked above), into holds.
	slices.Sort(done)
	if err := db.inChunks(ctx, tx, `DELETE FROM open_holds WHERE request_id IN `, ``, nil, done, nil); err != nil {
		return err
	}
	if err := db.insertRows(ctx, tx, `INSERT INTO holds (request_id, account_id, key_id, amount, windows, status, created_at, closed_at, replica)`, ``, shut, nil); err != nil {
		return err
	}
	if len(txns) > 0 {
		if err := db.insertRows(ctx, tx, `INSERT INTO ledger_txns (id, kind, ref, created_at)`, ``, txns, nil); err != nil {
			return err
		}
		if err := db.insertRows(ctx, tx, `INSERT INTO ledger_entries (txn_id, account, amount, node_id, release_at, created_at, ask_window, surge_bp)`, ``, entries, nil); err != nil {
			return err
		}
	}
	if err := db.insertReceipts(ctx, tx, receipts); err != nil {
		return err
	}
	if len(uses) > 0 {
		if err := db.insertRows(ctx, tx, `INSERT INTO usage (`+usageColumns+`)`, `ON CONFLICT (request_id) DO NOTHING`, uses, nil); err != nil {
			return fmt.Errorf("record usage: %w", err)
		}
	}
	for _, node := range sortedKeys(flagged) {
		if _, err := db.txExec(ctx, tx, `UPDATE nodes SET overclaims = overclaims + ? WHERE id = ?`, flagged[node], node); err != nil {
			return err
		}
	}
	// Shared rows last, each once, in a fixed order so that concurrent batches of several
	// coordinators cannot deadlock.
	for _, acct := range sortedKeys(mergeKeys(balance, held)) {
		if b, h := balance[acct], held[acct]; b != 0 || h != 0 {
			if _, err := db.txExec(ctx, tx, `UPDATE ledger_accounts SET balance = balance + ?, held = held + ? WHERE id = ?`,
				int64(b), int64(h), acct); err != nil {
				return err
			}
		}
	}
	for _, w := range sortedWindows(spent) {
		// A window only pending holds counted in has no row yet.
		d := spent[w]
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

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
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
