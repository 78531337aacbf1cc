package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
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

// replicas is one database opened n times, as n coordinator processes open it: each handle
// has its own connections (on PostgreSQL, its own pool).
type replicas struct {
	dbs      []*sqlstore.DB
	clock    *clock
	buyer    *store.Key
	provider string
}

func openReplicas(t *testing.T, kind string, n int, credit money.Nanos) *replicas {
	t.Helper()
	ctx := context.Background()
	dsn := sqlstoretest.DSN(t, kind)
	r := &replicas{clock: &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}}
	for range n {
		db, err := sqlstore.Open(ctx, dsn)
		if err != nil {
			t.Fatalf("open %s store: %v", kind, err)
		}
		t.Cleanup(func() { db.Close() })
		r.dbs = append(r.dbs, db)
	}
	db := r.dbs[0]
	mk := func(name string) string {
		a := &store.Account{ID: store.NewID("acct"), Name: name, CreatedAt: r.clock.Now()}
		if err := db.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	buyer := mk("buyer")
	r.provider = mk("provider")
	_, r.buyer = store.NewKey(buyer, store.KeyBuyer, "", r.clock.Now())
	if err := db.CreateKey(ctx, r.buyer); err != nil {
		t.Fatal(err)
	}
	if err := db.Deposit(ctx, buyer, credit, "start", r.clock.Now()); err != nil {
		t.Fatal(err)
	}
	return r
}

// ledger returns a shared ledger for replica name on handle i. It is not closed when the test
// ends: a replica that is never closed is one that crashed.
func (r *replicas) ledger(i int, name string) *ledger.Ledger {
	return ledger.New(ledger.Config{Store: r.dbs[i], FeeBasisPoints: 500, SettlementDelay: time.Hour, Now: r.clock.Now,
		Replica: name, Shared: true, LeaseTTL: 15 * time.Second})
}

func (r *replicas) sumIsZero(t *testing.T) {
	t.Helper()
	sum, err := r.dbs[0].LedgerSum(context.Background())
	if err != nil || sum != 0 {
		t.Fatalf("ledger sum = %d, %v; want 0", sum, err)
	}
}

