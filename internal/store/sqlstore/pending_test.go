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

// A write transaction that does not commit leaves the pending holds as they were before it:
// a hold it kept is gone, one it took (settled or wrote) is back.
func TestPendingHolds_UndoneWithTheirTransaction(t *testing.T) {
	db, _ := openTestDB(t, testdsn.SQLite)
	ctx := context.Background()
	w := window{"key:k", store.Daily, 0}
	h := &store.Hold{RequestID: "r1", AccountID: "acct", KeyID: "k", Amount: 5 * money.USD, CreatedAt: time.Now(), Lazy: true}
	failed := errors.New("failed")
	err := db.write(ctx, func(*sql.Tx) error {
		db.pending.add(h, []window{w})
		return failed
	})
	if !errors.Is(err, failed) || db.pending.get("r1") != nil || db.pending.account(buyerAccount("acct")) != 0 || db.pending.window(w) != 0 {
		t.Fatalf("after a rolled back add: %v, pending %v; want nothing pending", err, db.pending.list())
	}
	if err := db.write(ctx, func(*sql.Tx) error { db.pending.add(h, []window{w}); return nil }); err != nil {
		t.Fatal(err)
	}
	err = db.write(ctx, func(*sql.Tx) error {
		if db.pending.take("r1") == nil {
			t.Error("take found no pending hold")
		}
		return failed
	})
	if !errors.Is(err, failed) || db.pending.get("r1") == nil || db.pending.account(buyerAccount("acct")) != h.Amount || db.pending.window(w) != h.Amount {
		t.Errorf("after a rolled back take: pending %v, held %d in the account and %d in the window; want r1 back with %d",
			db.pending.list(), db.pending.account(buyerAccount("acct")), db.pending.window(w), h.Amount)
	}
	if hs := db.pending.list(); len(hs) != 1 || hs[0].Lazy {
		t.Errorf("listed %+v; want r1, as a hold that is no longer to be placed", hs)
	}
}
