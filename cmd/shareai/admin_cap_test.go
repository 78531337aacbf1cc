package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
	"github.com/shareai/shareai/internal/store/sqlstore/sqlstoretest"
)

// 'admin cap' set after spending, on each kind of database: the cap counts, and the command
// shows, what was spent since the window's start; the next hold is refused by it.
func TestAdminCap_AfterSpend(t *testing.T) {
	for _, kind := range sqlstoretest.Kinds() {
		t.Run(kind, func(t *testing.T) {
			dsn := sqlstoretest.DSN(t, kind)
			ctx := context.Background()
			db := []string{"--db", dsn}
			if kind == "sqlite" {
				// SQLite is named by its directory; --db takes PostgreSQL URLs only.
				dir := filepath.Join(t.TempDir(), "data")
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				dsn = filepath.Join(dir, "coordinator.db")
				db = []string{"--data-dir", dir}
			}
			withStore := func(fn func(st *sqlstore.DB)) {
				t.Helper()
				st, err := sqlstore.Open(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				fn(st)
			}
			carol := &store.Account{ID: "acct_carol", Name: "carol", CreatedAt: time.Now()}
			_, k := store.NewKey(carol.ID, store.KeyBuyer, "one", time.Now())
			_, k2 := store.NewKey(carol.ID, store.KeyBuyer, "two", time.Now())
			withStore(func(st *sqlstore.DB) {
				if err := st.CreateAccount(ctx, carol); err != nil {
					t.Fatal(err)
				}
				for _, k := range []*store.Key{k, k2} {
					if err := st.CreateKey(ctx, k); err != nil {
						t.Fatal(err)
					}
				}
				if err := st.Deposit(ctx, carol.ID, 10*money.USD, "c1", time.Now()); err != nil {
					t.Fatal(err)
				}
				// No cap yet: $2.1 by the first key, $0.4 by the second.
				earn(t, st, "req_1", carol.ID, k.ID, "acct_dave", 2*money.USD, usd("0.1"), time.Now())
				earn(t, st, "req_2", carol.ID, k2.ID, "acct_dave", usd("0.38"), usd("0.02"), time.Now())
			})
			admin := func(args ...string) []string { return append(append([]string{"admin"}, args...), db...) }
			hold := func(id string, k *store.Key, amount money.Nanos) (err error) {
				withStore(func(st *sqlstore.DB) {
					err = st.PlaceHold(ctx, &store.Hold{RequestID: id, AccountID: k.AccountID, KeyID: k.ID, Amount: amount, CreatedAt: time.Now()})
				})
				return err
			}
			refusedBy := func(err error, scope, period string) bool {
				le, ok := errors.AsType[*store.LimitError](err)
				return ok && le.Cap != nil && le.Cap.Scope == scope && le.Cap.Period == period
			}

			for _, tt := range []struct {
				args []string
				want string
			}{
				{[]string{"cap", "carol", "--period", "daily", "--limit", "2"}, "Spent in this window: $2.5 ($0 held)"},
				{[]string{"cap", "--key", k.ID, "--period", "weekly", "--limit", "3"}, "Spent in this window: $2.1 ($0 held)"},
			} {
				if out := must(t, admin(tt.args...)...); !strings.Contains(out, tt.want) {
					t.Errorf("admin %s:\n%s\nwant %q", strings.Join(tt.args, " "), out, tt.want)
				}
			}
			if err := hold("req_3", k2, 1); !refusedBy(err, store.AccountScope(carol.ID), store.Daily) {
				t.Errorf("a hold over the account's daily cap: %v; want it refused by that cap", err)
			}

			// Raised mid-window: what is left is the new limit less what was spent.
			must(t, admin("cap", "carol", "--period", "daily", "--limit", "2.6")...)
			if err := hold("req_4", k, usd("0.1")+1); !refusedBy(err, store.AccountScope(carol.ID), store.Daily) {
				t.Errorf("a hold of $0.1 and a nano-dollar under $0.1 left: %v; want it refused", err)
			}
			if err := hold("req_5", k, usd("0.1")); err != nil {
				t.Errorf("a hold of the $0.1 left: %v", err)
			}
			// A cap set while that hold is open counts it as held.
			if out := must(t, admin("cap", "carol", "--period", "monthly", "--limit", "5")...); !strings.Contains(out, "Spent in this window: $2.5 ($0.1 held)") {
				t.Errorf("admin cap with a hold open:\n%s", out)
			}
			withStore(func(st *sqlstore.DB) {
				sp, err := st.Spending(ctx, time.Now(), store.AccountScope(carol.ID), store.KeyScope(k.ID))
				if err != nil || len(sp) != 3 {
					t.Fatalf("spending %+v, %v; want three caps", sp, err)
				}
				for _, s := range sp {
					want := usd("2.5")
					if s.Scope == store.KeyScope(k.ID) {
						want = usd("2.1")
					}
					if s.Spent != want || s.Held != usd("0.1") {
						t.Errorf("%s %s: spent %s, held %s; want $%s and $0.1", s.Scope, s.Period, s.Spent, s.Held, want)
					}
				}
				if sum, err := st.LedgerSum(ctx); sum != 0 || err != nil {
					t.Errorf("ledger sum %d, %v", sum, err)
				}
			})
		})
	}
}
