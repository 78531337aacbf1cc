package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// What the store keeps of nodes' verification and governance (store.Trust): levels and
// scores, checks, the audit log, and the two movements of money that trust needs: funding the
// platform's own buyer account from the fees, and clawing back a cheat's pending earnings.
// Schema: migrations 0005 and 0008 (the levels of each model on a node, and the over-claims
// counted).

// validLevel reports whether l is one of the store.Level* constants.
func validLevel(l string) bool {
	switch l {
	case store.LevelNew, store.LevelVerified, store.LevelTrusted, store.LevelQuarantined, store.LevelSuspended:
		return true
	}
	return false
}

// SetNodeLevel sets a node's level, why, and since when; store.ErrNotFound for an unknown
// node. Setting the level a node has already records the new reason and time.
func (db *DB) SetNodeLevel(ctx context.Context, nodeID, level, reason string, at time.Time) error {
	if !validLevel(level) {
		return fmt.Errorf("set level of node %s: unknown level %q", nodeID, level)
	}
	res, err := db.w.ExecContext(ctx, db.q(`UPDATE nodes SET level = ?, level_reason = ?, level_changed_at = ? WHERE id = ?`),
		level, reason, millis(at), nodeID)
	if err != nil {
		return fmt.Errorf("set level of node %s: %w", nodeID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("set level of node %s: %w", nodeID, err)
	} else if n == 0 {
		return fmt.Errorf("set level of node %s: %w", nodeID, store.ErrNotFound)
	}
	return nil
}

// ChangeNodeLevel sets a node's level, claws back its pending earnings when c.ClawBackRef is
// set, and records c.Audit's entries, in one transaction; it returns the level before and what
// was clawed back. store.ErrNotFound for an unknown node.
//
// Locking: the clawback's ledger rows first, then the node's row, the order in which a
// settlement that counts a node's over-claims takes them, so that the two cannot deadlock on
// PostgreSQL. A clawback ref used already claws back nothing (as ClawBack), and is looked up
// before it is inserted, since a failed insert would abort the transaction on PostgreSQL.
func (db *DB) ChangeNodeLevel(ctx context.Context, c store.LevelChange) (from string, clawedBack money.Nanos, err error) {
	if !validLevel(c.Level) {
		return "", 0, fmt.Errorf("change level of node %s: unknown level %q", c.NodeID, c.Level)
	}
	err = db.write(ctx, func(tx *sql.Tx) error {
		from, clawedBack = "", 0
		if c.ClawBackRef != "" {
			var used int
			if err := db.txQueryRow(ctx, tx, `SELECT COUNT(*) FROM ledger_txns WHERE id = ?`, "clawback:"+c.ClawBackRef).Scan(&used); err != nil {
				return err
			}
			if used == 0 {
				var err error
				if clawedBack, err = db.clawBack(ctx, tx, c.NodeID, c.ClawBackRef, c.At); err != nil {
					return fmt.Errorf("claw back %s: %w", c.ClawBackRef, err)
				}
			}
		}
		if err := db.txQueryRow(ctx, tx, `SELECT level FROM nodes WHERE id = ?`+db.forUpdate(), c.NodeID).Scan(&from); err != nil {
			return notFound(err)
		}
		if _, err := db.txExec(ctx, tx, `UPDATE nodes SET level = ?, level_reason = ?, level_changed_at = ? WHERE id = ?`,
			c.Level, c.Reason, millis(c.At), c.NodeID); err != nil {
			return err
		}
		if c.Audit == nil {
			return nil
		}
		for _, e := range c.Audit(from, clawedBack) {
			if err := db.addAudit(ctx, tx, &e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", 0, fmt.Errorf("change level of node %s to %s: %w", c.NodeID, c.Level, err)
	}
	return from, clawedBack, nil
}

// validOfferLevel reports whether l is a level a model on a node can have.
func validOfferLevel(l string) bool {
	switch l {
	case store.LevelNew, store.LevelVerified, store.LevelQuarantined:
		return true
	}
	return false
}

// SetOfferLevel sets the level of a model on a node, why and since when, replacing what was
// there. The node need not be known (offer_levels has no foreign key, as node_checks).
func (db *DB) SetOfferLevel(ctx context.Context, l store.OfferLevel) error {
	if !validOfferLevel(l.Level) {
		return fmt.Errorf("set level of %s on node %s: unknown level %q", l.Model, l.NodeID, l.Level)
	}
	_, err := db.w.ExecContext(ctx, db.q(`INSERT INTO offer_levels (node_id, model, level, reason, changed_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (node_id, model) DO UPDATE SET level = excluded.level, reason = excluded.reason, changed_at = excluded.changed_at`),
		l.NodeID, l.Model, l.Level, l.Reason, millis(l.ChangedAt))
	if err != nil {
		return fmt.Errorf("set level of %s on node %s: %w", l.Model, l.NodeID, err)
	}
	return nil
}

// OfferLevels lists the levels of the models of a node, ordered by model.
func (db *DB) OfferLevels(ctx context.Context, nodeID string) ([]store.OfferLevel, error) {
	ls, err := queryAll(ctx, db.r, db.q(`SELECT node_id, model, level, reason, changed_at FROM offer_levels
WHERE node_id = ? ORDER BY model`), []any{nodeID},
		func(rows *sql.Rows) (store.OfferLevel, error) {
			var (
				l  store.OfferLevel
				at int64
			)
			if err := rows.Scan(&l.NodeID, &l.Model, &l.Level, &l.Reason, &at); err != nil {
				return l, err
			}
			l.ChangedAt = fromMillis(at)
			return l, nil
		})
	if err != nil {
		return nil, fmt.Errorf("offer levels of node %s: %w", nodeID, err)
	}
	return ls, nil
}

// CheckOverclaims turns the over-claims of a node not counted yet (nodes.overclaims beyond
// nodes.overclaims_checked) into one failed check of kind usage, in one transaction, and
// returns how many. It reads first, outside any transaction, so that a node without new
// over-claims costs no write. An unknown node has none.
func (db *DB) CheckOverclaims(ctx context.Context, nodeID string, at time.Time) (int, error) {
	var fresh int64
	err := db.r.QueryRowContext(ctx, db.q(`SELECT overclaims - overclaims_checked FROM nodes WHERE id = ?`), nodeID).Scan(&fresh)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("over-claims of node %s: %w", nodeID, err)
	case fresh <= 0:
		return 0, nil
	}
	var n int64
	err = db.write(ctx, func(tx *sql.Tx) error {
		var claims, checked int64
		if err := db.txQueryRow(ctx, tx, `SELECT overclaims, overclaims_checked FROM nodes WHERE id = ?`+db.forUpdate(), nodeID).
			Scan(&claims, &checked); err != nil {
			return err
		}
		if n = claims - checked; n <= 0 {
			return nil
		}
		if _, err := db.txExec(ctx, tx, `UPDATE nodes SET overclaims_checked = ? WHERE id = ?`, claims, nodeID); err != nil {
			return err
		}
		detail := fmt.Sprintf("%d requests' usage claims were implausible and not billed as claimed", n)
		if n == 1 {
			detail = "1 request's usage claim was implausible and not billed as claimed"
		}
		_, err := db.txExec(ctx, tx, `INSERT INTO node_checks (node_id, at, kind, model, passed, detail) VALUES (?, ?, ?, ?, ?, ?)`,
			nodeID, millis(at), store.CheckUsage, "", false, detail)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("count over-claims of node %s: %w", nodeID, err)
	}
	return int(max(n, 0)), nil
}

// SetNodeScores records nodes' reputation scores, computed at at, in one transaction. Unknown
// ids are skipped; a score outside [0, 1] (or NaN) is an error and records nothing. A node
// whose score was never set reads as Score 0.
//
// The rows are updated in chunks, in id order (so that two writers lock them in the same
// order), by one UPDATE … FROM (VALUES …) per chunk; both databases name the columns of a
// VALUES list column1, column2, … The casts give PostgreSQL the parameters' types.
func (db *DB) SetNodeScores(ctx context.Context, scores map[string]float64, at time.Time) error {
	if len(scores) == 0 {
		return nil
	}
	ids := make([]string, 0, len(scores))
	for id, s := range scores {
		if math.IsNaN(s) || s < 0 || s > 1 {
			return fmt.Errorf("set scores: score %v of node %s is not in [0, 1]", s, id)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	err := db.write(ctx, func(tx *sql.Tx) error {
		for rest := ids; len(rest) > 0; {
			n := chunkSize(len(rest), false)
			args := make([]any, 0, 1+2*n)
			args = append(args, millis(at))
			for _, id := range rest[:n] {
				args = append(args, id, scores[id])
			}
			row := "(CAST(? AS TEXT), CAST(? AS DOUBLE PRECISION))"
			q := `UPDATE nodes SET score = v.column2, score_at = ? FROM (VALUES ` +
				strings.Repeat(row+", ", n-1) + row + `) AS v WHERE nodes.id = v.column1`
			if _, err := db.txExec(ctx, tx, q, args...); err != nil {
				return err
			}
			rest = rest[n:]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set scores of %d nodes: %w", len(scores), err)
	}
	return nil
}

// AddNodeChecks records verification results, in one transaction. Checks of unknown nodes are
// recorded too (node_checks has no foreign key).
func (db *DB) AddNodeChecks(ctx context.Context, checks []store.NodeCheck) error {
	if len(checks) == 0 {
		return nil
	}
	rows := newRows(len(checks))
	for _, c := range checks {
		rows.add(c.NodeID, millis(c.At), c.Kind, c.Model, c.Passed, c.Detail)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		return db.insertRows(ctx, tx, `INSERT INTO node_checks (node_id, at, kind, model, passed, detail)`, ``, rows, nil)
	})
	if err != nil {
		return fmt.Errorf("add %d node checks: %w", len(checks), err)
	}
	return nil
}

// NodeChecks lists a node's checks, newest first (of checks at the same time, the last
// recorded first), at most limit; none if limit is not positive.
func (db *DB) NodeChecks(ctx context.Context, nodeID string, limit int) ([]store.NodeCheck, error) {
	if limit <= 0 {
		return nil, nil
	}
	cs, err := queryAll(ctx, db.r, db.q(`SELECT node_id, at, kind, model, passed, detail FROM node_checks
WHERE node_id = ? ORDER BY at DESC, id DESC LIMIT ?`), []any{nodeID, limit},
		func(rows *sql.Rows) (store.NodeCheck, error) {
			var (
				c  store.NodeCheck
				at int64
			)
			if err := rows.Scan(&c.NodeID, &at, &c.Kind, &c.Model, &c.Passed, &c.Detail); err != nil {
				return c, err
			}
			c.At = fromMillis(at)
			return c, nil
		})
	if err != nil {
		return nil, fmt.Errorf("checks of node %s: %w", nodeID, err)
	}
	return cs, nil
}

// AddAudit records an entry and sets its ID; a zero At is the time now.
func (db *DB) AddAudit(ctx context.Context, e *store.AuditEntry) error {
	if e.At.IsZero() {
		e.At = db.now()
	}
	err := db.w.QueryRowContext(ctx, db.q(auditInsert), millis(e.At), e.Actor, e.Action, e.Target, e.Detail).Scan(&e.ID)
	if err != nil {
		return fmt.Errorf("audit %s of %s: %w", e.Action, e.Target, err)
	}
	return nil
}

const auditInsert = `INSERT INTO audit_log (at, actor, action, target, detail) VALUES (?, ?, ?, ?, ?) RETURNING id`

// addAudit is AddAudit in a transaction.
func (db *DB) addAudit(ctx context.Context, tx *sql.Tx, e *store.AuditEntry) error {
	if e.At.IsZero() {
		e.At = db.now()
	}
	if err := db.txQueryRow(ctx, tx, auditInsert, millis(e.At), e.Actor, e.Action, e.Target, e.Detail).Scan(&e.ID); err != nil {
		return fmt.Errorf("audit %s of %s: %w", e.Action, e.Target, err)
	}
	return nil
}

// AuditLog lists the entries about target (every target when ""), newest first (of entries at
// the same time, the last recorded first), at most limit; none if limit is not positive.
func (db *DB) AuditLog(ctx context.Context, target string, limit int) ([]store.AuditEntry, error) {
	if limit <= 0 {
		return nil, nil
	}
	const cols = `SELECT id, at, actor, action, target, detail FROM audit_log`
	query, args := cols+` ORDER BY at DESC, id DESC LIMIT ?`, []any{limit}
	if target != "" {
		query, args = cols+` WHERE target = ? ORDER BY at DESC, id DESC LIMIT ?`, []any{target, limit}
	}
	es, err := queryAll(ctx, db.r, db.q(query), args, func(rows *sql.Rows) (store.AuditEntry, error) {
		var (
			e  store.AuditEntry
			at int64
		)
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Target, &e.Detail); err != nil {
			return e, err
		}
		e.At = fromMillis(at)
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit log of %q: %w", target, err)
	}
	return es, nil
}

// FundFromFees moves amount from the platform's fees to a buyer's balance, in one transaction
// "fund:<ref>": fees −amount, buyer:<account> +amount (the buyer's ledger account is made if
// missing). store.ErrInsufficient when the fees' balance is less than amount,
// store.ErrConflict when ref was used already.
func (db *DB) FundFromFees(ctx context.Context, accountID string, amount money.Nanos, ref string, at time.Time) error {
	if amount <= 0 {
		return fmt.Errorf("fund %s from fees: amount must be positive", ref)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		txn := "fund:" + ref
		if err := db.beginTxn(ctx, tx, txn, "fund", ref, at); err != nil {
			return err
		}
		buyer := buyerAccount(accountID)
		if err := db.ensureAccount(ctx, tx, buyer, accountID, "buyer"); err != nil {
			return err
		}
		// The buyer's row first, then the fees': the order in which settlements lock them
		// ("buyer:…" sorts before "fees"), so that the two cannot deadlock on PostgreSQL.
		if err := db.post(ctx, tx, txn, buyer, amount, "", time.Time{}, at); err != nil {
			return err
		}
		// A conditional update: it changes nothing unless the fees hold enough.
		res, err := db.txExec(ctx, tx, `UPDATE ledger_accounts SET balance = balance - ? WHERE id = ? AND balance >= ?`,
			int64(amount), feesAccount, int64(amount))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return store.ErrInsufficient
		}
		_, err = db.txExec(ctx, tx, `INSERT INTO ledger_entries (txn_id, account, amount, created_at) VALUES (?, ?, ?, ?)`,
			txn, feesAccount, -int64(amount), millis(at))
		return err
	})
	if err != nil {
		return fmt.Errorf("fund %s to %s from fees: %w", ref, accountID, err)
	}
	return nil
}

// ClawBack returns a node's pending earnings to the buyers who paid them, with the platform's
// fee on them, in one transaction "clawback:<ref>", and returns how much the buyers got back.
// A second call with the same ref does nothing and returns 0.
//
// The node's pending earnings are its unreleased credits to a provider's pending account
// (released = 0, node_id = the node). For each request (settlement transaction) they come
// from, with e the node's credits in it, E all the providers' credits in it, and d the buyer's
// debit, the buyer gets back floor(d·e/E): the node's share of what the buyer paid, that is e
// plus the same share of the request's fee, rounded down to the nano-dollar. (A request served
// by several nodes after failover keeps the fee on the other nodes' parts.) The fees account
// pays the fee's share, e − floor(d·e/E) in all: negative when the request carried a fee, so
// the fees account is debited, positive when the platform subsidized the request, so the fees
// get their subsidy's share back. The fees account is debited even if that takes it below
// zero: the buyers are owed the money whatever the platform did with its fees.
//
// The clawed-back credits get released = 2, so that neither ReleaseEarnings (released = 0
// only) nor a later clawback touches them again, and Earnings counts them neither pending nor
// available. The transaction's entries, which sum to zero, are one debit per pending account
// the node was credited on, one credit per buyer, and one entry on the fees account; they
// carry no node_id and no release_at, so neither Earnings nor ReleaseEarnings sees them.
func (db *DB) ClawBack(ctx context.Context, nodeID, ref string, at time.Time) (money.Nanos, error) {
	var (
		total money.Nanos
		again bool
	)
	err := db.write(ctx, func(tx *sql.Tx) error {
		var err error
		total, err = db.clawBack(ctx, tx, nodeID, ref, at)
		again = errors.Is(err, store.ErrConflict)
		return err
	})
	if again {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("claw back %s from node %s: %w", ref, nodeID, err)
	}
	return total, nil
}

// clawBack is ClawBack's transaction: store.ErrConflict (from beginTxn) when ref was used.
func (db *DB) clawBack(ctx context.Context, tx *sql.Tx, nodeID, ref string, at time.Time) (money.Nanos, error) {
	var total money.Nanos
	txn := "clawback:" + ref
	// Recorded even when nothing is pending, so that the ref is used once: a retry must not
	// claw back what the node earned since.
	if err := db.beginTxn(ctx, tx, txn, "clawback", ref, at); err != nil {
		return 0, err
	}

	// The node's pending credits, locked, per settlement transaction.
	type claim struct {
		pending map[string]money.Nanos // pending account → the node's credits on it
		e       money.Nanos
	}
	claims := map[string]*claim{}
	rows, err := db.txQuery(ctx, tx, `SELECT txn_id, account, amount FROM ledger_entries
WHERE node_id = ? AND node_id IS NOT NULL AND released = 0 AND amount > 0 AND account LIKE 'pending:%'`+db.forUpdate(), nodeID)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var id, acct string
		var amount int64
		if err := rows.Scan(&id, &acct, &amount); err != nil {
			rows.Close()
			return 0, err
		}
		c := claims[id]
		if c == nil {
			c = &claim{pending: map[string]money.Nanos{}}
			claims[id] = c
		}
		c.pending[acct] += money.Nanos(amount)
		c.e += money.Nanos(amount)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(claims) == 0 {
		return total, nil
	}
	txns := slices.Sorted(maps.Keys(claims))

	// Each request's buyers' debits and all its providers' credits.
	type request struct {
		debits  map[string]money.Nanos // buyer account → debit
		credits money.Nanos
	}
	reqs := map[string]*request{}
	err = db.inChunks(ctx, tx, `SELECT txn_id, account, amount, node_id FROM ledger_entries WHERE txn_id IN `, ``, nil, txns,
		func(r *sql.Rows) error {
			var id, acct string
			var amount int64
			var node sql.NullString
			if err := r.Scan(&id, &acct, &amount, &node); err != nil {
				return err
			}
			q := reqs[id]
			if q == nil {
				q = &request{debits: map[string]money.Nanos{}}
				reqs[id] = q
			}
			switch {
			case strings.HasPrefix(acct, "buyer:") && amount < 0:
				q.debits[acct] += money.Nanos(-amount)
			case strings.HasPrefix(acct, "pending:") && node.Valid && amount > 0:
				q.credits += money.Nanos(amount)
			}
			return nil
		})
	if err != nil {
		return 0, err
	}

	delta := map[string]money.Nanos{} // ledger account → change
	for _, id := range txns {
		c, q := claims[id], reqs[id]
		var refunded money.Nanos
		for buyer, d := range q.debits {
			r := share(d, c.e, q.credits)
			delta[buyer] += r
			refunded += r
		}
		for acct, e := range c.pending {
			delta[acct] -= e
		}
		delta[feesAccount] += c.e - refunded
		total += refunded
	}

	if err := db.inChunks(ctx, tx, `UPDATE ledger_entries SET released = 2
WHERE node_id = ? AND released = 0 AND amount > 0 AND account LIKE 'pending:%' AND txn_id IN `, ``, []any{nodeID}, txns, nil); err != nil {
		return 0, err
	}
	// Shared rows in sorted order, as settlements update them.
	for _, acct := range slices.Sorted(maps.Keys(delta)) {
		if delta[acct] == 0 {
			continue
		}
		if acct == feesAccount {
			if err := db.ensureAccount(ctx, tx, feesAccount, "", "fees"); err != nil {
				return 0, err
			}
		}
		if err := db.post(ctx, tx, txn, acct, delta[acct], "", time.Time{}, at); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// share is floor(d·e/total), for 0 ≤ e ≤ total, computed in 128 bits; 0 when total is 0.
func share(d, e, total money.Nanos) money.Nanos {
	if total <= 0 || d <= 0 || e <= 0 {
		return 0
	}
	e = min(e, total)
	hi, lo := bits.Mul64(uint64(d), uint64(e))
	q, _ := bits.Div64(hi, lo, uint64(total)) // q ≤ d, so it cannot overflow
	return money.Nanos(q)
}
