package sqlstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
)

// One Commit places holds, settles and records checkpoints as PlaceHolds, Settle and
// CheckpointHolds would one after the other: each item refused for a reason of its own (the
// cap, a request held already, open or closed, a hold never placed or closed already) writes
// nothing and leaves the others alone, and the ledger still sums to zero.
func TestCommit(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		f := newCapFixture(t, db)
		ctx := context.Background()
		if err := db.SetCap(ctx, store.Cap{Scope: store.KeyScope(f.key.ID), Period: store.Daily, Limit: cents(20)}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"settled", "open", "voided"} {
			if err := f.hold(f.key, id, cents(2), capNow); err != nil {
				t.Fatal(err)
			}
		}
		f.settle(t, "settled", cents(1), capNow)
		f.settle(t, "voided", 0, capNow)

		hold := func(id string, amount money.Nanos) *store.Hold {
			return &store.Hold{RequestID: id, AccountID: f.key.AccountID, KeyID: f.key.ID, Amount: amount, CreatedAt: capNow}
		}
		bill := func(id string, debit money.Nanos) *store.Settlement {
			return &store.Settlement{RequestID: id, Debit: debit, At: capNow, ReleaseAt: capNow,
				Parts: []store.Part{{NodeID: "node_1", ProviderID: "acct_provider", Earned: debit}},
				Usage: &store.Usage{RequestID: id, AccountID: f.key.AccountID, KeyID: f.key.ID, Outcome: store.OutcomeOK, CreatedAt: capNow}}
		}
		// The key's $0.20 a day has $0.03 spent and held ($0.01 settled, $0.02 open). A hold that
		// conflicts counts in the batch's decisions (it could only make them stricter).
		w := &store.Writes{
			Holds: []*store.Hold{
				hold("new", cents(5)),     // fits: $0.08 of $0.20
				hold("capped", cents(13)), // over the cap after "new"
				hold("open", cents(1)),    // held open already
				hold("settled", cents(1)), // held and closed already
				hold("twice", cents(1)),   // fits: $0.11, the two above counted
				hold("twice", cents(1)),   // the same request again in the batch
			},
			Settlements: []*store.Settlement{
				bill("open", cents(2)),
				bill("settled", cents(1)), // closed already
				bill("never", cents(1)),   // never held
				bill("open", cents(1)),    // closed by the first in this batch
				bill("voided", cents(1)),  // closed already
				bill("new", cents(1)/2),   // placed in this very batch
				bill("capped", cents(1)),  // refused in this batch: never held
			},
			Checkpoints: []*store.Settlement{
				{RequestID: "twice", Debit: cents(1) / 10, At: capNow},
				{RequestID: "open", Debit: cents(1), At: capNow}, // settled above: dropped
			},
		}
		holds, settlements, checkpoints := db.Commit(ctx, w)

		wantHolds := []error{nil, errAny, store.ErrConflict, store.ErrConflict, nil, store.ErrConflict}
		for i, want := range wantHolds {
			checkAnyErr(t, holds[i], want)
		}
		if le, ok := errors.AsType[*store.LimitError](holds[1]); !ok || le.Cap == nil {
			t.Errorf("hold over the cap: %v; want a *LimitError of the cap", holds[1])
		}
		wantSettled := []error{nil, store.ErrClosed, store.ErrNotFound, store.ErrClosed, store.ErrClosed, nil, store.ErrNotFound}
		for i, want := range wantSettled {
			checkErr(t, settlements[i], want)
		}
		if checkpoints != nil {
			t.Errorf("checkpoints: %v", checkpoints)
		}

		open, err := db.OpenHolds(ctx)
		if err != nil || len(open) != 1 || open[0].RequestID != "twice" || open[0].Checkpoint == nil ||
			open[0].Checkpoint.Debit != cents(1)/10 {
			t.Fatalf("open holds %+v, %v; want only twice, with its checkpoint", open, err)
		}
		b, err := db.Balance(ctx, "acct_buyer")
		if err != nil || b.Held != cents(1) || b.Spent != cents(1)+cents(2)+cents(1)/2 {
			t.Errorf("balance %+v, %v; want twice's $0.01 held, $0.035 spent", b, err)
		}
		spend, err := db.Spending(ctx, capNow, store.KeyScope(f.key.ID))
		if err != nil || len(spend) != 1 || spend[0].Held != cents(1) || spend[0].Spent != cents(1)+cents(2)+cents(1)/2 {
			t.Errorf("the key's spending %+v, %v; want $0.01 held and $0.035 spent", spend, err)
		}
		if _, err := db.UsageByRequest(ctx, "new"); err != nil {
			t.Errorf("usage of new: %v; want the record written with its settlement", err)
		}
		if _, err := db.UsageByRequest(ctx, "never"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("usage of a settlement refused: %v; want none written", err)
		}
		if sum, _ := db.LedgerSum(ctx); sum != 0 {
			t.Errorf("ledger sum %d, want 0", sum)
		}
	})
}
