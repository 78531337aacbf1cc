package sqlstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/requestid"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore/internal/testdsn"
)

func lazyHold(id string, amount money.Nanos, at time.Time) *store.Hold {
	return &store.Hold{RequestID: id, AccountID: "acct", KeyID: "k", Amount: amount, CreatedAt: at, Lazy: true}
}

// A lazy hold decided on a kept read sees every commit of this process since: the read is
// kept only until the next one. Here a cap set between two holds refuses the second, which
// the read before the cap would have let through.
func TestLazyHold_KeptReadEndsAtACommit(t *testing.T) {
	db, _ := openTestDB(t, testdsn.SQLite)
	ctx := context.Background()
	now := time.Now()
	if err := db.Deposit(ctx, "acct", money.USD, "d1", now); err != nil {
		t.Fatal(err)
	}
	if err := db.PlaceHold(ctx, lazyHold(requestid.New(), 60*cent, now)); err != nil {
		t.Fatal(err)
	}
	if db.funds.get(newLazyKey(lazyHold("", 0, now)), db.commits, db.now()) == nil {
		t.Fatal("the first hold's read is not kept")
	}
	// Kept: the next hold reads nothing and still counts the first, pending.
	var le *store.LimitError
	if err := db.PlaceHold(ctx, lazyHold(requestid.New(), 50*cent, now)); !errors.As(err, &le) || le.Available != 40*cent {
		t.Fatalf("a hold of $0.50 on $1.00 less $0.60 pending: %v; want refused with $0.40 available", err)
	}
	if err := db.SetCap(ctx, store.Cap{Scope: store.AccountScope("acct"), Period: store.Daily, Limit: 70 * cent}); err != nil {
		t.Fatal(err)
	}
	err := db.PlaceHold(ctx, lazyHold(requestid.New(), 20*cent, now))
	if !errors.As(err, &le) || le.Cap == nil || le.Available != 10*cent {
		t.Errorf("a hold of $0.20 under a $0.70 cap with $0.60 pending: %v; want refused by the cap, $0.10 left", err)
	}
	if err := db.PlaceHold(ctx, lazyHold(requestid.New(), 10*cent, now)); err != nil {
		t.Errorf("a hold of the $0.10 left: %v", err)
	}
}

// Another process on the same file (shareai admin credit, shareai admin cap) commits where
// this one cannot count: money it adds counts at once, since a refusal is decided on a fresh
// read; a cap it lowers counts once the kept read is fundsFor old.
func TestLazyHold_AnotherProcessesChanges(t *testing.T) {
	db, dsn := openTestDB(t, testdsn.SQLite)
	other, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()
	clock := time.Now()
	db.now = func() time.Time { return clock }
	if err := db.Deposit(ctx, "acct", 10*cent, "d1", clock); err != nil {
		t.Fatal(err)
	}
	if err := db.PlaceHold(ctx, lazyHold(requestid.New(), 10*cent, clock)); err != nil {
		t.Fatal(err)
	}
	if err := other.Deposit(ctx, "acct", money.USD, "d2", clock); err != nil {
		t.Fatal(err)
	}
	if err := db.PlaceHold(ctx, lazyHold(requestid.New(), 50*cent, clock)); err != nil {
		t.Errorf("a hold of $0.50 right after another process deposited $1.00: %v; want it placed", err)
	}
	if err := other.SetCap(ctx, store.Cap{Scope: store.AccountScope("acct"), Period: store.Daily, Limit: 65 * cent}); err != nil {
		t.Fatal(err)
	}
	// $0.60 pending: a $0.10 hold fits the funds read before the cap, not the cap.
	if err := db.PlaceHold(ctx, lazyHold(requestid.New(), 10*cent, clock)); err != nil {
		t.Errorf("within fundsFor of the read, the cap set elsewhere is not counted yet: %v", err)
	}
	clock = clock.Add(fundsFor)
	var le *store.LimitError
	if err := db.PlaceHold(ctx, lazyHold(requestid.New(), 10*cent, clock)); !errors.As(err, &le) || le.Cap == nil {
		t.Errorf("fundsFor after the read: %v; want the hold refused by the cap set elsewhere", err)
	}
}

// A request held already is refused, pending, settled or voided, whether its id is one this
// process made lately (known from memory) or not (read from the database).
func TestLazyHold_HeldAlready(t *testing.T) {
	db, _ := openTestDB(t, testdsn.SQLite)
	ctx := context.Background()
	now := time.Now()
	if err := db.Deposit(ctx, "acct", money.USD, "d1", now); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{requestid.New(), "req_made_elsewhere"} {
		if err := db.PlaceHold(ctx, lazyHold(id, cent, now)); err != nil {
			t.Fatal(err)
		}
		if err := db.PlaceHold(ctx, lazyHold(id, cent, now)); !errors.Is(err, store.ErrConflict) {
			t.Errorf("%s held again while pending: %v; want ErrConflict", id, err)
		}
		if errs := db.Settle(ctx, []*store.Settlement{{RequestID: id, At: now}}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		if err := db.PlaceHold(ctx, lazyHold(id, cent, now)); !errors.Is(err, store.ErrConflict) {
			t.Errorf("%s held again once voided: %v; want ErrConflict", id, err)
		}
		if _, sure := db.held.known(id); sure != (id != "req_made_elsewhere") {
			t.Errorf("%s: known from memory %v", id, sure)
		}
	}
	// A hold written at once (not lazy) is known too, once its transaction commits: a lazy
	// hold of the same request on a read kept since is refused.
	placed := requestid.New()
	h := lazyHold(placed, cent, now)
	h.Lazy = false
	if err := db.PlaceHold(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := db.PlaceHold(ctx, lazyHold(requestid.New(), cent, now)); err != nil { // reads, and keeps the read
		t.Fatal(err)
	}
	if err := db.PlaceHold(ctx, lazyHold(placed, cent, now)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a request held at once, held again lazily: %v; want ErrConflict", err)
	}
}

// heldIDs remembers the ids it is given for heldFor after their time, and vouches only for
// ids made since the process started and after every id it forgot.
func TestHeldIDs(t *testing.T) {
	start := time.Now()
	h := newHeldIDs(start)
	a := requestid.New()
	h.add(a, start)
	h.add("not-made-by-requestid", start)
	if held, sure := h.known(a); !held || !sure {
		t.Errorf("a just held: known %v, sure %v", held, sure)
	}
	if _, sure := h.known("not-made-by-requestid"); sure {
		t.Error("an id requestid did not make is vouched for")
	}
	time.Sleep(2 * time.Millisecond)
	b := requestid.New()
	if held, sure := h.known(b); held || !sure {
		t.Errorf("b never held: known %v, sure %v; want false, true", held, sure)
	}
	aAt, _ := requestid.Minted(a)
	h.add(b, aAt.Add(heldFor+time.Millisecond)) // a is forgotten: it is older than heldFor
	if _, sure := h.known(a); sure {
		t.Error("a forgotten, and still vouched for")
	}
	if held, sure := h.known(b); !held || !sure {
		t.Errorf("b just held: known %v, sure %v", held, sure)
	}
	if len(h.m) != 1 {
		t.Errorf("%d ids remembered; want 1", len(h.m))
	}
}

const cent = money.USD / 100
