package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
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
	h := &store.Hold{RequestID: "r1", AccountID: "acct", KeyID: "k", Amount: 5 * money.USD, CreatedAt: time.Now(), Lazy: true}
	w := window{store.KeyScope("k"), store.Daily, millis(store.WindowStart(store.Daily, h.CreatedAt))}
	acct := buyerAccount("acct")
	db.pending.add(h, nil) // no cap: it counts in its scopes' windows all the same
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

// The writer never checkpoints the WAL itself (wal_autocheckpoint 0); the checkpoints run
// beside it, so the database file takes the WAL's pages within moments of their commit.
func TestOpen_checkpointsBesideTheWriter(t *testing.T) {
	db, path := openTestDB(t, testdsn.SQLite)
	ctx := context.Background()
	var auto int
	if err := db.w.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("the writer's wal_autocheckpoint = %d, %v; want 0", auto, err)
	}
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	for i := range 200 {
		if err := db.CreateAccount(ctx, &store.Account{ID: fmt.Sprintf("acct%03d", i), Name: strings.Repeat("n", 2000) + fmt.Sprint(i), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for size() < before+200*2000 {
		if time.Now().After(deadline) {
			t.Fatalf("the database file is %d bytes, %d before 400 kB of accounts: the WAL was not checkpointed", size(), before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
