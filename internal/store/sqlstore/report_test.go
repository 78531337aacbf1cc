package sqlstore_test

import (
	"context"
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
