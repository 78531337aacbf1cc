package main

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
	"github.com/shareai/shareai/internal/store/sqlstore/sqlstoretest"
)

// shareai runs the command line in-process and returns its exit code and output.
func shareai(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// must runs a command line that must succeed, and returns its standard output.
func must(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := shareai(t, args...)
	if code != 0 {
		t.Fatalf("shareai %s = %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// withStore opens the data dir's database for the checks in fn, and closes it after.
func withStore(t *testing.T, dir string, fn func(st *sqlstore.DB)) {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), filepath.Join(dir, "coordinator.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fn(st)
}

func mustAccount(t *testing.T, st store.Store, name string) *store.Account {
	t.Helper()
	a, err := st.Account(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustBalance(t *testing.T, st store.Store, accountID string) *store.Balance {
	t.Helper()
	b, err := st.Balance(context.Background(), accountID)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func usd(s string) money.Nanos {
	n, err := money.ParseUSD(s)
	if err != nil {
		panic(err)
	}
	return n
}

func TestKeysCreate_Limit(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	code, out, errs := shareai(t, "keys", "create", "--data-dir", dir, "--account", "alice", "--name", "capped", "--limit", "5.25", "--period", "daily")
	if code != 0 || !strings.HasPrefix(out, "sk-") || !strings.Contains(errs, "$5.25 a day") {
		t.Fatalf("keys create --limit = %d, %q, %q", code, out, errs)
	}
	secret := strings.TrimSpace(out)
	must(t, "keys", "create", "--data-dir", dir, "--account", "alice", "--limit", "7") // monthly by default
	must(t, "keys", "create", "--data-dir", dir, "--account", "alice")                 // no limit
	withStore(t, dir, func(st *sqlstore.DB) {
		k, err := st.KeyByHash(ctx, store.HashSecret(secret))
		if err != nil {
			t.Fatal(err)
		}
		sp, err := st.Spending(ctx, time.Now(), store.KeyScope(k.ID))
		if err != nil || len(sp) != 1 || sp[0].Period != store.Daily || sp[0].Limit != usd("5.25") {
			t.Errorf("the capped key's caps %+v, %v; want daily $5.25", sp, err)
		}
		keys, err := st.Keys(ctx, "", store.KeyBuyer)
		if err != nil || len(keys) != 3 {
			t.Fatalf("keys %d, %v; want 3", len(keys), err)
		}
		var caps []string
		for _, k := range keys {
			sp, _ := st.Spending(ctx, time.Now(), store.KeyScope(k.ID))
			for _, s := range sp {
				caps = append(caps, s.Period+" "+s.Limit.String())
			}
		}
		if strings.Join(caps, ",") != "monthly 7,daily 5.25" && strings.Join(caps, ",") != "daily 5.25,monthly 7" {
			t.Errorf("caps of the three keys: %v; want daily 5.25 and monthly 7, the third key none", caps)
		}
	})

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"provider token", []string{"--provider", "--limit", "5"}, "provider token"},
		{"bad amount", []string{"--limit", "five"}, "--limit"},
		{"zero", []string{"--limit", "0"}, "--limit"},
		{"negative", []string{"--limit=-1"}, "--limit"},
		{"bad period", []string{"--limit", "5", "--period", "yearly"}, "--period"},
		{"period alone", []string{"--period", "daily"}, "--period needs a --limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := shareai(t, append([]string{"keys", "create", "--data-dir", dir, "--account", "alice"}, tt.args...)...)
			if code != 1 || out != "" || !strings.Contains(errs, tt.want) {
				t.Errorf("= %d, %q, %q; want 1, no key, an error about %s", code, out, errs, tt.want)
			}
		})
	}
	withStore(t, dir, func(st *sqlstore.DB) {
		if keys, _ := st.Keys(ctx, "", ""); len(keys) != 3 {
			t.Errorf("%d keys after the refused creates; want still 3", len(keys))
		}
	})
}

func TestAdmin(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	dd := []string{"--data-dir", dir}
	admin := func(args ...string) []string { return append(append([]string{"admin"}, args...), dd...) }

	// No database yet: admin refuses rather than make an empty one.
	if code, _, errs := shareai(t, admin("accounts")...); code != 1 || !strings.Contains(errs, "no coordinator database") {
		t.Errorf("admin on an empty data dir = %d, %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "coordinator.db")); err == nil {
		t.Errorf("admin created a database")
	}
	secret := strings.TrimSpace(must(t, "keys", "create", "--data-dir", dir, "--account", "alice"))
	must(t, "keys", "create", "--data-dir", dir, "--account", "bob", "--provider")

	t.Run("credit", func(t *testing.T) {
		if out := must(t, admin("credit", "alice", "10", "--ref", "wire-1")...); !strings.Contains(out, "Credited $10 to alice (ref wire-1)") {
			t.Errorf("credit: %q", out)
		}
		// A retry with the same ref credits nothing more, and succeeds.
		code, out, errs := shareai(t, admin("credit", "--ref", "wire-1", "alice", "10")...)
		if code != 0 || !strings.Contains(errs, "used already") || !strings.Contains(out, "Balance of alice: $10 ") {
			t.Errorf("credit retry = %d, %q, %q; want 0, nothing more credited", code, out, errs)
		}
		// Without a ref, each run is a deposit of its own, with a ref printed.
		out = must(t, admin("credit", "alice", "2.5")...)
		if !regexp.MustCompile(`\(ref credit-[0-9a-f]{16}\)`).MatchString(out) {
			t.Errorf("credit without --ref: %q; want a random ref printed", out)
		}
		must(t, append([]string{"admin", "credit", "alice", "0.000000001"}, dd...)...)
		withStore(t, dir, func(st *sqlstore.DB) {
			if b := mustBalance(t, st, mustAccount(t, st, "alice").ID); b.Credits != usd("12.500000001") || b.Deposited != b.Credits {
				t.Errorf("alice's balance %+v; want $12.500000001", b)
			}
		})
		for _, tt := range []struct {
			name     string
			args     []string
			code     int
			contains string
		}{
			{"unknown account", []string{"credit", "nobody", "1"}, 1, `no account "nobody"`},
			{"zero", []string{"credit", "alice", "0"}, 1, "not a positive amount"},
			{"not an amount", []string{"credit", "alice", "ten"}, 1, "amount"},
			{"too many decimals", []string{"credit", "alice", "0.0000000001"}, 1, "9 decimals"},
			{"negative", []string{"credit", "alice", "-1"}, 2, ""},
			{"no amount", []string{"credit", "alice"}, 2, "wrong number of arguments"},
			{"unknown verb", []string{"refund", "alice"}, 2, `unknown admin command "refund"`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				code, _, errs := shareai(t, admin(tt.args...)...)
				if code != tt.code || !strings.Contains(errs, tt.contains) {
					t.Errorf("= %d, %q; want %d and %q", code, errs, tt.code, tt.contains)
				}
			})
		}
		withStore(t, dir, func(st *sqlstore.DB) {
			if b := mustBalance(t, st, mustAccount(t, st, "alice").ID); b.Credits != usd("12.500000001") {
				t.Errorf("alice's balance after refused credits %s", b.Credits)
			}
		})
	})

	// Bob's node earns $3 on a request of Alice's, released, and $0.5 on another, pending.
	withStore(t, dir, func(st *sqlstore.DB) {
		alice, bob := mustAccount(t, st, "alice"), mustAccount(t, st, "bob")
		k, err := st.KeyByHash(ctx, store.HashSecret(secret))
		if err != nil {
			t.Fatal(err)
		}
		earn(t, st, "req_1", alice.ID, k.ID, bob.ID, 3*money.USD, usd("0.15"), time.Now().Add(-time.Minute))
		earn(t, st, "req_2", alice.ID, k.ID, bob.ID, usd("0.5"), usd("2.65"), time.Now().Add(time.Hour))
		if _, err := st.ReleaseEarnings(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("accounts", func(t *testing.T) {
		out := must(t, admin("accounts")...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 {
			t.Fatalf("accounts:\n%s\nwant a header and two accounts", out)
		}
		fields := func(line string) string { return strings.Join(strings.Fields(line), " ") }
		withStore(t, dir, func(st *sqlstore.DB) {
			alice, bob := mustAccount(t, st, "alice"), mustAccount(t, st, "bob")
			want := []string{
				"NAME ID BALANCE HELD SPENT PENDING AVAILABLE PAID OUT",
				"alice " + alice.ID + " $6.200000001 $0 $6.3 $0 $0 $0",
				"bob " + bob.ID + " $0 $0 $0 $0.5 $3 $0",
			}
			for i, w := range want {
				if got := fields(lines[i]); got != w {
					t.Errorf("line %d: %q; want %q", i, got, w)
				}
			}
		})
	})

	t.Run("payout", func(t *testing.T) {
		book := filepath.Join(t.TempDir(), "payouts.csv")
		if out := must(t, admin("payout", "bob", "1", "--ref", "po-1", "--csv", book)...); !strings.Contains(out, "Paid out $1 to bob (ref po-1)") || !strings.Contains(out, "$2 available") {
			t.Errorf("payout: %q", out)
		}
		// A retry pays nothing more and writes no second line.
		if code, _, errs := shareai(t, admin("payout", "bob", "1", "--ref", "po-1", "--csv", book)...); code != 0 || !strings.Contains(errs, "used already") {
			t.Errorf("payout retry = %d, %q", code, errs)
		}
		if code, _, errs := shareai(t, admin("payout", "bob", "2.5")...); code != 1 || !strings.Contains(errs, "$2 available to pay out, less than $2.5 ($0.5 pending release)") {
			t.Errorf("payout of more than available = %d, %q", code, errs)
		}
		if code, _, errs := shareai(t, admin("payout", "ghost", "all")...); code != 1 || !strings.Contains(errs, `no account "ghost"`) {
			t.Errorf("payout to an unknown account = %d, %q", code, errs)
		}
		must(t, admin("payout", "bob", "all", "--csv", book)...)
		if code, _, errs := shareai(t, admin("payout", "bob", "all")...); code != 1 || !strings.Contains(errs, "nothing available") {
			t.Errorf("payout of all, with nothing left = %d, %q", code, errs)
		}
		withStore(t, dir, func(st *sqlstore.DB) {
			if b := mustBalance(t, st, mustAccount(t, st, "bob").ID); b.Available != 0 || b.PaidOut != 3*money.USD || b.Pending != usd("0.5") {
				t.Errorf("bob's balance %+v; want $3 paid out, $0.5 pending", b)
			}
			if sum, err := st.LedgerSum(ctx); sum != 0 || err != nil {
				t.Errorf("ledger sum %d, %v", sum, err)
			}
		})
		f, err := os.Open(book)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rows, err := csv.NewReader(f).ReadAll()
		if err != nil || len(rows) != 3 {
			t.Fatalf("payouts.csv: %v, %v; want a header and 2 lines", rows, err)
		}
		if strings.Join(rows[0], ",") != "time,account,amount_usd,ref" ||
			strings.Join(rows[1][1:], ",") != "bob,1,po-1" || rows[2][1] != "bob" || rows[2][2] != "2" || !strings.HasPrefix(rows[2][3], "payout-") {
			t.Errorf("payouts.csv: %v", rows)
		}
		if _, err := time.Parse(time.RFC3339, rows[1][0]); err != nil {
			t.Errorf("time %q: %v", rows[1][0], err)
		}
	})

	t.Run("cap", func(t *testing.T) {
		var keyID, prefix, aliceID string
		withStore(t, dir, func(st *sqlstore.DB) {
			k, _ := st.KeyByHash(ctx, store.HashSecret(secret))
			keyID, prefix, aliceID = k.ID, k.Prefix, k.AccountID
		})
		if out := must(t, admin("cap", "alice", "--period", "weekly", "--limit", "3")...); !strings.Contains(out, "weekly spend cap of $3 on account alice") {
			t.Errorf("cap: %q", out)
		}
		must(t, admin("cap", "--key", keyID, "--period", "monthly", "--limit", "1.5")...)
		must(t, admin("cap", "--key", prefix+"…", "--period", "daily", "--limit", "0.25")...)
		spends := func() string {
			var got []string
			withStore(t, dir, func(st *sqlstore.DB) {
				sp, err := st.Spending(ctx, time.Now(), store.AccountScope(aliceID), store.KeyScope(keyID))
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range sp {
					got = append(got, strings.SplitN(s.Scope, ":", 2)[0]+" "+s.Period+" "+s.Limit.String())
				}
			})
			return strings.Join(got, ", ")
		}
		if got, want := spends(), "account weekly 3, key daily 0.25, key monthly 1.5"; got != want {
			t.Errorf("caps %q; want %q", got, want)
		}
		if out := must(t, admin("cap", "--key", keyID, "--period", "monthly", "--limit", "0")...); !strings.Contains(out, "Removed the monthly spend cap") {
			t.Errorf("cap --limit 0: %q", out)
		}
		if got, want := spends(), "account weekly 3, key daily 0.25"; got != want {
			t.Errorf("caps after removing one %q; want %q", got, want)
		}
		for _, tt := range []struct {
			name     string
			args     []string
			code     int
			contains string
		}{
			{"account and key", []string{"cap", "alice", "--key", keyID, "--period", "daily", "--limit", "1"}, 2, "not both"},
			{"neither", []string{"cap", "--period", "daily", "--limit", "1"}, 2, "name an ACCOUNT"},
			{"no period", []string{"cap", "alice", "--limit", "1"}, 2, "--period"},
			{"no limit", []string{"cap", "alice", "--period", "daily"}, 2, "--limit"},
			{"bad period", []string{"cap", "alice", "--period", "hourly", "--limit", "1"}, 1, "--period"},
			{"negative", []string{"cap", "alice", "--period", "daily", "--limit=-1"}, 1, "negative"},
			{"unknown account", []string{"cap", "nobody", "--period", "daily", "--limit", "1"}, 1, `no account "nobody"`},
			{"unknown key", []string{"cap", "--key", "key_nope", "--period", "daily", "--limit", "1"}, 1, `no API key "key_nope"`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				code, _, errs := shareai(t, admin(tt.args...)...)
				if code != tt.code || !strings.Contains(errs, tt.contains) {
					t.Errorf("= %d, %q; want %d and %q", code, errs, tt.code, tt.contains)
				}
			})
		}
		if got, want := spends(), "account weekly 3, key daily 0.25"; got != want {
			t.Errorf("caps after refused commands %q; want %q", got, want)
		}
	})

	t.Run("provider earnings", func(t *testing.T) {
		out := must(t, "provider", "earnings", "--data-dir", dir, "--account", "bob", "--days", "7")
		today := time.Now().UTC().Format(time.DateOnly)
		if !regexp.MustCompile(today+`\s+node_1\s+\$0\.5\s+\$3\n`).MatchString(out) ||
			!strings.Contains(out, "Totals for bob: $0.5 pending, $0 available, $3 paid out.") {
			t.Errorf("provider earnings:\n%s", out)
		}
		if out := must(t, "provider", "earnings", "--data-dir", dir, "--account", "alice"); !strings.Contains(out, "No earnings since") {
			t.Errorf("a buyer's earnings:\n%s", out)
		}
		if code, _, errs := shareai(t, "provider", "earnings", "--data-dir", dir, "--account", "bob", "--days", "0"); code != 1 || !strings.Contains(errs, "--days") {
			t.Errorf("--days 0 = %d, %q", code, errs)
		}
		if code, _, errs := shareai(t, "provider", "earnings", "--data-dir", dir, "--account", "ghost"); code != 1 || !strings.Contains(errs, `no account "ghost"`) {
			t.Errorf("unknown account = %d, %q", code, errs)
		}
	})
}

// earn bills a buyer's request, of which node_1 of a provider earns an amount, released at a
// time.
func earn(t *testing.T, st store.Store, requestID, buyerID, keyID, providerID string, earned, fee money.Nanos, releaseAt time.Time) {
	t.Helper()
	ctx, now := context.Background(), time.Now()
	if err := st.PlaceHold(ctx, &store.Hold{RequestID: requestID, AccountID: buyerID, KeyID: keyID, Amount: earned + fee, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	s := &store.Settlement{RequestID: requestID, Debit: earned + fee, Fee: fee, ReleaseAt: releaseAt, At: now,
		Parts: []store.Part{{NodeID: "node_1", ProviderID: providerID, Earned: earned}}}
	if errs := st.Settle(ctx, []*store.Settlement{s}); errs[0] != nil {
		t.Fatal(errs[0])
	}
}

// The admin commands on each kind of database the coordinator runs on, named by --db.
func TestAdmin_DB(t *testing.T) {
	for _, kind := range sqlstoretest.Kinds() {
		t.Run(kind, func(t *testing.T) {
			dsn := sqlstoretest.DSN(t, kind)
			ctx := context.Background()
			st, err := sqlstore.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			carol := &store.Account{ID: "acct_carol", Name: "carol", CreatedAt: time.Now()}
			dave := &store.Account{ID: "acct_dave", Name: "dave", CreatedAt: time.Now()}
			_, k := store.NewKey(carol.ID, store.KeyBuyer, "", time.Now())
			for _, a := range []*store.Account{carol, dave} {
				if err := st.CreateAccount(ctx, a); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.CreateKey(ctx, k); err != nil {
				t.Fatal(err)
			}
			st.Close()
			db := []string{"--db", dsn}
			if kind == "sqlite" {
				// SQLite is named by its directory; --db takes PostgreSQL URLs only.
				dir := filepath.Join(t.TempDir(), "data")
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(dsn, filepath.Join(dir, "coordinator.db")); err != nil {
					t.Fatal(err)
				}
				dsn = filepath.Join(dir, "coordinator.db")
				db = []string{"--data-dir", dir}
			}
			admin := func(args ...string) []string { return append(append([]string{"admin"}, args...), db...) }

			must(t, admin("credit", "carol", "4", "--ref", "c1")...)
			if code, _, errs := shareai(t, admin("credit", "carol", "4", "--ref", "c1")...); code != 0 || !strings.Contains(errs, "used already") {
				t.Errorf("credit retry = %d, %q", code, errs)
			}
			withStore := func(fn func(st *sqlstore.DB)) {
				st, err := sqlstore.Open(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				fn(st)
			}
			withStore(func(st *sqlstore.DB) {
				earn(t, st, "req_1", carol.ID, k.ID, dave.ID, 2*money.USD, usd("0.1"), time.Now().Add(-time.Minute))
				if _, err := st.ReleaseEarnings(ctx, time.Now()); err != nil {
					t.Fatal(err)
				}
			})
			if code, _, errs := shareai(t, admin("payout", "dave", "3")...); code != 1 || !strings.Contains(errs, "$2 available to pay out, less than $3") {
				t.Errorf("payout of too much = %d, %q", code, errs)
			}
			must(t, admin("payout", "dave", "all", "--ref", "p1")...)
			if code, _, errs := shareai(t, admin("payout", "dave", "2", "--ref", "p1")...); code != 0 || !strings.Contains(errs, "used already") {
				t.Errorf("payout retry = %d, %q", code, errs)
			}
			must(t, admin("cap", "carol", "--period", "daily", "--limit", "1")...)
			must(t, admin("cap", "--key", k.ID, "--period", "weekly", "--limit", "0.5")...)
			out := must(t, admin("accounts")...)
			for _, want := range []string{"carol acct_carol $1.9 $0 $2.1 $0 $0 $0", "dave acct_dave $0 $0 $0 $0 $0 $2"} {
				if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
					t.Errorf("accounts:\n%s\nwant a line %q", out, want)
				}
			}
			if out := must(t, append([]string{"provider", "earnings", "--account", "dave"}, db...)...); !strings.Contains(out, "$0 pending, $0 available, $2 paid out") {
				t.Errorf("provider earnings:\n%s", out)
			}
			withStore(func(st *sqlstore.DB) {
				sp, err := st.Spending(ctx, time.Now(), store.AccountScope(carol.ID), store.KeyScope(k.ID))
				if err != nil || len(sp) != 2 || sp[0].Limit != money.USD || sp[1].Limit != usd("0.5") || sp[1].Period != store.Weekly {
					t.Errorf("caps %+v, %v", sp, err)
				}
				if sum, err := st.LedgerSum(ctx); sum != 0 || err != nil {
					t.Errorf("ledger sum %d, %v", sum, err)
				}
			})
		})
	}
}

func TestAdmin_Help(t *testing.T) {
	for _, args := range [][]string{
		{"admin", "--help"}, {"admin", "credit", "--help"}, {"admin", "accounts", "--help"},
		{"admin", "payout", "--help"}, {"admin", "cap", "--help"}, {"provider", "earnings", "--help"},
	} {
		code, out, errs := shareai(t, args...)
		if help := out + errs; code != 0 || !strings.Contains(help, "Usage: shareai") && !strings.Contains(help, "shareai admin credit") {
			t.Errorf("shareai %s = %d, %q; want 0 and the usage", strings.Join(args, " "), code, help)
		}
	}
	if code, _, errs := shareai(t, "admin"); code != 2 || !strings.Contains(errs, "shareai admin payout") {
		t.Errorf("admin alone = %d, %q; want 2 and the usage", code, errs)
	}
}

// Nodes' levels, suspension with its clawback, and the audit log, on each kind of database.
func TestAdmin_Node(t *testing.T) {
	for _, kind := range sqlstoretest.Kinds() {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			dsn := sqlstoretest.DSN(t, kind)
			st, err := sqlstore.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			carol := &store.Account{ID: "acct_carol", Name: "carol", CreatedAt: time.Now()}
			dave := &store.Account{ID: "acct_dave", Name: "dave", CreatedAt: time.Now()}
			_, k := store.NewKey(carol.ID, store.KeyBuyer, "", time.Now())
			for _, a := range []*store.Account{carol, dave} {
				if err := st.CreateAccount(ctx, a); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.CreateKey(ctx, k); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"node_1", "node_2"} {
				n := &store.Node{ID: id, AccountID: dave.ID, PublicKey: []byte("pk-" + id), Name: "rig-" + id,
					Region: "eu", Engine: "ollama", Agent: "v1", FirstSeen: time.Now(), LastSeen: time.Now()}
				if err := st.UpsertNode(ctx, n); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Deposit(ctx, carol.ID, 10*money.USD, "d1", time.Now()); err != nil {
				t.Fatal(err)
			}
			// node_1 earns $2 (fee $0.1) pending and $1 (fee $0.05) released; node_2 $0.5 pending.
			earn(t, st, "req_1", carol.ID, k.ID, dave.ID, 2*money.USD, usd("0.1"), time.Now().Add(time.Hour))
			earn(t, st, "req_2", carol.ID, k.ID, dave.ID, money.USD, usd("0.05"), time.Now().Add(-time.Minute))
			if err := st.PlaceHold(ctx, &store.Hold{RequestID: "req_3", AccountID: carol.ID, KeyID: k.ID, Amount: usd("0.52"), CreatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			if errs := st.Settle(ctx, []*store.Settlement{{RequestID: "req_3", Debit: usd("0.52"), Fee: usd("0.02"), At: time.Now(),
				ReleaseAt: time.Now().Add(time.Hour), Parts: []store.Part{{NodeID: "node_2", ProviderID: dave.ID, Earned: usd("0.5")}}}}); errs[0] != nil {
				t.Fatal(errs[0])
			}
			if _, err := st.ReleaseEarnings(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
			st.Close()

			db := []string{"--db", dsn}
			if kind == "sqlite" {
				dir := filepath.Join(t.TempDir(), "data")
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(dsn, filepath.Join(dir, "coordinator.db")); err != nil {
					t.Fatal(err)
				}
				dsn = filepath.Join(dir, "coordinator.db")
				db = []string{"--data-dir", dir}
			}
			admin := func(args ...string) []string { return append(append([]string{"admin"}, args...), db...) }
			withStore := func(fn func(st *sqlstore.DB)) {
				t.Helper()
				st, err := sqlstore.Open(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				fn(st)
			}
			audit := func(target string) []store.AuditEntry {
				t.Helper()
				var es []store.AuditEntry
				withStore(func(st *sqlstore.DB) {
					if es, err = st.AuditLog(ctx, target, 100); err != nil {
						t.Fatal(err)
					}
				})
				return es
			}
			node := func(id string) *store.Node {
				t.Helper()
				var n *store.Node
				withStore(func(st *sqlstore.DB) {
					if n, err = st.Node(ctx, id); err != nil {
						t.Fatal(err)
					}
				})
				return n
			}

			t.Run("level", func(t *testing.T) {
				out := must(t, admin("node", "level", "node_1", "verified", "--reason", " passed onboarding ", "--actor", "ops")...)
				if want := "Node node_1 (rig-node_1): new → verified (passed onboarding).\n"; out != want {
					t.Errorf("node level: %q; want %q", out, want)
				}
				if n := node("node_1"); n.Level != store.LevelVerified || n.LevelReason != "passed onboarding" || time.Since(n.LevelChangedAt) > time.Minute {
					t.Errorf("node_1 after node level: %q, %q, %v", n.Level, n.LevelReason, n.LevelChangedAt)
				}
				es := audit("node_1")
				if len(es) != 1 || es[0].Actor != "admin:ops" || es[0].Action != "node.level" || es[0].Target != "node_1" ||
					es[0].Detail != "new → verified: passed onboarding" {
					t.Errorf("audit log %+v; want one node.level entry by admin:ops", es)
				}
				// The actor defaults to $USER, then to "admin".
				t.Setenv("USER", "tester")
				must(t, admin("node", "level", "node_2", "quarantined", "--reason", "flaky")...)
				t.Setenv("USER", "")
				must(t, admin("node", "level", "node_2", "new", "--reason", "fixed")...)
				es = audit("node_2")
				if len(es) != 2 || es[0].Actor != "admin:admin" || es[0].Detail != "quarantined → new: fixed" || es[1].Actor != "admin:tester" {
					t.Errorf("audit log of node_2 %+v; want admin:admin's change after admin:tester's", es)
				}

				for _, tt := range []struct {
					name     string
					args     []string
					code     int
					contains string
				}{
					{"no reason", []string{"node", "level", "node_1", "trusted"}, 2, "--reason is required"},
					{"blank reason", []string{"node", "level", "node_1", "trusted", "--reason", "  "}, 2, "--reason is required"},
					{"suspended", []string{"node", "level", "node_1", "suspended", "--reason", "x"}, 1, "shareai admin node suspend node_1"},
					{"unknown level", []string{"node", "level", "node_1", "admired", "--reason", "x"}, 1, "want one of new, verified, trusted, quarantined"},
					{"unknown node", []string{"node", "level", "node_x", "trusted", "--reason", "x"}, 1, `no node "node_x"`},
					{"no level", []string{"node", "level", "node_1", "--reason", "x"}, 2, "wrong number of arguments"},
					{"unknown verb", []string{"node", "promote", "node_1"}, 2, `unknown admin node command "promote"`},
					{"no verb", []string{"node"}, 2, "shareai admin node suspend"},
					{"suspend without a reason", []string{"node", "suspend", "node_1"}, 2, "--reason is required"},
					{"suspend an unknown node", []string{"node", "suspend", "node_x", "--reason", "x"}, 1, `no node "node_x"`},
				} {
					t.Run(tt.name, func(t *testing.T) {
						code, out, errs := shareai(t, admin(tt.args...)...)
						if code != tt.code || out != "" || !strings.Contains(errs, tt.contains) {
							t.Errorf("= %d, %q, %q; want %d, no output, and %q", code, out, errs, tt.code, tt.contains)
						}
					})
				}
				if n := node("node_1"); n.Level != store.LevelVerified {
					t.Errorf("node_1 after refused commands: %q", n.Level)
				}
				if es := audit(""); len(es) != 3 {
					t.Errorf("%d audit entries after refused commands; want still 3", len(es))
				}
			})

			t.Run("suspend", func(t *testing.T) {
				var before *store.Balance
				withStore(func(st *sqlstore.DB) { before = mustBalance(t, st, carol.ID) })
				out := must(t, admin("node", "suspend", "node_1", "--reason", "forged outputs", "--actor", "ops")...)
				if !strings.Contains(out, "Node node_1 (rig-node_1): verified → suspended (forged outputs).\n") ||
					!regexp.MustCompile(`Clawed back \$2\.1: .*\(ref suspend:node_1:\d+\)`).MatchString(out) {
					t.Errorf("node suspend: %q", out)
				}
				if n := node("node_1"); n.Level != store.LevelSuspended || n.LevelReason != "forged outputs" {
					t.Errorf("node_1 after suspend: %q, %q", n.Level, n.LevelReason)
				}
				withStore(func(st *sqlstore.DB) {
					// Carol gets back node_1's pending $2 and its fee $0.1; the released $1 and
					// node_2's pending $0.5 stay dave's.
					if b := mustBalance(t, st, carol.ID); b.Credits != before.Credits+usd("2.1") {
						t.Errorf("carol's credits $%s; want $%s + $2.1", b.Credits, before.Credits)
					}
					if b := mustBalance(t, st, dave.ID); b.Pending != usd("0.5") || b.Available != money.USD {
						t.Errorf("dave after the suspension %+v; want $0.5 pending (node_2), $1 available", b)
					}
					if sum, err := st.LedgerSum(ctx); sum != 0 || err != nil {
						t.Errorf("ledger sum %d, %v", sum, err)
					}
				})
				es := audit("node_1")
				if len(es) != 3 || es[0].Action != "clawback" || !regexp.MustCompile(`^\$2\.1 returned to buyers \(ref suspend:node_1:\d+\)$`).MatchString(es[0].Detail) ||
					es[1].Action != "node.suspend" || es[1].Detail != "verified → suspended: forged outputs" || es[0].Actor != "admin:ops" || es[1].Actor != "admin:ops" {
					t.Errorf("audit log of node_1 %+v; want clawback, then node.suspend, then node.level", es)
				}

				// Again: nothing left to claw back.
				out = must(t, admin("node", "suspend", "node_1", "--reason", "again")...)
				if !strings.Contains(out, "suspended → suspended (again)") || !strings.Contains(out, "Clawed back $0:") {
					t.Errorf("node suspend again: %q", out)
				}
				withStore(func(st *sqlstore.DB) {
					if b := mustBalance(t, st, carol.ID); b.Credits != before.Credits+usd("2.1") {
						t.Errorf("carol's credits after a second suspension $%s", b.Credits)
					}
				})
			})

			t.Run("audit", func(t *testing.T) {
				out := must(t, admin("audit")...)
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if len(lines) != 8 || strings.Join(strings.Fields(lines[0]), " ") != "ID TIME ACTOR ACTION TARGET DETAIL" {
					t.Fatalf("audit:\n%s\nwant a header and 7 entries", out)
				}
				row := regexp.MustCompile(`^(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(.*)$`)
				var actions []string
				for _, l := range lines[1:] {
					m := row.FindStringSubmatch(l)
					if m == nil {
						t.Fatalf("audit line %q", l)
					}
					if _, err := time.Parse(time.RFC3339, m[2]); err != nil {
						t.Errorf("time %q: %v", m[2], err)
					}
					actions = append(actions, m[4]+" "+m[5])
				}
				want := []string{"clawback node_1", "node.suspend node_1", "clawback node_1", "node.suspend node_1",
					"node.level node_2", "node.level node_2", "node.level node_1"}
				if !reflect.DeepEqual(actions, want) {
					t.Errorf("audit actions %v; want %v", actions, want)
				}
				if !strings.Contains(lines[2], "suspended → suspended: again") || !strings.Contains(lines[3], "admin:ops") {
					t.Errorf("audit lines %q, %q", lines[2], lines[3])
				}
				out = must(t, admin("audit", "--target", "node_2", "--limit", "1")...)
				if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.Contains(lines[1], "quarantined → new: fixed") {
					t.Errorf("audit --target node_2 --limit 1:\n%s", out)
				}
				if out := must(t, admin("audit", "--target", "node_x")...); out != "No audit entries about node_x.\n" {
					t.Errorf("audit of a target without entries: %q", out)
				}
				if code, _, errs := shareai(t, admin("audit", "--limit", "0")...); code != 1 || !strings.Contains(errs, "--limit") {
					t.Errorf("audit --limit 0 = %d, %q", code, errs)
				}
				if code, _, errs := shareai(t, admin("audit", "node_1")...); code != 2 || !strings.Contains(errs, "wrong number of arguments") {
					t.Errorf("audit with an argument = %d, %q", code, errs)
				}
			})
		})
	}
}

func TestAdmin_NodeHelp(t *testing.T) {
	for _, args := range [][]string{
		{"admin", "node", "level", "--help"}, {"admin", "node", "suspend", "--help"}, {"admin", "audit", "--help"},
	} {
		code, out, errs := shareai(t, args...)
		if help := out + errs; code != 0 || !strings.Contains(help, "Usage: shareai "+strings.Join(args[:len(args)-1], " ")) {
			t.Errorf("shareai %s = %d, %q; want 0 and the usage", strings.Join(args, " "), code, help)
		}
	}
	code, out, _ := shareai(t, "admin", "node", "--help")
	if code != 0 || !strings.Contains(out, "shareai admin node suspend NODE") {
		t.Errorf("admin node --help = %d, %q", code, out)
	}
	code, out, _ = shareai(t, "admin", "--help")
	if code != 0 || !strings.Contains(out, "shareai admin node level") || !strings.Contains(out, "within a minute") {
		t.Errorf("admin --help = %d, %q; want the node commands and when the coordinator sees them", code, out)
	}
}

// A database without any audit entry says so.
func TestAdmin_AuditEmpty(t *testing.T) {
	dir := t.TempDir()
	must(t, "keys", "create", "--data-dir", dir, "--account", "alice")
	if out := must(t, "admin", "audit", "--data-dir", dir); out != "No audit entries.\n" {
		t.Errorf("admin audit on a new network: %q", out)
	}
}

func TestKeys_RateLimits(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	code, out, errs := shareai(t, "keys", "create", "--data-dir", dir, "--account", "alice", "--rpm", "60", "--tpm", "90000", "--concurrent", "-1")
	if code != 0 || !strings.HasPrefix(out, "sk-") || !strings.Contains(errs, "60 requests per minute, 90000 tokens per minute, no limit of requests at once") {
		t.Fatalf("keys create --rpm --tpm --concurrent = %d, %q, %q", code, out, errs)
	}
	secret := strings.TrimSpace(out)
	key := func() *store.Key {
		var k *store.Key
		withStore(t, dir, func(st *sqlstore.DB) {
			var err error
			if k, err = st.KeyByHash(ctx, store.HashSecret(secret)); err != nil {
				t.Fatal(err)
			}
		})
		return k
	}
	k := key()
	if want := (store.RateLimits{RequestsPerMinute: 60, TokensPerMinute: 90000, Concurrent: -1}); k.Limits != want {
		t.Errorf("stored limits %+v, want %+v", k.Limits, want)
	}
	if out := must(t, "keys", "list", "--data-dir", dir); !strings.Contains(out, "60 rpm, 90000 tpm, any number at once") {
		t.Errorf("keys list:\n%s\nwant the key's rate limits", out)
	}
	// Flags before or after the key; a limit not given goes back to the default.
	out = must(t, "keys", "limits", "--data-dir", dir, k.Prefix, "--concurrent", "2")
	if !strings.Contains(out, "the coordinator's default requests per minute, the coordinator's default tokens per minute, 2 requests at once") {
		t.Errorf("keys limits: %q", out)
	}
	if got := key().Limits; got != (store.RateLimits{Concurrent: 2}) {
		t.Errorf("limits after keys limits: %+v, want only 2 at once", got)
	}
	must(t, "keys", "limits", "--data-dir", dir, "--rpm", "5", k.ID)
	if got := key().Limits; got != (store.RateLimits{RequestsPerMinute: 5}) {
		t.Errorf("limits after keys limits --rpm 5: %+v", got)
	}
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"below -1", []string{"create", "--rpm", "-2"}, 1, "--rpm"},
		{"provider token", []string{"create", "--provider", "--tpm", "5"}, 1, "provider token"},
		{"no key", []string{"limits", "--rpm", "5"}, 2, "one key id or prefix"},
		{"two keys", []string{"limits", k.ID, k.ID}, 2, "one key id or prefix"},
		{"unknown key", []string{"limits", "key_nope"}, 1, "not found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := shareai(t, append(append([]string{"keys"}, tt.args...), "--data-dir", dir)...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Errorf("= %d, %q; want %d and %q", code, errs, tt.code, tt.want)
			}
		})
	}
}

// An API key's default service tier: set at creation by OpenAI's name, stored by ShareAI's,
// listed, and changed with 'keys tier'.
func TestKeys_ServiceTier(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	code, out, errs := shareai(t, "keys", "create", "--data-dir", dir, "--account", "alice", "--service-tier", "flex")
	if code != 0 || !strings.Contains(errs, "flex (bronze)") {
		t.Fatalf("keys create --service-tier flex = %d, %q, %q", code, out, errs)
	}
	secret := strings.TrimSpace(out)
	key := func() *store.Key {
		var k *store.Key
		withStore(t, dir, func(st *sqlstore.DB) {
			var err error
			if k, err = st.KeyByHash(ctx, store.HashSecret(secret)); err != nil {
				t.Fatal(err)
			}
		})
		return k
	}
	k := key()
	if k.ServiceTier != "bronze" {
		t.Errorf("stored tier %q, want bronze", k.ServiceTier)
	}
	if out := must(t, "keys", "list", "--data-dir", dir); !strings.Contains(out, "TIER") || !strings.Contains(out, "flex (bronze)") {
		t.Errorf("keys list:\n%s\nwant the key's tier", out)
	}
	if out := must(t, "keys", "tier", "--data-dir", dir, k.Prefix, "priority"); !strings.Contains(out, "priority (gold)") {
		t.Errorf("keys tier priority: %q", out)
	}
	if got := key().ServiceTier; got != "gold" {
		t.Errorf("tier after keys tier priority: %q, want gold", got)
	}
	must(t, "keys", "tier", k.ID, "default", "--data-dir", dir)
	if got := key().ServiceTier; got != "silver" {
		t.Errorf("tier after keys tier default: %q, want silver", got)
	}
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown tier", []string{"create", "--service-tier", "scale"}, 1, "unknown service tier"},
		{"provider token", []string{"create", "--provider", "--service-tier", "flex"}, 1, "provider token"},
		{"no tier", []string{"tier", k.ID}, 2, "a tier"},
		{"unknown tier of a key", []string{"tier", k.ID, "turbo"}, 1, "unknown service tier"},
		{"the tier before the key", []string{"tier", "flex", k.ID}, 1, "unknown service tier"},
		{"unknown key", []string{"tier", "key_nope", "flex"}, 1, "not found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := shareai(t, append(append([]string{"keys"}, tt.args...), "--data-dir", dir)...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Errorf("= %d, %q; want %d and %q", code, errs, tt.code, tt.want)
			}
		})
	}
}

// keys create --split stores an API key's default model roulette, compact; a bad one, or one
// outside --models, creates no key.
func TestKeys_Split(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := shareai(t, "keys", "create", "--data-dir", dir, "--account", "alice", "--models", "llama,qwen", "--split", `{ "qwen": 0.2 }`)
	if code != 0 || !strings.Contains(errs, `split as {"qwen":0.2}`) {
		t.Fatalf("keys create --split = %d, %q, %q", code, out, errs)
	}
	withStore(t, dir, func(st *sqlstore.DB) {
		k, err := st.KeyByHash(context.Background(), store.HashSecret(strings.TrimSpace(out)))
		if err != nil {
			t.Fatal(err)
		}
		if string(k.Split) != `{"qwen":0.2}` {
			t.Errorf("stored split %q", k.Split)
		}
	})
	for _, tt := range []struct{ name, models, split, want string }{
		{"bad weight", "", `{"qwen":1.5}`, "greater than 0 and at most 1"},
		{"outside the models", "llama", `{"qwen":0.5}`, "not among the key's models"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := shareai(t, "keys", "create", "--data-dir", dir, "--models", tt.models, "--split", tt.split)
			if code != 1 || !strings.Contains(errs, tt.want) {
				t.Errorf("= %d, %q; want 1 and %q", code, errs, tt.want)
			}
		})
	}
}
