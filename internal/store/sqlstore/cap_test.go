package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
)

// capNow is a Wednesday afternoon: its day starts at midnight, its week on Monday the 16th, its
// month on the 1st.
var capNow = time.Date(2026, 3, 18, 15, 0, 0, 0, time.UTC)

func cents(n int64) money.Nanos { return money.Nanos(n) * money.USD / 100 }

// capFixture is a buyer's account with two keys and plenty of credit, on a store whose clock
// reads now.
type capFixture struct {
	db         *sqlstore.DB
	now        time.Time
	key, other *store.Key
}

func newCapFixture(t *testing.T, db *sqlstore.DB) *capFixture {
	t.Helper()
	f := &capFixture{db: db, now: capNow}
	sqlstore.SetNow(db, func() time.Time { return f.now })
	mustAccount(t, db, "acct_buyer", "buyer")
	_, f.key = store.NewKey("acct_buyer", store.KeyBuyer, "one", t0)
	_, f.other = store.NewKey("acct_buyer", store.KeyBuyer, "two", t0)
	mustKey(t, db, f.key)
	mustKey(t, db, f.other)
	if err := db.Deposit(context.Background(), "acct_buyer", 1000*money.USD, "d1", capNow.AddDate(0, -2, 0)); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *capFixture) hold(k *store.Key, id string, amount money.Nanos, at time.Time) error {
	return f.db.PlaceHold(context.Background(), &store.Hold{RequestID: id, AccountID: k.AccountID, KeyID: k.ID, Amount: amount, CreatedAt: at})
}

// settle closes a hold at a debit, all of it earned by one node; a zero debit voids it.
func (f *capFixture) settle(t *testing.T, id string, debit money.Nanos, at time.Time) {
	t.Helper()
	s := &store.Settlement{RequestID: id, Debit: debit, At: at, ReleaseAt: at.Add(time.Hour)}
	if debit > 0 {
		s.Parts = []store.Part{{NodeID: "node_1", ProviderID: "acct_provider", Earned: debit}}
	}
	if errs := f.db.Settle(context.Background(), []*store.Settlement{s}); errs[0] != nil {
		t.Fatalf("settle %s: %v", id, errs[0])
	}
}

// spend holds an amount for a request of a key at a time and settles it at a debit a second
// later.
func (f *capFixture) spend(t *testing.T, k *store.Key, id string, amount, debit money.Nanos, at time.Time) {
	t.Helper()
	if err := f.hold(k, id, amount, at); err != nil {
		t.Fatalf("hold %s: %v", id, err)
	}
	f.settle(t, id, debit, at.Add(time.Second))
}

func (f *capFixture) setCap(t *testing.T, scope, period string, limit money.Nanos) {
	t.Helper()
	if err := f.db.SetCap(context.Background(), store.Cap{Scope: scope, Period: period, Limit: limit}); err != nil {
		t.Fatal(err)
	}
}

// checkSpend fails unless the scope's cap of the period shows spent and held at time at.
func (f *capFixture) checkSpend(t *testing.T, scope, period string, at time.Time, spent, held money.Nanos) {
	t.Helper()
	sps, err := f.db.Spending(context.Background(), at, scope)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range sps {
		if sp.Period == period {
			if sp.Spent != spent || sp.Held != held {
				t.Errorf("%s %s spending at %s: spent %d, held %d; want %d and %d", scope, period, at.Format(time.RFC3339), sp.Spent, sp.Held, spent, held)
			}
			return
		}
	}
	t.Errorf("%s has no %s cap: %+v", scope, period, sps)
}

// checkRefused fails unless a hold of need by the key at time at is refused by the scope's
// cap of the period, saying that left is what the cap still allows.
func (f *capFixture) checkRefused(t *testing.T, k *store.Key, id string, need money.Nanos, at time.Time, scope, period string, left money.Nanos) {
	t.Helper()
	err := f.hold(k, id, need, at)
	le, ok := errors.AsType[*store.LimitError](err)
	if !ok || le.Cap == nil || le.Cap.Scope != scope || le.Cap.Period != period || le.Available != left || le.Need != need {
		t.Errorf("hold %s of %d: %v; want refused by the %s %s cap with %d left", id, need, err, scope, period, left)
	}
}

func (f *capFixture) checkSum(t *testing.T) {
	t.Helper()
	if sum, err := f.db.LedgerSum(context.Background()); sum != 0 || err != nil {
		t.Errorf("ledger sum %d, %v; want 0", sum, err)
	}
}

