package sqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
)

func TestDB_Accounts(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		got, err := db.Accounts(ctx)
		if err != nil || len(got) != 0 {
			t.Fatalf("Accounts on an empty store = %v, %v; want none", got, err)
		}
		mustAccount(t, db, "acct_2", "zoe")
		mustAccount(t, db, "acct_1", "alice")
		got, err = db.Accounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Name != "alice" || got[0].ID != "acct_1" || got[1].Name != "zoe" || !got[0].CreatedAt.Equal(t0) {
			t.Errorf("Accounts = %+v, %+v; want alice (acct_1), then zoe", got[0], got[1])
		}
	})
}

func TestDB_KeyUsage(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		rec := func(id, account, key string, created time.Time, cost money.Nanos) *store.Usage {
			u := usage(id, account, created)
			u.KeyID, u.Cost = key, cost
			return u
		}
		if err := db.InsertUsage(ctx, []*store.Usage{
			rec("req_1", "acct_1", "key_1", t0, 100),
			rec("req_2", "acct_1", "key_1", at(time.Hour), 20),
			rec("req_3", "acct_1", "key_1", at(2*time.Hour), 3),
			rec("req_4", "acct_1", "key_2", at(2*time.Hour), 4000),   // another key of the account
			rec("req_5", "acct_2", "key_1", at(2*time.Hour), 50_000), // a forged key id on another account
			rec("req_6", "acct_1", "key_1", at(-time.Millisecond), 600_000),
		}); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name         string
			account, key string
			since        time.Time
			want         money.Nanos
		}{
			{"all since t0", "acct_1", "key_1", t0, 123},
			{"since is inclusive", "acct_1", "key_1", at(time.Hour), 23},
			{"later", "acct_1", "key_1", at(time.Hour + time.Millisecond), 3},
			{"nothing since", "acct_1", "key_1", at(3 * time.Hour), 0},
			{"everything", "acct_1", "key_1", time.Time{}, 600_123},
			{"the other key", "acct_1", "key_2", t0, 4000},
			{"another account's key id sums only that account", "acct_2", "key_1", t0, 50_000},
			{"unknown key", "acct_1", "key_9", t0, 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.KeyUsage(ctx, tt.account, tt.key, tt.since)
				if err != nil || got != tt.want {
					t.Errorf("KeyUsage(%s, %s, %v) = %d, %v; want %d", tt.account, tt.key, tt.since, got, err, tt.want)
				}
			})
		}
	})
}

// Earnings per node and UTC day, on every database: t0 is 2023-11-14T22:13:20Z, so t0+2h is
// the next day.
func TestDB_Earnings(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_b", "buyer")
		mustAccount(t, db, "acct_p", "provider")
		if err := db.Deposit(ctx, "acct_b", 1000, "d1", t0); err != nil {
			t.Fatal(err)
		}
		type part struct {
			node    string
			earned  money.Nanos
			at      time.Time
			release time.Time
		}
		for i, p := range []part{
			{"node_1", 10, t0, at(time.Hour)},                     // released below
			{"node_1", 20, at(time.Minute), at(10 * time.Hour)},   // pending
			{"node_2", 40, at(time.Minute), at(time.Hour)},        // released
			{"node_1", 80, at(2 * time.Hour), at(10 * time.Hour)}, // next day, pending
			{"node_2", 160, at(-24 * time.Hour), at(time.Hour)},   // the day before
		} {
			id := fmt.Sprintf("req_%d", i)
			if err := db.PlaceHold(ctx, &store.Hold{RequestID: id, AccountID: "acct_b", KeyID: "key_1", Amount: p.earned, CreatedAt: p.at}); err != nil {
				t.Fatal(err)
			}
			s := &store.Settlement{RequestID: id, Debit: p.earned, At: p.at, ReleaseAt: p.release,
				Parts: []store.Part{{NodeID: p.node, ProviderID: "acct_p", Earned: p.earned}}}
			if errs := db.Settle(ctx, []*store.Settlement{s}); errs[0] != nil {
				t.Fatal(errs[0])
			}
		}
		if _, err := db.ReleaseEarnings(ctx, at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		day := func(s string) time.Time {
			d, _ := time.Parse(time.DateOnly, s)
			return d
		}
		tests := []struct {
			name  string
			since time.Time
			want  []store.Earning
		}{
			{"all", time.Time{}, []store.Earning{
				{NodeID: "node_1", Day: day("2023-11-15"), Pending: 80},
				{NodeID: "node_1", Day: day("2023-11-14"), Pending: 20, Available: 10},
				{NodeID: "node_2", Day: day("2023-11-14"), Available: 40},
				{NodeID: "node_2", Day: day("2023-11-13"), Available: 160},
			}},
			{"since a day's start", day("2023-11-15"), []store.Earning{
				{NodeID: "node_1", Day: day("2023-11-15"), Pending: 80},
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.Earnings(ctx, "acct_p", tt.since)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("Earnings since %v\n got %v\nwant %v", tt.since, got, tt.want)
				}
			})
		}
		if got, err := db.Earnings(ctx, "acct_b", time.Time{}); err != nil || len(got) != 0 {
			t.Errorf("a buyer's earnings %v, %v; want none", got, err)
		}
	})
}
