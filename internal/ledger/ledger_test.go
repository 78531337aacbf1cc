package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

// clock is a settable time for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

type fixture struct {
	db       *sqlstore.DB
	l        *ledger.Ledger
	clock    *clock
	buyer    *store.Key
	provider string
}

func setup(t *testing.T, kind string, credit money.Nanos) *fixture { return setupTB(t, kind, credit) }

func setupTB(t testing.TB, kind string, credit money.Nanos) *fixture {
	t.Helper()
	return fixtureOn(t, sqlstoretest.Open(t, kind), credit)
}

// fixtureOn makes a buyer with credit and a provider on db, and a ledger alone on it.
func fixtureOn(t testing.TB, db *sqlstore.DB, credit money.Nanos) *fixture {
	t.Helper()
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	mk := func(name string) string {
		a := &store.Account{ID: store.NewID("acct"), Name: name, CreatedAt: clk.Now()}
		if err := db.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	buyer, provider := mk("buyer"), mk("provider")
	_, key := store.NewKey(buyer, store.KeyBuyer, "", clk.Now())
	if err := db.CreateKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if credit > 0 {
		if err := db.Deposit(ctx, buyer, credit, "start", clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	l := ledger.New(ledger.Config{Store: db, FeeBasisPoints: 500, SettlementDelay: time.Hour, Now: clk.Now})
	t.Cleanup(l.Close)
	return &fixture{db: db, l: l, clock: clk, buyer: key, provider: provider}
}

func (f *fixture) sumIsZero(t *testing.T) {
	t.Helper()
	sum, err := f.db.LedgerSum(context.Background())
	if err != nil || sum != 0 {
		t.Fatalf("ledger sum = %d, %v; want 0", sum, err)
	}
}

var ask = ledger.Ask{Input: 50_000_000, Output: 100_000_000} // $0.05 and $0.10 per 1M tokens

func forEachDB(t *testing.T, fn func(t *testing.T, kind string)) {
	for _, kind := range sqlstoretest.Kinds() {
		t.Run(kind, func(t *testing.T) { fn(t, kind) })
	}
}

func TestPrice(t *testing.T) {
	l := ledger.New(ledger.Config{FeeBasisPoints: 1000, Now: time.Now})
	defer l.Close()
	bounds := ledger.Bounds{PromptTokens: 100, CompletionTokens: 50, PromptEstimate: 25}
	tests := []struct {
		name              string
		work              []ledger.Work
		prompt, completed int
		clamped           int
	}{
		{"honest", []ledger.Work{{NodeID: "a", Ask: ask, PromptTokens: 40, CompletionTokens: 20, DeliveredBytes: 90}}, 40, 20, 0},
		{"over the prompt bound: the estimate", []ledger.Work{{NodeID: "a", Ask: ask, PromptTokens: 1000, CompletionTokens: 20, DeliveredBytes: 90}}, 25, 20, 1},
		{"more tokens than bytes delivered: the estimate", []ledger.Work{{NodeID: "a", Ask: ask, PromptTokens: 40, CompletionTokens: 45, DeliveredBytes: 9}}, 40, 3, 1},
		{"negative claims", []ledger.Work{{NodeID: "a", Ask: ask, PromptTokens: -5, CompletionTokens: -1, DeliveredBytes: 9}}, 25, 3, 1},
		{"over max_tokens", []ledger.Work{{NodeID: "a", Ask: ask, PromptTokens: 40, CompletionTokens: 80, DeliveredBytes: 900}}, 40, 50, 1},
		{"two nodes: prompt paid once", []ledger.Work{
			{NodeID: "a", Ask: ask, PromptTokens: 40, CompletionTokens: 20, DeliveredBytes: 90},
			{NodeID: "b", Ask: ask, PromptTokens: 60, CompletionTokens: 20, DeliveredBytes: 90},
		}, 40, 40, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bill := l.Price("r", bounds, tt.work)
			if bill.PromptTokens != tt.prompt || bill.CompletionTokens != tt.completed || len(bill.Clamped) != tt.clamped {
				t.Errorf("billed %d+%d tokens, %d clamped; want %d+%d, %d", bill.PromptTokens, bill.CompletionTokens, len(bill.Clamped), tt.prompt, tt.completed, tt.clamped)
			}
			s := bill.Settlement
			var earned money.Nanos
			for _, p := range s.Parts {
				earned += p.Earned
			}
			if s.Debit+s.Subsidy != earned+s.Fee || s.Fee != money.Fee(earned-s.Subsidy, 1000) {
				t.Errorf("debit %d, subsidy %d, earned %d, fee %d: debit and subsidy must be earnings plus a 10%% fee on what the buyer owes", s.Debit, s.Subsidy, earned, s.Fee)
			}
			if len(tt.work) > 1 && s.Subsidy != ask.Input.Cost(60) {
				t.Errorf("subsidy %d; want the platform to pay the second node's prompt reading, %d", s.Subsidy, ask.Input.Cost(60))
			}
			if max := l.MaxCost(ask, bounds); s.Debit > max {
				t.Errorf("debit %d exceeds the most the request can cost, %d", s.Debit, max)
			}
		})
	}
}

func TestHoldAndSettle(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		f := setup(t, kind, money.USD)
		ctx := context.Background()
		hold := f.l.MaxCost(ask, ledger.Bounds{PromptTokens: 1000, CompletionTokens: 1000})
		if err := f.l.Hold(ctx, "req1", f.buyer, hold); err != nil {
			t.Fatal(err)
		}
		b, _ := f.db.Balance(ctx, f.buyer.AccountID)
		if b.Credits != money.USD || b.Held != hold {
			t.Errorf("after hold: %+v; want credits $1 and held %d", b, hold)
		}
		bill := f.l.Price("req1", ledger.Bounds{PromptTokens: 1000, CompletionTokens: 1000},
			[]ledger.Work{{NodeID: "n1", ProviderID: f.provider, Ask: ask, PromptTokens: 500, CompletionTokens: 200, DeliveredBytes: 900}})
		u := &store.Usage{RequestID: "req1", AccountID: f.buyer.AccountID, KeyID: f.buyer.ID, Outcome: store.OutcomeOK, CreatedAt: f.clock.Now()}
		if err := f.l.Settle(ctx, bill, u); err != nil {
			t.Fatal(err)
		}
		// Settling again changes nothing.
		if err := f.l.Settle(ctx, bill, u); err != nil {
			t.Fatalf("second settle: %v", err)
		}
		b, _ = f.db.Balance(ctx, f.buyer.AccountID)
		want := money.USD - bill.Cost()
		if b.Credits != want || b.Held != 0 || b.Spent != bill.Cost() {
			t.Errorf("after settle: %+v; want credits %d, nothing held, spent %d", b, want, bill.Cost())
		}
		p, _ := f.db.Balance(ctx, f.provider)
		if p.Pending != bill.Settlement.Parts[0].Earned || p.Available != 0 {
			t.Errorf("provider %+v; want %d pending", p, bill.Settlement.Parts[0].Earned)
		}
		rec, err := f.db.UsageByRequest(ctx, "req1")
		if err != nil || rec.Cost != bill.Cost() {
			t.Errorf("usage record %+v, %v; want cost %d", rec, err, bill.Cost())
		}
		f.sumIsZero(t)

		// Earnings become available after the settlement delay, and can be paid out.
		f.clock.Set(f.clock.Now().Add(2 * time.Hour))
		released, err := f.db.ReleaseEarnings(ctx, f.clock.Now())
		if err != nil || released != p.Pending {
			t.Fatalf("released %d, %v; want %d", released, err, p.Pending)
		}
		if err := f.db.Payout(ctx, f.provider, released+1, "too-much", f.clock.Now()); !errors.Is(err, store.ErrInsufficient) {
			t.Errorf("payout beyond available: %v; want ErrInsufficient", err)
		}
		if err := f.db.Payout(ctx, f.provider, released, "p1", f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		p, _ = f.db.Balance(ctx, f.provider)
		if p.Pending != 0 || p.Available != 0 || p.PaidOut != released {
			t.Errorf("provider after payout %+v; want all %d paid out", p, released)
		}
		f.sumIsZero(t)
	})
}

// 200 concurrent holds against a small balance and a smaller daily cap never overshoot either.
func TestHold_ConcurrentCaps(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		const each = 7 * money.USD / 1000 // $0.007 a request
		f := setup(t, kind, money.USD/10) // $0.10 of credit
		ctx := context.Background()
		if err := f.db.SetCap(ctx, store.Cap{Scope: store.KeyScope(f.buyer.ID), Period: store.Daily, Limit: 5 * money.USD / 100}); err != nil {
			t.Fatal(err)
		}
		var ok, capped, broke atomic.Int64
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				err := f.l.Hold(ctx, fmt.Sprintf("r%d", i), f.buyer, each)
				le, isLimit := errors.AsType[*store.LimitError](err)
				switch {
				case err == nil:
					ok.Add(1)
				case isLimit && le.Cap != nil:
					capped.Add(1)
				case isLimit:
					broke.Add(1)
				default:
					t.Errorf("hold %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		// The $0.05 cap allows 7 holds of $0.007; the balance alone would allow 14.
		if ok.Load() != 7 || capped.Load() != 193 {
			t.Errorf("%d holds placed, %d refused by the cap, %d by the balance; want 7 and 193", ok.Load(), capped.Load(), broke.Load())
		}
		spend, err := f.db.Spending(ctx, f.clock.Now(), store.KeyScope(f.buyer.ID))
		if err != nil || len(spend) != 1 || spend[0].Held+spend[0].Spent > spend[0].Limit {
			t.Errorf("spending %+v, %v; want held within the limit", spend, err)
		}

		// Without the cap, the balance is the limit.
		if err := f.db.SetCap(ctx, store.Cap{Scope: store.KeyScope(f.buyer.ID), Period: store.Daily}); err != nil {
			t.Fatal(err)
		}
		ok.Store(0)
		for i := range 200 {
			wg.Go(func() {
				if f.l.Hold(ctx, fmt.Sprintf("s%d", i), f.buyer, each) == nil {
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		b, _ := f.db.Balance(ctx, f.buyer.AccountID)
		if ok.Load() != 7 || b.Held > b.Credits {
			t.Errorf("%d more holds, balance %+v; want 7 more and held within credits", ok.Load(), b)
		}
		f.sumIsZero(t)
	})
}

// A hold placed before midnight counts in its own day, even when it settles after midnight; the
// new day starts empty.
func TestHold_WindowRollover(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		f := setup(t, kind, money.USD)
		ctx := context.Background()
		limit := money.USD / 100
		if err := f.db.SetCap(ctx, store.Cap{Scope: store.AccountScope(f.buyer.AccountID), Period: store.Daily, Limit: limit}); err != nil {
			t.Fatal(err)
		}
		f.clock.Set(time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC))
		if err := f.l.Hold(ctx, "late", f.buyer, limit); err != nil {
			t.Fatal(err)
		}
		err := f.l.Hold(ctx, "later", f.buyer, 1)
		le, _ := errors.AsType[*store.LimitError](err)
		if le == nil || le.Cap == nil || !le.ResetsAt.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("second hold the same day: %v; want the daily cap, resetting at midnight UTC", err)
		}
		f.clock.Set(time.Date(2026, 12, 1, 0, 0, 1, 0, time.UTC))
		if err := f.l.Hold(ctx, "next-day", f.buyer, limit); err != nil {
			t.Fatalf("first hold of the new day: %v", err)
		}
		bill := f.l.Price("late", ledger.Bounds{PromptTokens: 1 << 20, CompletionTokens: 1 << 20},
			[]ledger.Work{{NodeID: "n", ProviderID: f.provider, Ask: ask, PromptTokens: 1000, CompletionTokens: 1000, DeliveredBytes: 5000}})
		if err := f.l.Settle(ctx, bill, &store.Usage{RequestID: "late", CreatedAt: f.clock.Now()}); err != nil {
			t.Fatal(err)
		}
		spend, _ := f.db.Spending(ctx, f.clock.Now(), store.AccountScope(f.buyer.AccountID))
		if len(spend) != 1 || spend[0].Spent != 0 || spend[0].Held != limit {
			t.Errorf("new day's spending %+v; want only the new day's hold, none of the old day's spend", spend)
		}
		f.sumIsZero(t)
	})
}

// Random bills, cancels and voids over many requests: the ledger always sums to zero, and every
// buyer debit equals the providers' earnings plus the fee.
func TestConservation(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		f := setup(t, kind, 100*money.USD)
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(1, 2))
		bounds := ledger.Bounds{PromptTokens: 4000, CompletionTokens: 512}
		var wg sync.WaitGroup
		var charged atomic.Int64
		for i := range 150 {
			id := fmt.Sprintf("req%d", i)
			prompt, completion, delivered, nodes := rng.IntN(5000), rng.IntN(700), rng.IntN(3000), rng.IntN(3)
			wg.Go(func() {
				if err := f.l.Hold(ctx, id, f.buyer, f.l.MaxCost(ask, bounds)); err != nil {
					t.Errorf("hold %s: %v", id, err)
					return
				}
				var work []ledger.Work
				for n := range nodes {
					work = append(work, ledger.Work{NodeID: fmt.Sprintf("n%d", n), ProviderID: f.provider, Ask: ask,
						PromptTokens: prompt, CompletionTokens: completion / (n + 1), DeliveredBytes: delivered})
				}
				bill := f.l.Price(id, bounds, work)
				if err := f.l.Settle(ctx, bill, &store.Usage{RequestID: id, AccountID: f.buyer.AccountID, CreatedAt: f.clock.Now()}); err != nil {
					t.Errorf("settle %s: %v", id, err)
				}
				charged.Add(int64(bill.Cost()))
			})
		}
		wg.Wait()
		f.sumIsZero(t)
		b, _ := f.db.Balance(ctx, f.buyer.AccountID)
		p, _ := f.db.Balance(ctx, f.provider)
		if b.Spent != money.Nanos(charged.Load()) || b.Held != 0 || b.Credits != 100*money.USD-b.Spent {
			t.Errorf("buyer %+v, provider %+v, charged %d; want spent = charged", b, p, charged.Load())
		}
		if r, err := f.l.Recover(ctx); err != nil || r != (ledger.Recovered{}) {
			t.Errorf("recover after everything settled: %+v, %v; want no holds", r, err)
		}
	})
}