// A cap set after spending counts what its scope spent since the start of its window, before
// the cap existed: settled debits of holds created in the window (to the nano-dollar; voided
// holds and holds of earlier windows not), and open holds, which then count in the window when
// they settle.
func TestSetCap_AfterSpend(t *testing.T) {
	day := func(d, h, m int) time.Time { return time.Date(2026, 3, d, h, m, 0, 0, time.UTC) }
	// The history, with no cap: f.key spends in each window, f.other today.
	history := func(t *testing.T, f *capFixture) {
		f.spend(t, f.key, "last-month", cents(200), cents(100), time.Date(2026, 2, 27, 12, 0, 0, 0, time.UTC))
		f.spend(t, f.key, "this-month", cents(300), cents(200)+3, day(5, 9, 0)) // before this week
		f.spend(t, f.key, "this-week", cents(500), cents(400), day(16, 10, 0))  // Monday
		// Held before midnight, settled after: it counts in yesterday, not today.
		f.spend(t, f.key, "yesterday", cents(100), cents(50), time.Date(2026, 3, 17, 23, 59, 59, 999e6, time.UTC))
		f.spend(t, f.key, "today", cents(900), cents(800), day(18, 9, 0))
		f.spend(t, f.key, "voided", cents(500), 0, day(18, 10, 0))
		f.spend(t, f.other, "other-today", cents(1700), cents(1600), day(18, 11, 0))
		if err := f.hold(f.key, "open", cents(25), day(18, 12, 0)); err != nil {
			t.Fatal(err)
		}
		if err := f.hold(f.other, "open-other", cents(10)+1, day(10, 12, 0)); err != nil { // last week
			t.Fatal(err)
		}
	}
	type open struct {
		id    string
		debit money.Nanos
	}
	tests := []struct {
		name          string
		account       bool // an account's cap, else f.key's
		period        string
		spent, held   money.Nanos
		open          []open // the open holds that count in the window, settled at the end
		wantAfterOpen money.Nanos
	}{
		{"key daily", false, store.Daily, cents(800), cents(25), []open{{"open", cents(20)}}, cents(820)},
		{"key weekly", false, store.Weekly, cents(400 + 50 + 800), cents(25), []open{{"open", cents(20)}}, cents(1270)},
		{"key monthly", false, store.Monthly, cents(200+400+50+800) + 3, cents(25), []open{{"open", cents(20)}}, cents(1470) + 3},
		{"account daily", true, store.Daily, cents(800 + 1600), cents(25), []open{{"open", cents(20)}}, cents(2420)},
		{"account weekly", true, store.Weekly, cents(400 + 50 + 800 + 1600), cents(25), []open{{"open", cents(20)}}, cents(2870)},
		{"account monthly", true, store.Monthly, cents(200+400+50+800+1600) + 3, cents(25) + cents(10) + 1,
			[]open{{"open", cents(20)}, {"open-other", cents(5) + 7}}, cents(3070) + cents(5) + 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
				f := newCapFixture(t, db)
				history(t, f)
				scope := store.KeyScope(f.key.ID)
				if tt.account {
					scope = store.AccountScope(f.key.AccountID)
				}
				const room = money.USD
				f.setCap(t, scope, tt.period, tt.spent+tt.held+room)
				f.checkSpend(t, scope, tt.period, f.now, tt.spent, tt.held)

				// The next hold has exactly the room the cap leaves.
				f.checkRefused(t, f.key, "over", room+1, f.now, scope, tt.period, room)
				if err := f.hold(f.key, "fill", room, f.now); err != nil {
					t.Fatalf("hold of the room left: %v", err)
				}
				f.checkSpend(t, scope, tt.period, f.now, tt.spent, tt.held+room)

				// A cap below what was spent refuses everything, and changes no spending.
				f.setCap(t, scope, tt.period, tt.spent-1)
				f.checkRefused(t, f.key, "below", 1, f.now, scope, tt.period, 0)
				f.checkSpend(t, scope, tt.period, f.now, tt.spent, tt.held+room)

				// The holds that were open when the cap was set settle into its window.
				for _, o := range tt.open {
					f.settle(t, o.id, o.debit, f.now)
				}
				f.settle(t, "fill", room, f.now)
				f.checkSpend(t, scope, tt.period, f.now, tt.wantAfterOpen+room, 0)
				f.checkSum(t)
			})
		})
	}
}

