package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore/internal/testdsn"
)

// A hold a write transaction takes (settles, or writes open) stays pending for everyone else
// until the transaction commits, is gone for the transaction itself at once, and is pending
// again if the transaction does not commit.
func TestPendingHolds_TakenWithTheirTransaction(t *testing.T) {
	db, _ := openTestDB(t, testdsn.SQLite)
	ctx := context.Background()
	w := window{"key:k", store.Daily, 0}
	acct := buyerAccount("acct")
	h := &store.Hold{RequestID: "r1", AccountID: "acct", KeyID: "k", Amount: 5 * money.USD, CreatedAt: time.Now(), Lazy: true}
	db.pending.add(h, []window{w})
	failed := errors.New("failed")
	for _, commit := range []bool{false, true} {
		err := db.write(ctx, func(*sql.Tx) error {
			if db.pending.take("r1") == nil || db.pending.take("r1") != nil {
				t.Error("take: want the hold once")
			}
			if db.pending.getTx("r1") != nil || db.pending.accountTx(acct) != 0 || db.pending.windowTx(w) != 0 {
				t.Error("the transaction that took the hold still sees it")
			}
			if !db.pending.has("r1") || db.pending.account(acct) != h.Amount || db.pending.window(w) != h.Amount {
				t.Error("the hold taken is gone for others before the transaction commits")
			}
			if commit {
				return nil
			}
			return failed
		})
		pending := db.pending.has("r1") && db.pending.account(acct) == h.Amount && db.pending.window(w) == h.Amount
		switch {
		case !commit && (!errors.Is(err, failed) || !pending):
			t.Errorf("after a rolled back take: %v, pending %v; want r1 back with its amounts", err, db.pending.list())
		case commit && (err != nil || db.pending.has("r1") || db.pending.account(acct) != 0 || db.pending.window(w) != 0):
			t.Errorf("after a committed take: %v, pending %v; want nothing", err, db.pending.list())
		}
		if !commit {
			if hs := db.pending.list(); len(hs) != 1 || hs[0].Lazy {
				t.Errorf("listed %+v; want r1, as a hold that is no longer to be placed", hs)
			}
		}
	}
}
