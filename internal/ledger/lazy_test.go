package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
	"github.com/shareai/shareai/internal/store/sqlstore/sqlstoretest"
)

// lazyFixture is a ledger alone on a SQLite file, whose holds are lazy, and a second handle on
// the file: what another process (shareai admin), or the coordinator after a crash, reads.
type lazyFixture struct {
	*fixture
	path  string
	other *sqlstore.DB
}

func setupLazy(t *testing.T, credit money.Nanos) *lazyFixture {
	t.Helper()
	path := sqlstoretest.DSN(t, "sqlite")
	db, err := sqlstore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := fixtureOn(t, db, credit)
	f.clock.Set(time.Now()) // SetCap counts the window by the store's clock, the real one
	other, err := sqlstore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return &lazyFixture{fixture: f, path: path, other: other}
}

func (f *lazyFixture) bill(id string, completion int) (*ledger.Bill, *store.Usage) {
	bill := f.l.Price(id, ledger.Bounds{PromptTokens: 1000, CompletionTokens: 1000},
		[]ledger.Work{{NodeID: "n1", ProviderID: f.provider, Ask: ask, PromptTokens: 500, CompletionTokens: completion, DeliveredBytes: 4 * completion}})
	return bill, &store.Usage{RequestID: id, AccountID: f.buyer.AccountID, KeyID: f.buyer.ID, Outcome: store.OutcomeOK, CreatedAt: f.clock.Now()}
}

func held(t *testing.T, db *sqlstore.DB, account string) money.Nanos {
	t.Helper()
	b, err := db.Balance(context.Background(), account)
	if err != nil {
		t.Fatal(err)
	}
	return b.Held
}

func openIDs(t *testing.T, db *sqlstore.DB) map[string]money.Nanos {
	t.Helper()
	hs, err := db.OpenHolds(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]money.Nanos{}
	for _, h := range hs {
		m[h.RequestID] = h.Amount
	}
	return m
}

// A ledger alone on SQLite keeps a hold in memory until its request checkpoints, is raised or
// settles, yet counts it against the balance at once; a crash loses only what recovery would
// have voided, and the money balances after it.
func TestHold_Lazy(t *testing.T) {
	f := setupLazy(t, money.USD)
	ctx := context.Background()
	const amt = 4 * money.USD / 10 // $0.40
	for _, id := range []string{"a", "b"} {
		if err := f.l.Hold(ctx, id, f.buyer, amt); err != nil {
			t.Fatal(err)
		}
	}
	if got := openIDs(t, f.other); len(got) != 0 {
		t.Errorf("the file holds open holds %v; want none written before a checkpoint", got)
	}
	if got := openIDs(t, f.db); len(got) != 2 || held(t, f.db, f.buyer.AccountID) != 2*amt {
		t.Errorf("this process shows open holds %v, held %d; want a and b, %d", got, held(t, f.db, f.buyer.AccountID), 2*amt)
	}
	// $0.20 is left: the pending holds count.
	err := f.l.Hold(ctx, "c", f.buyer, amt)
	if le, ok := errors.AsType[*store.LimitError](err); !ok || le.Available != money.USD-2*amt {
		t.Fatalf("third hold: %v; want a LimitError with %d available", err, money.USD-2*amt)
	}
	if err := f.l.Hold(ctx, "a", f.buyer, 1); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a second hold of a pending request: %v; want ErrConflict", err)
	}

	// Raising a writes it, within what is left.
	if err := f.l.Raise(ctx, "a", amt+money.USD/10); err != nil {
		t.Fatal(err)
	}
	if err := f.l.Raise(ctx, "a", amt+3*money.USD/10); err == nil {
		t.Error("raising beyond the balance left beside b's pending hold succeeded")
	}
	if got := openIDs(t, f.other); len(got) != 1 || got["a"] != amt+money.USD/10 || held(t, f.other, f.buyer.AccountID) != amt+money.USD/10 {
		t.Errorf("after the raise the file holds %v, held %d; want a at %d", got, held(t, f.other, f.buyer.AccountID), amt+money.USD/10)
	}

	// A checkpoint writes b with it.
	cp, cpu := f.bill("b", 100)
	if err := f.l.Checkpoint(ctx, cp, cpu); err != nil {
		t.Fatal(err)
	}
	hs, _ := f.other.OpenHolds(ctx)
	if len(hs) != 2 || hs[1].RequestID != "b" || hs[1].Checkpoint == nil || hs[1].Checkpoint.Debit != cp.Cost() {
		t.Fatalf("after b's checkpoint the file holds %+v; want b with its checkpoint", hs)
	}

	// A request held and settled at once is written once, closed.
	if err := f.l.Hold(ctx, "d", f.buyer, money.USD/10); err != nil {
		t.Fatal(err)
	}
	bd, ud := f.bill("d", 50)
	if err := f.l.Settle(ctx, bd, ud); err != nil {
		t.Fatal(err)
	}
	if err := f.l.Settle(ctx, bd, ud); err != nil {
		t.Errorf("settling d again: %v; want nothing done", err)
	}
	if rec, err := f.other.UsageByRequest(ctx, "d"); err != nil || rec.Cost != bd.Cost() {
		t.Errorf("d's usage %+v, %v; want cost %d", rec, err, bd.Cost())
	}

	// The process dies with a, b and e open: a and b written, e pending. Its successor
	// settles b at its checkpoint and voids a; e and its request died together.
	if err := f.l.Hold(ctx, "e", f.buyer, money.USD/100); err != nil {
		t.Fatal(err)
	}
	f.db.Close()
	db, err := sqlstore.Open(ctx, f.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	next := ledger.New(ledger.Config{Store: db, FeeBasisPoints: 500, SettlementDelay: time.Hour, Now: f.clock.Now})
	defer next.Close()
	r, err := next.Recover(ctx)
	if err != nil || r != (ledger.Recovered{Settled: 1, Voided: 1}) {
		t.Fatalf("recover = %+v, %v; want b settled and a voided", r, err)
	}
	b, _ := db.Balance(ctx, f.buyer.AccountID)
	if want := money.USD - cp.Cost() - bd.Cost(); b.Credits != want || b.Held != 0 {
		t.Errorf("after recovery %+v; want credits %d (b's checkpoint and d charged), nothing held", b, want)
	}
	if sum, err := db.LedgerSum(ctx); err != nil || sum != 0 {
		t.Errorf("ledger sum %d, %v; want 0", sum, err)
	}
}