// Changing a cap mid-window, removing it and setting it again keep counting everything spent
// in the window; the next window starts empty.
func TestSetCap_ChangeMidWindow(t *testing.T) {
	tests := []struct {
		period string
		start  time.Time // of capNow's window
		next   time.Time // the next window's start
	}{
		{store.Daily, time.Date(2026, 3, 18, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 19, 0, 0, 0, 0, time.UTC)},
		{store.Weekly, time.Date(2026, 3, 16, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 23, 0, 0, 0, 0, time.UTC)},
		{store.Monthly, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.period, func(t *testing.T) {
			sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
				f := newCapFixture(t, db)
				scope := store.KeyScope(f.key.ID)
				at := func(d time.Duration) time.Time { f.now = tt.start.Add(d); return f.now }

				f.setCap(t, scope, tt.period, cents(1000)) // from the window's start
				f.spend(t, f.key, "r1", cents(400), cents(300)+1, at(time.Hour))
				f.checkSpend(t, scope, tt.period, f.now, cents(300)+1, 0)

				// Lowered below what was spent: nothing more.
				at(2 * time.Hour)
				f.setCap(t, scope, tt.period, cents(200))
				f.checkSpend(t, scope, tt.period, f.now, cents(300)+1, 0)
				f.checkRefused(t, f.key, "r2", 1, f.now, scope, tt.period, 0)

				// Raised: what is left is the new limit less what was spent.
				at(3 * time.Hour)
				f.setCap(t, scope, tt.period, cents(500))
				f.checkRefused(t, f.key, "r3", cents(200), f.now, scope, tt.period, cents(200)-1)
				f.spend(t, f.key, "r4", cents(200)-1, cents(100), f.now)
				f.checkSpend(t, scope, tt.period, f.now, cents(400)+1, 0)

				// Removed: what is spent meanwhile still counts when it is set again, and so
				// does a hold placed meanwhile, once settled.
				at(4 * time.Hour)
				f.setCap(t, scope, tt.period, 0)
				f.spend(t, f.key, "r5", cents(700), cents(600), at(5*time.Hour))
				if err := f.hold(f.key, "r6", cents(150), at(6*time.Hour)); err != nil {
					t.Fatal(err)
				}
				at(7 * time.Hour)
				f.setCap(t, scope, tt.period, cents(1200))
				f.checkSpend(t, scope, tt.period, f.now, cents(1000)+1, cents(150))
				f.checkRefused(t, f.key, "r7", cents(50), f.now, scope, tt.period, cents(50)-1)
				f.settle(t, "r6", cents(100), f.now)
				f.checkSpend(t, scope, tt.period, f.now, cents(1100)+1, 0)

				// The next window starts empty.
				f.now = tt.next
				f.checkSpend(t, scope, tt.period, f.now, 0, 0)
				if err := f.hold(f.key, "r8", cents(1200), f.now); err != nil {
					t.Errorf("a hold of the whole limit in the next window: %v", err)
				}
				f.checkSum(t)
			})
		})
	}
}

// Caps set, changed and removed while holds are placed and settled at once: no deadlock, no
// error, and the windows end with exactly what was settled in them.
func TestSetCap_Concurrent(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		f := newCapFixture(t, db)
		ctx := context.Background()
		scopes := []string{store.KeyScope(f.key.ID), store.AccountScope(f.key.AccountID)}
		const workers, each = 8, 30
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total money.Nanos
		)
		request := func(id string, debit money.Nanos) error {
			if err := f.hold(f.key, id, cents(1), capNow); err != nil {
				return err
			}
			s := &store.Settlement{RequestID: id, Debit: debit, At: capNow, ReleaseAt: capNow,
				Parts: []store.Part{{NodeID: "node_1", ProviderID: "acct_provider", Earned: debit}}}
			if err := db.Settle(ctx, []*store.Settlement{s})[0]; err != nil {
				return err
			}
			mu.Lock()
			total += debit
			mu.Unlock()
			return nil
		}
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					if err := request(fmt.Sprintf("w%d-%d", w, i), cents(1)-money.Nanos(w*each+i)); err != nil {
						t.Errorf("request: %v", err)
						return
					}
				}
			})
		}
		wg.Go(func() {
			for i := range 30 {
				limit := 1000*money.USD + money.Nanos(i)
				if i%3 == 1 {
					limit = 0 // removed, then set again
				}
				for _, s := range scopes {
					if err := db.SetCap(ctx, store.Cap{Scope: s, Period: store.Daily, Limit: limit}); err != nil {
						t.Errorf("set cap: %v", err)
						return
					}
				}
			}
		})
		wg.Wait()
		// Settled after the last change, as well.
		for i := range 3 {
			if err := request(fmt.Sprintf("after-%d", i), cents(1)); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range scopes {
			f.checkSpend(t, s, store.Daily, capNow, total, 0)
		}
		f.checkSum(t)
	})
}

