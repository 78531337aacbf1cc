package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
)

// Ledger account ids.
const (
	feesAccount  = "fees"
	worldAccount = "world"
)

func buyerAccount(accountID string) string     { return "buyer:" + accountID }
func pendingAccount(accountID string) string   { return "pending:" + accountID }
func availableAccount(accountID string) string { return "available:" + accountID }

// ensureAccount creates a ledger account if it does not exist.
func (db *DB) ensureAccount(ctx context.Context, tx *sql.Tx, id, owner, kind string) error {
	var ownerArg any
	if owner != "" {
		ownerArg = owner
	}
	_, err := db.txExec(ctx, tx, `INSERT INTO ledger_accounts (id, account_id, kind) VALUES (?, ?, ?)
ON CONFLICT (id) DO NOTHING`, id, ownerArg, kind)
	return err
}

// post adds an amount to a ledger account's balance and writes the entry.
func (db *DB) post(ctx context.Context, tx *sql.Tx, txn, account string, amount money.Nanos, nodeID string, releaseAt time.Time, at time.Time) error {
	if amount == 0 {
		return nil
	}
	if _, err := db.txExec(ctx, tx, `UPDATE ledger_accounts SET balance = balance + ? WHERE id = ?`, int64(amount), account); err != nil {
		return err
	}
	var node any
	if nodeID != "" {
		node = nodeID
	}
	_, err := db.txExec(ctx, tx, `INSERT INTO ledger_entries (txn_id, account, amount, node_id, release_at, created_at)
VALUES (?, ?, ?, ?, ?, ?)`, txn, account, int64(amount), node, nullMillis(releaseAt), millis(at))
	return err
}

func (db *DB) beginTxn(ctx context.Context, tx *sql.Tx, id, kind, ref string, at time.Time) error {
	_, err := db.txExec(ctx, tx, `INSERT INTO ledger_txns (id, kind, ref, created_at) VALUES (?, ?, ?, ?)`, id, kind, ref, millis(at))
	return dbError(err)
}

// window is one spend window a hold counts in.
type window struct {
	scope, period string
	start         int64
}

func formatWindows(ws []window) string {
	var b strings.Builder
	for _, w := range ws {
		fmt.Fprintf(&b, "%s|%s|%d\n", w.scope, w.period, w.start)
	}
	return b.String()
}

func parseWindows(s string) ([]window, error) {
	var ws []window
	for line := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		parts := strings.Split(line, "|")
		if len(parts) != 3 {
			return nil, fmt.Errorf("bad hold window %q", line)
		}
		start, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad hold window %q", line)
		}
		ws = append(ws, window{parts[0], parts[1], start})
	}
	return ws, nil
}