// Holds left open by a crash are closed once at start-up: settled at their last checkpoint,
// or voided when they have none.
func TestRecover(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		f := setup(t, kind, money.USD)
		ctx := context.Background()
		for i := range 5 {
			if err := f.l.Hold(ctx, fmt.Sprintf("open%d", i), f.buyer, money.USD/100); err != nil {
				t.Fatal(err)
			}
		}
		// One of them checkpointed what it had delivered.
		bill := f.l.Price("open0", ledger.Bounds{PromptTokens: 1000, CompletionTokens: 1000},
			[]ledger.Work{{NodeID: "n", ProviderID: f.provider, Ask: ask, PromptTokens: 300, CompletionTokens: 100, DeliveredBytes: 400}})
		u := &store.Usage{RequestID: "open0", AccountID: f.buyer.AccountID, KeyID: f.buyer.ID, Model: "m", Endpoint: "chat", NodeID: "n", CreatedAt: f.clock.Now()}
		if err := f.l.Checkpoint(ctx, bill, u); err != nil {
			t.Fatal(err)
		}
		r, err := f.l.Recover(ctx)
		if err != nil || r != (ledger.Recovered{Settled: 1, Voided: 4}) {
			t.Fatalf("recover = %+v, %v; want 1 settled and 4 voided", r, err)
		}
		if r, _ := f.l.Recover(ctx); r != (ledger.Recovered{}) {
			t.Errorf("second recover = %+v; want nothing", r)
		}
		rec, err := f.db.UsageByRequest(ctx, "open0")
		if err != nil || rec.Model != "m" || rec.Endpoint != "chat" || rec.NodeID != "n" || rec.Cost != bill.Cost() || rec.CompletionTokens != 100 {
			t.Errorf("recovered request's record %+v, %v; want the checkpointed record with its cost", rec, err)
		}
		b, _ := f.db.Balance(ctx, f.buyer.AccountID)
		if b.Credits != money.USD-bill.Cost() || b.Held != 0 || b.Spent != bill.Cost() {
			t.Errorf("after recovery %+v; want only the checkpointed %s charged, nothing held", b, bill.Cost())
		}
		f.sumIsZero(t)
	})
}