// A cap set while holds are pending counts them: set here, it writes them first; set by
// another process on the file, which cannot see them, their debits still count in its window
// when they settle.
func TestHold_LazyCaps(t *testing.T) {
	f := setupLazy(t, money.USD)
	ctx := context.Background()
	const amt = money.USD / 10
	if err := f.l.Hold(ctx, "here", f.buyer, amt); err != nil {
		t.Fatal(err)
	}
	if err := f.db.SetCap(ctx, store.Cap{Scope: store.KeyScope(f.buyer.ID), Period: store.Daily, Limit: money.USD / 2}); err != nil {
		t.Fatal(err)
	}
	sp, err := f.other.Spending(ctx, f.clock.Now(), store.KeyScope(f.buyer.ID))
	if err != nil || len(sp) != 1 || sp[0].Held != amt {
		t.Fatalf("key spending after a cap set here: %+v, %v; want the pending hold's %d held", sp, err, amt)
	}

	if err := f.l.Hold(ctx, "elsewhere", f.buyer, amt); err != nil {
		t.Fatal(err)
	}
	if sp, _ := f.db.Spending(ctx, f.clock.Now(), store.KeyScope(f.buyer.ID)); sp[0].Held != 2*amt {
		t.Errorf("key spending %+v; want both holds held, %d", sp, 2*amt)
	}
	account := store.AccountScope(f.buyer.AccountID)
	if err := f.other.SetCap(ctx, store.Cap{Scope: account, Period: store.Monthly, Limit: 45 * money.USD / 100}); err != nil {
		t.Fatal(err)
	}
	// The cap set elsewhere counted "here" (written) and not "elsewhere" (pending), but this
	// process counts both against it: $0.25 is left, not $0.35 (the key's cap leaves $0.30).
	err = f.l.Hold(ctx, "over", f.buyer, 3*money.USD/10)
	if le, ok := errors.AsType[*store.LimitError](err); !ok || le.Cap == nil || le.Cap.Scope != account || le.Available != 25*money.USD/100 {
		t.Errorf("a hold of $0.30 under the cap set elsewhere: %v; want the account's cap refusing it with $0.25 left", err)
	}
	bill, u := f.bill("elsewhere", 200)
	if err := f.l.Settle(ctx, bill, u); err != nil {
		t.Fatal(err)
	}
	sp, err = f.other.Spending(ctx, f.clock.Now(), account)
	if err != nil || len(sp) != 1 || sp[0].Spent != bill.Cost() || sp[0].Held != amt {
		t.Errorf("account spending after the settlement: %+v, %v; want %d spent in the cap set elsewhere and the written hold's %d held", sp, err, bill.Cost(), amt)
	}
	sp, _ = f.other.Spending(ctx, f.clock.Now(), store.KeyScope(f.buyer.ID))
	if sp[0].Spent != bill.Cost() || sp[0].Held != amt {
		t.Errorf("key spending %+v; want %d spent and the written hold's %d held", sp, bill.Cost(), amt)
	}
}