// Checkpoints and settlements of the same holds, committed at the same time in batches of any
// order, never deadlock (PostgreSQL would abort one of them), and every settlement commits.
func TestCheckpointHolds_WithSettlements(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		f := newCapFixture(t, db)
		ctx := context.Background()
		const rounds, holds = 40, 8
		for r := range rounds {
			var cps, settles []*store.Settlement
			for i := range holds {
				id := fmt.Sprintf("r%d-%d", r, i)
				if err := f.hold(f.key, id, cents(1), capNow); err != nil {
					t.Fatal(err)
				}
				cps = append(cps, &store.Settlement{RequestID: id, Debit: cents(1) / 2, At: capNow})
				settles = append(settles, &store.Settlement{RequestID: id, Debit: cents(1) / 4, At: capNow, ReleaseAt: capNow,
					Parts: []store.Part{{NodeID: "node_1", ProviderID: "acct_provider", Earned: cents(1) / 4}}})
			}
			slices.Reverse(cps)
			var wg sync.WaitGroup
			var cpErr error
			var errs []error
			wg.Go(func() { cpErr = db.CheckpointHolds(ctx, cps) })
			wg.Go(func() { errs = db.Settle(ctx, settles) })
			wg.Wait()
			if cpErr != nil {
				t.Fatalf("round %d: checkpoints: %v", r, cpErr)
			}
			for i, err := range errs {
				if err != nil {
					t.Fatalf("round %d: settle %s: %v", r, settles[i].RequestID, err)
				}
			}
		}
		if hs, err := db.OpenHolds(ctx); err != nil || len(hs) != 0 {
			t.Errorf("open holds %d, %v; want none", len(hs), err)
		}
		if sum, _ := db.LedgerSum(ctx); sum != 0 {
			t.Errorf("ledger sum %d, want 0", sum)
		}
	})
}

// A hold raised for a retry on a dearer node counts in the balance and in the windows of the
// caps it counts in, within what they leave; a raise refused changes nothing; the raised hold
// settles as any other.
func TestRaiseHold(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		f := newCapFixture(t, db)
		scope := store.KeyScope(f.key.ID)
		f.setCap(t, scope, store.Daily, cents(100))
		if err := f.hold(f.key, "a", cents(30), f.now); err != nil {
			t.Fatal(err)
		}
		if err := db.RaiseHold(ctx, "a", cents(60)); err != nil {
			t.Fatalf("raise within the cap: %v", err)
		}
		f.checkSpend(t, scope, store.Daily, f.now, 0, cents(60))
		if err := f.hold(f.key, "b", cents(30), f.now); err != nil {
			t.Fatal(err)
		}
		err := db.RaiseHold(ctx, "a", cents(80))
		if le, ok := errors.AsType[*store.LimitError](err); !ok || le.Cap == nil || le.Available != cents(10) || le.Need != cents(20) {
			t.Errorf("raise past the cap: %v; want a LimitError of the cap, 10¢ left for 20¢", err)
		}
		f.checkSpend(t, scope, store.Daily, f.now, 0, cents(90))
		if err := db.RaiseHold(ctx, "a", cents(50)); err != nil {
			t.Errorf("a raise below the hold: %v; want nothing done", err)
		}
		err = db.RaiseHold(ctx, "b", 2000*money.USD)
		if le, ok := errors.AsType[*store.LimitError](err); !ok || le.Cap != nil {
			t.Errorf("raise past the balance: %v; want a LimitError of the balance", err)
		}
		b, err := db.Balance(ctx, f.key.AccountID)
		if err != nil || b.Held != cents(90) {
			t.Errorf("held %v, %v; want 90¢", b, err)
		}
		f.settle(t, "a", cents(55), f.now)
		f.settle(t, "b", cents(20), f.now)
		f.checkSpend(t, scope, store.Daily, f.now, cents(75), 0)
		f.checkSum(t)
		if err := db.RaiseHold(ctx, "a", cents(70)); !errors.Is(err, store.ErrClosed) {
			t.Errorf("raise of a settled hold: %v; want ErrClosed", err)
		}
		if err := db.RaiseHold(ctx, "none", cents(1)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("raise of no hold: %v; want ErrNotFound", err)
		}
	})
}