// openHolds returns the open holds by request id, as replica names.
func (r *replicas) openHolds(t *testing.T) map[string]string {
	t.Helper()
	hs, err := r.dbs[0].OpenHolds(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, h := range hs {
		m[h.RequestID] = h.Replica
	}
	return m
}

func (r *replicas) bill(l *ledger.Ledger, id string, completion int) *ledger.Bill {
	return l.Price(id, ledger.Bounds{PromptTokens: 1000, CompletionTokens: 1000},
		[]ledger.Work{{NodeID: "n", ProviderID: r.provider, Ask: ask, PromptTokens: 300, CompletionTokens: completion, DeliveredBytes: 4 * completion}})
}

func (r *replicas) usage(id string) *store.Usage {
	return &store.Usage{RequestID: id, AccountID: r.buyer.AccountID, KeyID: r.buyer.ID, Outcome: store.OutcomeOK, CreatedAt: r.clock.Now()}
}

// A replica that restarts under its name closes its own open holds (and those placed without
// a replica), never a live replica's.
func TestRecover_OwnHoldsOnly(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		r := openReplicas(t, kind, 2, money.USD)
		ctx := context.Background()
		a, b := r.ledger(0, "rep_a"), r.ledger(1, "rep_b")
		defer b.Close()
		for i := range 3 {
			if err := a.Hold(ctx, fmt.Sprintf("a%d", i), r.buyer, money.USD/100); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 {
			if err := b.Hold(ctx, fmt.Sprintf("b%d", i), r.buyer, money.USD/100); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.dbs[0].PlaceHold(ctx, &store.Hold{RequestID: "old", AccountID: r.buyer.AccountID, KeyID: r.buyer.ID,
			Amount: money.USD / 100, CreatedAt: r.clock.Now()}); err != nil {
			t.Fatal(err)
		}
		cp := r.bill(a, "a0", 100)
		if err := a.Checkpoint(ctx, cp, r.usage("a0")); err != nil {
			t.Fatal(err)
		}
		if got, want := r.openHolds(t), map[string]string{"a0": "rep_a", "a1": "rep_a", "a2": "rep_a", "b0": "rep_b", "b1": "rep_b", "old": ""}; !mapsEqual(got, want) {
			t.Fatalf("open holds %v; want %v", got, want)
		}

		// rep_a crashes (it is never closed) and restarts.
		a2 := r.ledger(0, "rep_a")
		defer a2.Close()
		got, err := a2.Recover(ctx)
		if want := (ledger.Recovered{Settled: 1, Voided: 3}); err != nil || got != want {
			t.Fatalf("restarted rep_a: Recover = %+v, %v; want %+v", got, err, want)
		}
		if got, want := r.openHolds(t), map[string]string{"b0": "rep_b", "b1": "rep_b"}; !mapsEqual(got, want) {
			t.Errorf("open holds after rep_a's recovery %v; want rep_b's untouched", got)
		}
		// The live replica settles its holds as if nothing happened.
		for _, id := range []string{"b0", "b1"} {
			if err := b.Settle(ctx, r.bill(b, id, 200), r.usage(id)); err != nil {
				t.Fatalf("rep_b settles %s: %v", id, err)
			}
		}
		bal, _ := r.dbs[0].Balance(ctx, r.buyer.AccountID)
		if want := cp.Cost() + 2*r.bill(b, "x", 200).Cost(); bal.Held != 0 || bal.Spent != want {
			t.Errorf("buyer %+v; want nothing held and spent %s", bal, want)
		}
		r.sumIsZero(t)
	})
}

// A dead replica that never restarts: once its lease expires, its peers' sweeps close its holds,
// exactly once however many sweep at once, and never a live peer's.
func TestRecoverPeers_Takeover(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		r := openReplicas(t, kind, 3, money.USD)
		ctx := context.Background()
		a, b, c := r.ledger(0, "rep_a"), r.ledger(1, "rep_b"), r.ledger(2, "rep_c")
		defer b.Close()
		defer c.Close()
		for i := range 20 {
			if err := a.Hold(ctx, fmt.Sprintf("a%d", i), r.buyer, money.USD/1000); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Hold(ctx, "b0", r.buyer, money.USD/1000); err != nil {
			t.Fatal(err)
		}
		if err := c.Hold(ctx, "c0", r.buyer, money.USD/1000); err != nil {
			t.Fatal(err)
		}
		cp := r.bill(a, "a0", 100)
		if err := a.Checkpoint(ctx, cp, r.usage("a0")); err != nil {
			t.Fatal(err)
		}
		// rep_a dies now. Within its lease, nobody touches its holds.
		r.clock.Set(r.clock.Now().Add(10 * time.Second))
		if got, err := b.RecoverPeers(ctx); err != nil || got != (ledger.Recovered{}) {
			t.Fatalf("sweep within rep_a's lease = %+v, %v; want nothing", got, err)
		}
		// Past it, while rep_b and rep_c renew theirs, both sweep at once, several times.
		r.clock.Set(r.clock.Now().Add(10 * time.Second))
		for _, l := range []*ledger.Ledger{b, c} {
			if err := l.RenewLease(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var settled, voided atomic.Int64
		var wg sync.WaitGroup
		for i := range 6 {
			l := []*ledger.Ledger{b, c}[i%2]
			wg.Go(func() {
				got, err := l.RecoverPeers(ctx)
				if err != nil {
					t.Errorf("sweep: %v", err)
				}
				settled.Add(int64(got.Settled))
				voided.Add(int64(got.Voided))
			})
		}
		wg.Wait()
		if settled.Load() != 1 || voided.Load() != 19 {
			t.Errorf("sweeps closed %d at their checkpoint and voided %d; want 1 and 19, once each", settled.Load(), voided.Load())
		}
		if got, want := r.openHolds(t), map[string]string{"b0": "rep_b", "c0": "rep_c"}; !mapsEqual(got, want) {
			t.Errorf("open holds after the sweeps %v; want the live replicas' untouched", got)
		}
		// rep_a comes back late and settles what it had: nothing moves twice.
		before, _ := r.dbs[0].Balance(ctx, r.buyer.AccountID)
		if err := a.Settle(ctx, r.bill(a, "a0", 300), r.usage("a0")); err != nil {
			t.Errorf("late settlement of a recovered hold: %v; want it taken as done", err)
		}
		after, _ := r.dbs[0].Balance(ctx, r.buyer.AccountID)
		if *after != *before || after.Spent != cp.Cost() {
			t.Errorf("buyer after the late settlement %+v; want %+v, charged the checkpoint %s once", after, before, cp.Cost())
		}
		r.sumIsZero(t)
	})
}

// A settlement that arrives twice (a retry after a timeout, a recovery racing the request's own
// settlement, two replicas) charges and pays once.
func TestSettle_Idempotent(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		r := openReplicas(t, kind, 3, money.USD)
		ctx := context.Background()
		ls := []*ledger.Ledger{r.ledger(0, "rep_a"), r.ledger(1, "rep_b"), r.ledger(2, "rep_c")}
		for _, l := range ls {
			defer l.Close()
		}
		var bill *ledger.Bill
		for round := range 5 {
			id := fmt.Sprintf("req%d", round)
			bill = r.bill(ls[0], id, 400)
			if err := ls[0].Hold(ctx, id, r.buyer, money.USD/100); err != nil {
				t.Fatal(err)
			}
			if err := ls[0].Checkpoint(ctx, r.bill(ls[0], id, 100), r.usage(id)); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for i := range 9 {
				l := ls[i%3]
				mine := r.bill(ls[0], id, 400) // the same bill, each settlement its own copy, as each replica has
				wg.Go(func() {
					var err error
					switch i % 3 {
					case 0:
						err = l.Settle(ctx, mine, r.usage(id))
					case 1:
						l.SettleLater(mine, r.usage(id))
					default:
						_, err = ls[0].Recover(ctx) // the checkpoint's bill, racing the settlement
					}
					if err != nil {
						t.Errorf("settle %s: %v", id, err)
					}
				})
			}
			wg.Wait()
		}
		for _, l := range ls {
			l.Close() // commits the queued settlements
		}
		// Each request is charged once, and its node paid once: at its bill, or at its
		// checkpoint's when the recovery won, as its usage record (written in the same
		// transaction as the winning settlement) says.
		full, part := bill.Settlement, r.bill(ls[0], "x", 100).Settlement
		var spent, earned money.Nanos
		for round := range 5 {
			rec, err := r.dbs[0].UsageByRequest(ctx, fmt.Sprintf("req%d", round))
			if err != nil {
				t.Fatal(err)
			}
			switch rec.Cost {
			case full.Debit:
				earned += full.Debit - full.Fee
			case part.Debit:
				earned += part.Debit - part.Fee
			default:
				t.Errorf("request %s cost %s; want $%s or $%s", rec.RequestID, rec.Cost, full.Debit, part.Debit)
			}
			spent += rec.Cost
		}
		bal, _ := r.dbs[0].Balance(ctx, r.buyer.AccountID)
		prov, _ := r.dbs[0].Balance(ctx, r.provider)
		if bal.Spent != spent || bal.Held != 0 || bal.Credits != money.USD-spent {
			t.Errorf("buyer %+v; want spent %s, once per request", bal, spent)
		}
		if prov.Pending != earned {
			t.Errorf("provider %+v; want %s pending, once per request", prov, earned)
		}
		r.sumIsZero(t)
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// 200 concurrent requests for one capped key, spread over three replicas with a connection
// pool each, holding and settling: the cap is never exceeded, counted in its window at any time
// or in the ledger at the end, and the ledger balances.
func TestHold_ZeroOvershootAcrossReplicas(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		r := openReplicas(t, kind, 3, money.USD)
		ctx := context.Background()
		ls := []*ledger.Ledger{r.ledger(0, "rep_a"), r.ledger(1, "rep_b"), r.ledger(2, "rep_c")}
		hold := ls[0].MaxCost(ask, ledger.Bounds{PromptTokens: 1000, CompletionTokens: 1000})
		limit := 20 * hold
		scope := store.KeyScope(r.buyer.ID)
		if err := r.dbs[0].SetCap(ctx, store.Cap{Scope: scope, Period: store.Daily, Limit: limit}); err != nil {
			t.Fatal(err)
		}
		check := func(when string) {
			sp, err := r.dbs[2].Spending(ctx, r.clock.Now(), scope)
			if err != nil || len(sp) != 1 {
				t.Errorf("%s: spending %+v, %v", when, sp, err)
				return
			}
			if sp[0].Spent+sp[0].Held > limit {
				t.Errorf("%s: spent %s + held %s exceeds the cap of %s", when, sp[0].Spent, sp[0].Held, limit)
			}
		}
		done := make(chan struct{})
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			for {
				select {
				case <-done:
					return
				default:
					check("during")
				}
			}
		}()
		var placed, refused, charged atomic.Int64
		var wg sync.WaitGroup
		for i := range 200 {
			l := ls[i%3]
			wg.Go(func() {
				id := fmt.Sprintf("r%d", i)
				// A refused request tries again, as a buyer would, while others settle
				// and free the cap's headroom.
				var err error
				for range 30 {
					err = l.Hold(ctx, id, r.buyer, hold)
					if le, ok := errors.AsType[*store.LimitError](err); !ok || le.Cap == nil {
						break
					}
					runtime.Gosched()
				}
				if le, ok := errors.AsType[*store.LimitError](err); ok && le.Cap != nil {
					refused.Add(1)
					return
				} else if err != nil {
					t.Errorf("hold %s: %v", id, err)
					return
				}
				placed.Add(1)
				bill := r.bill(l, id, 100+i%900)
				if err := l.Settle(ctx, bill, r.usage(id)); err != nil {
					t.Errorf("settle %s: %v", id, err)
					return
				}
				charged.Add(int64(bill.Cost()))
			})
		}
		wg.Wait()
		close(done)
		<-watched
		check("after")
		bal, _ := r.dbs[1].Balance(ctx, r.buyer.AccountID)
		if bal.Spent != money.Nanos(charged.Load()) || bal.Spent > limit || bal.Held != 0 {
			t.Errorf("buyer %+v, charged %d; want spent = charged within the cap of %s and nothing held", bal, charged.Load(), limit)
		}
		if placed.Load() < 20 || refused.Load() == 0 {
			t.Errorf("%d holds placed, %d refused by the cap; want at least 20 placed and some refused", placed.Load(), refused.Load())
		}
		t.Logf("%d holds placed, %d refused by the cap; spent $%s of $%s", placed.Load(), refused.Load(), bal.Spent, limit)
		for _, l := range ls {
			l.Close()
		}
		r.sumIsZero(t)
	})
}

// RunLease keeps a live replica's holds and sweeps a dead one's once its lease expires.
func TestRunLease_Sweeps(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		r := openReplicas(t, kind, 2, money.USD)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		mk := func(i int, name string) *ledger.Ledger {
			return ledger.New(ledger.Config{Store: r.dbs[i], Replica: name, Shared: true, LeaseTTL: 100 * time.Millisecond})
		}
		a, b := mk(0, "rep_a"), mk(1, "rep_b")
		defer b.Close()
		if err := a.Hold(ctx, "a0", r.buyer, money.USD/100); err != nil {
			t.Fatal(err)
		}
		if err := b.Hold(ctx, "b0", r.buyer, money.USD/100); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); b.RunLease(ctx) }()
		// rep_a never renews: b's sweep closes its hold, and b's own stays open.
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := r.openHolds(t)
			if _, ok := got["a0"]; !ok {
				if want := map[string]string{"b0": "rep_b"}; !mapsEqual(got, want) {
					t.Errorf("open holds %v; want %v", got, want)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rep_a's hold still open after 10s of rep_b's sweeps: %v", got)
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		<-done
		r.sumIsZero(t)
	})
}