// OpenHolds lists the holds not yet closed, oldest first.
// Pending (lazy) holds are among them.
func (db *DB) OpenHolds(ctx context.Context) ([]*store.Hold, error) {
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT `+holdColumns+` FROM open_holds ORDER BY created_at`))
	if err != nil {
		return nil, fmt.Errorf("open holds: %w", err)
	}
	defer rows.Close()
	var hs []*store.Hold
	for rows.Next() {
		h, err := scanHold(rows)
		if err != nil {
			return nil, fmt.Errorf("open holds: %w", err)
		}
		hs = append(hs, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("open holds: %w", err)
	}
	if pending := db.pending.list(); len(pending) > 0 {
		hs = append(hs, pending...)
		slices.SortStableFunc(hs, func(a, b *store.Hold) int { return a.CreatedAt.Compare(b.CreatedAt) })
	}
	return hs, nil
}

// holdColumns are the columns of open_holds that scanHold reads.
const holdColumns = `request_id, account_id, key_id, amount, created_at, replica, checkpoint`

func scanHold(r *sql.Rows) (*store.Hold, error) {
	var h store.Hold
	var amount, created int64
	var checkpoint sql.NullString
	if err := r.Scan(&h.RequestID, &h.AccountID, &h.KeyID, &amount, &created, &h.Replica, &checkpoint); err != nil {
		return nil, err
	}
	h.Amount, h.CreatedAt = money.Nanos(amount), fromMillis(created)
	if checkpoint.Valid {
		var s store.Settlement
		if err := json.Unmarshal([]byte(checkpoint.String), &s); err != nil {
			return nil, fmt.Errorf("checkpoint of request %s: %w", h.RequestID, err)
		}
		h.Checkpoint = &s
	}
	return &h, nil
}

// CheckpointHolds records the bills of what open requests have delivered so far.
func (db *DB) CheckpointHolds(ctx context.Context, batch []*store.Settlement) error {
	_, _, err := db.Commit(ctx, &store.Writes{Checkpoints: batch})
	return err
}

// checkpoint is a request's bill so far, encoded for its hold's row.
type checkpoint struct{ requestID, bill string }

// encodeCheckpoints encodes a batch of checkpoints, a request's last in the batch (which says
// the most) only, in the order of their request ids.
func encodeCheckpoints(batch []*store.Settlement) ([]checkpoint, error) {
	latest := map[string]string{}
	for _, s := range batch {
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		latest[s.RequestID] = string(b)
	}
	cps := make([]checkpoint, 0, len(latest))
	for _, id := range slices.Sorted(maps.Keys(latest)) {
		cps = append(cps, checkpoint{id, latest[id]})
	}
	return cps, nil
}

// checkpointHolds records checkpoints in tx. The holds are updated in the order of their ids,
// the order settlements lock them in, so that a batch of checkpoints and one of settlements
// never wait for each other in a cycle. A hold closed meanwhile keeps its settlement.
func (db *DB) checkpointHolds(ctx context.Context, tx *sql.Tx, cps []checkpoint) error {
	ids := make([]string, len(cps))
	for i, c := range cps {
		ids[i] = c.requestID
	}
	if err := db.writePending(ctx, tx, ids); err != nil { // a checkpoint is recovered from the row
		return err
	}
	for _, c := range cps {
		if _, err := db.txExec(ctx, tx, `UPDATE open_holds SET checkpoint = ? WHERE request_id = ?`, c.bill, c.requestID); err != nil {
			return err
		}
	}
	return nil
}

// Deposit moves money from the outside world to a buyer's balance.
func (db *DB) Deposit(ctx context.Context, accountID string, amount money.Nanos, ref string, at time.Time) error {
	if amount <= 0 {
		return fmt.Errorf("deposit %s: amount must be positive", ref)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		txn := "deposit:" + ref
		if err := db.beginTxn(ctx, tx, txn, "deposit", ref, at); err != nil {
			return err
		}
		buyer := buyerAccount(accountID)
		if err := db.ensureAccount(ctx, tx, buyer, accountID, "buyer"); err != nil {
			return err
		}
		if err := db.ensureAccount(ctx, tx, worldAccount, "", "world"); err != nil {
			return err
		}
		if err := db.post(ctx, tx, txn, worldAccount, -amount, "", time.Time{}, at); err != nil {
			return err
		}
		return db.post(ctx, tx, txn, buyer, amount, "", time.Time{}, at)
	})
	if err != nil {
		return fmt.Errorf("deposit %s to %s: %w", ref, accountID, err)
	}
	return nil
}

// ReleaseEarnings moves due pending earnings to available, per provider, in one transaction.
func (db *DB) ReleaseEarnings(ctx context.Context, now time.Time) (money.Nanos, error) {
	var total money.Nanos
	err := db.write(ctx, func(tx *sql.Tx) error {
		total = 0
		// Marking and summing in one statement: an entry clawed back meanwhile (released = 2,
		// by another process) is neither released nor counted.
		// A suspended node's earnings stay pending, for the operator to claw back (what it
		// earned after its suspension's clawback included).
		rows, err := db.txQuery(ctx, tx, `UPDATE ledger_entries SET released = 1
WHERE released = 0 AND release_at IS NOT NULL AND release_at <= ?
  AND (node_id IS NULL OR node_id NOT IN (SELECT id FROM nodes WHERE level = 'suspended'))
RETURNING account, amount`, millis(now))
		if err != nil {
			return err
		}
		due := map[string]money.Nanos{}
		for rows.Next() {
			var acct string
			var amount int64
			if err := rows.Scan(&acct, &amount); err != nil {
				rows.Close()
				return err
			}
			due[acct] += money.Nanos(amount)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(due) == 0 {
			return err
		}
		txn := "release:" + randomRef()
		if err := db.beginTxn(ctx, tx, txn, "release", now.UTC().Format(time.RFC3339), now); err != nil {
			return err
		}
		for acct, sum := range due {
			provider := strings.TrimPrefix(acct, "pending:")
			avail := availableAccount(provider)
			if err := db.ensureAccount(ctx, tx, avail, provider, "available"); err != nil {
				return err
			}
			if err := db.post(ctx, tx, txn, acct, -sum, "", time.Time{}, now); err != nil {
				return err
			}
			if err := db.post(ctx, tx, txn, avail, sum, "", time.Time{}, now); err != nil {
				return err
			}
			total += sum
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("release earnings: %w", err)
	}
	return total, nil
}

func randomRef() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Payouts lists a provider's payouts, newest first, at most limit.
func (db *DB) Payouts(ctx context.Context, accountID string, limit int) ([]store.Payout, error) {
	if limit <= 0 {
		return nil, nil
	}
	ps, err := queryAll(ctx, db.r, db.q(`SELECT t.ref, -e.amount, t.created_at FROM ledger_txns t
JOIN ledger_entries e ON e.txn_id = t.id AND e.account = ?
WHERE t.kind = 'payout' ORDER BY t.created_at DESC, t.id DESC LIMIT ?`), []any{availableAccount(accountID), limit},
		func(rows *sql.Rows) (store.Payout, error) {
			var (
				p      store.Payout
				amount int64
				at     int64
			)
			if err := rows.Scan(&p.Ref, &amount, &at); err != nil {
				return p, err
			}
			p.Amount, p.At = money.Nanos(amount), fromMillis(at)
			return p, nil
		})
	if err != nil {
		return nil, fmt.Errorf("payouts of %s: %w", accountID, err)
	}
	return ps, nil
}

// Payout moves a provider's available earnings to the outside world.
func (db *DB) Payout(ctx context.Context, accountID string, amount money.Nanos, ref string, at time.Time) error {
	if amount <= 0 {
		return fmt.Errorf("payout %s: amount must be positive", ref)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		txn := "payout:" + ref
		if err := db.beginTxn(ctx, tx, txn, "payout", ref, at); err != nil {
			return err
		}
		avail := availableAccount(accountID)
		// A conditional update: it changes nothing unless enough is available.
		res, err := db.txExec(ctx, tx, `UPDATE ledger_accounts SET balance = balance - ? WHERE id = ? AND balance >= ?`,
			int64(amount), avail, int64(amount))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return store.ErrInsufficient
		}
		if _, err := db.txExec(ctx, tx, `INSERT INTO ledger_entries (txn_id, account, amount, created_at) VALUES (?, ?, ?, ?)`,
			txn, avail, -int64(amount), millis(at)); err != nil {
			return err
		}
		if err := db.ensureAccount(ctx, tx, worldAccount, "", "world"); err != nil {
			return err
		}
		return db.post(ctx, tx, txn, worldAccount, amount, "", time.Time{}, at)
	})
	if err != nil {
		return fmt.Errorf("payout %s to %s: %w", ref, accountID, err)
	}
	return nil
}

// Balance returns an account's money, buyer side and provider side.
func (db *DB) Balance(ctx context.Context, accountID string) (*store.Balance, error) {
	var b store.Balance
	var credits, held sql.NullInt64
	err := db.r.QueryRowContext(ctx, db.q(`SELECT balance, held FROM ledger_accounts WHERE id = ?`), buyerAccount(accountID)).Scan(&credits, &held)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("balance of %s: %w", accountID, err)
	}
	b.Credits, b.Held = money.Nanos(credits.Int64), money.Nanos(held.Int64)+db.pending.account(buyerAccount(accountID))
	sums := []struct {
		query string
		arg   string
		into  *money.Nanos
	}{
		{`SELECT CAST(COALESCE(SUM(e.amount), 0) AS BIGINT) FROM ledger_entries e JOIN ledger_txns t ON t.id = e.txn_id WHERE e.account = ? AND t.kind = 'deposit'`, buyerAccount(accountID), &b.Deposited},
		{`SELECT CAST(COALESCE(-SUM(e.amount), 0) AS BIGINT) FROM ledger_entries e JOIN ledger_txns t ON t.id = e.txn_id WHERE e.account = ? AND t.kind = 'settle'`, buyerAccount(accountID), &b.Spent},
		{`SELECT CAST(COALESCE(SUM(balance), 0) AS BIGINT) FROM ledger_accounts WHERE id = ?`, pendingAccount(accountID), &b.Pending},
		{`SELECT CAST(COALESCE(SUM(balance), 0) AS BIGINT) FROM ledger_accounts WHERE id = ?`, availableAccount(accountID), &b.Available},
		{`SELECT CAST(COALESCE(-SUM(e.amount), 0) AS BIGINT) FROM ledger_entries e JOIN ledger_txns t ON t.id = e.txn_id WHERE e.account = ? AND t.kind = 'payout'`, availableAccount(accountID), &b.PaidOut},
	}
	for _, s := range sums {
		var v int64
		if err := db.r.QueryRowContext(ctx, db.q(s.query), s.arg).Scan(&v); err != nil {
			return nil, fmt.Errorf("balance of %s: %w", accountID, err)
		}
		*s.into = money.Nanos(v)
	}
	return &b, nil
}

// Earnings lists a provider's earnings per node and UTC day since a time, newest first.
func (db *DB) Earnings(ctx context.Context, accountID string, since time.Time) ([]store.Earning, error) {
	// The day's length is written into the query, not passed twice as a parameter: PostgreSQL
	// cannot tell that "created_at / $1" and "created_at / $4" group alike.
	const day = int64(24 * time.Hour / time.Millisecond)
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT node_id, created_at / 86400000 AS day,
	CAST(COALESCE(SUM(CASE WHEN released = 0 THEN amount ELSE 0 END), 0) AS BIGINT),
	CAST(COALESCE(SUM(CASE WHEN released = 1 THEN amount ELSE 0 END), 0) AS BIGINT)
FROM ledger_entries WHERE account = ? AND node_id IS NOT NULL AND created_at >= ?
GROUP BY node_id, created_at / 86400000 ORDER BY day DESC, node_id`), pendingAccount(accountID), millis(since))
	if err != nil {
		return nil, fmt.Errorf("earnings of %s: %w", accountID, err)
	}
	defer rows.Close()
	var out []store.Earning
	for rows.Next() {
		var e store.Earning
		var d, pending, avail int64
		if err := rows.Scan(&e.NodeID, &d, &pending, &avail); err != nil {
			return nil, fmt.Errorf("earnings of %s: %w", accountID, err)
		}
		e.Day, e.Pending, e.Available = fromMillis(d*day), money.Nanos(pending), money.Nanos(avail)
		out = append(out, e)
	}
	return out, rows.Err()
}

// LedgerSum returns the sum over all ledger accounts: zero, always.
func (db *DB) LedgerSum(ctx context.Context) (money.Nanos, error) {
	var sum int64
	if err := db.r.QueryRowContext(ctx, `SELECT CAST(COALESCE(SUM(balance), 0) AS BIGINT) FROM ledger_accounts`).Scan(&sum); err != nil {
		return 0, fmt.Errorf("ledger sum: %w", err)
	}
	return money.Nanos(sum), nil
}