// A hold whose request outlives LazyFor is written open, so that a crash after that leaves it
// to recovery as before; the settlement then closes the written hold.
func TestHold_LazyWrittenOpenWhenItOutlivesLazyFor(t *testing.T) {
	f := setupLazy(t, money.USD)
	ctx := context.Background()
	l := ledger.New(ledger.Config{Store: f.db, FeeBasisPoints: 500, SettlementDelay: time.Hour, LazyFor: 300 * time.Millisecond})
	defer l.Close()
	if err := l.Hold(ctx, "long", f.buyer, money.USD/10); err != nil {
		t.Fatal(err)
	}
	// A cap set elsewhere while it is pending: written, the hold counts in its window.
	daily := store.Cap{Scope: store.KeyScope(f.buyer.ID), Period: store.Daily, Limit: money.USD}
	if err := f.other.SetCap(ctx, daily); err != nil {
		t.Fatal(err)
	}
	if len(openIDs(t, f.other)) != 0 {
		t.Fatal("the hold was written before LazyFor")
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(openIDs(t, f.other)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the hold was not written open after LazyFor")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := held(t, f.other, f.buyer.AccountID); got != money.USD/10 {
		t.Errorf("the file's buyer holds %d; want the written hold's %d", got, money.USD/10)
	}
	if sp, _ := f.other.Spending(ctx, f.clock.Now(), daily.Scope); len(sp) != 1 || sp[0].Held != money.USD/10 {
		t.Errorf("the cap set elsewhere: %+v; want the written hold's %d held in its window", sp, money.USD/10)
	}
	bill, u := f.bill("long", 100)
	if err := l.Settle(ctx, bill, u); err != nil {
		t.Fatal(err)
	}
	if b, _ := f.other.Balance(ctx, f.buyer.AccountID); b.Held != 0 || b.Spent != bill.Cost() || len(openIDs(t, f.other)) != 0 {
		t.Errorf("after the settlement %+v, open %v; want %d spent, nothing held or open", b, openIDs(t, f.other), bill.Cost())
	}
	if sp, _ := f.other.Spending(ctx, f.clock.Now(), daily.Scope); sp[0].Held != 0 || sp[0].Spent != bill.Cost() {
		t.Errorf("the cap set elsewhere after the settlement: %+v; want %d spent, nothing held", sp, bill.Cost())
	}
}

// Lazy holds decided while settlements of others commit never overshoot: each request here is
// billed its whole hold, so one hold too many would take the balance below zero. A
// settlement's removal from the pending holds and its debit land together.
func TestHold_LazyRacingSettlements(t *testing.T) {
	f := setupLazy(t, money.USD)
	f.db.SetCap(context.Background(), store.Cap{Scope: store.KeyScope(f.buyer.ID), Period: store.Daily, Limit: 7 * money.USD / 10})
	ctx := context.Background()
	const amt = money.USD / 100
	var wg sync.WaitGroup
	var placed atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			for i := range 150 {
				id := fmt.Sprintf("g%d-%d", g, i)
				err := f.l.Hold(ctx, id, f.buyer, amt)
				if err != nil {
					if _, ok := errors.AsType[*store.LimitError](err); !ok {
						t.Error(err)
					}
					continue
				}
				placed.Add(1)
				f.l.SettleLater(&ledger.Bill{Settlement: &store.Settlement{RequestID: id, Debit: amt, At: f.clock.Now(),
					Parts: []store.Part{{NodeID: "n1", ProviderID: f.provider, Earned: amt}}}},
					&store.Usage{RequestID: id, AccountID: f.buyer.AccountID, KeyID: f.buyer.ID, Outcome: store.OutcomeOK, CreatedAt: f.clock.Now()})
			}
		})
	}
	wg.Wait()
	f.l.Close() // settles what is queued
	b, err := f.db.Balance(ctx, f.buyer.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	// The cap of $0.70 stops it first: exactly 70 requests of $0.01.
	if placed.Load() != 70 || b.Spent != 70*amt || b.Held != 0 || b.Credits != money.USD-70*amt {
		t.Errorf("%d holds placed, balance %+v; want 70, $0.70 spent and nothing held", placed.Load(), b)
	}
	sp, _ := f.other.Spending(ctx, f.clock.Now(), store.KeyScope(f.buyer.ID))
	if len(sp) != 1 || sp[0].Spent != 70*amt || sp[0].Held != 0 {
		t.Errorf("key spending %+v; want exactly the cap spent", sp)
	}
	f.sumIsZero(t)
}

// Flush ends the group commit's wait: a settlement queued before it has committed when it
// returns, and not before.
func TestFlush(t *testing.T) {
	f := setupLazy(t, money.USD)
	ctx := context.Background()
	l := ledger.New(ledger.Config{Store: f.db, FeeBasisPoints: 500, SettlementDelay: time.Hour, Now: f.clock.Now,
		GroupCommit: time.Hour})
	defer l.Close()
	if err := l.Hold(ctx, "a", f.buyer, money.USD/10); err != nil {
		t.Fatal(err)
	}
	bill, u := f.bill("a", 100)
	l.SettleLater(bill, u)
	time.Sleep(50 * time.Millisecond) // time enough for a commit that did not wait
	if b, err := f.other.Balance(ctx, f.buyer.AccountID); err != nil || b.Credits != money.USD {
		t.Fatalf("before Flush the file holds a balance of %d (%v); want %d, the settlement waiting", b.Credits, err, money.USD)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := f.other.Balance(ctx, f.buyer.AccountID); err != nil || b.Credits != money.USD-bill.Cost() {
		t.Errorf("after Flush the file holds a balance of %d (%v); want %d, settled", b.Credits, err, money.USD-bill.Cost())
	}
	l.Close()
	if err := l.Flush(ctx); err == nil {
		t.Error("Flush of a closed ledger succeeded")
	}
}
