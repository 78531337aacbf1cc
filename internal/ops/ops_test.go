package ops_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/ops"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
	"github.com/shareai/shareai/internal/store/sqlstore/sqlstoretest"
)

// fakeFleet is the live fleet: the levels given to the connected nodes.
type fakeFleet struct {
	connected map[string]bool
	applied   map[string]string
}

func (f *fakeFleet) ApplyLevel(nodeID, level string) bool {
	if !f.connected[nodeID] {
		return false
	}
	f.applied[nodeID] = level
	return true
}

// seed makes a buyer (carol, $10) and a provider (dave) whose node node_1 has $2 of earnings
// pending, paid by carol with a $0.10 fee.
func seed(t *testing.T, st *sqlstore.DB) {
	t.Helper()
	ctx, now := context.Background(), time.Now()
	for _, a := range []*store.Account{{ID: "acct_carol", Name: "carol", CreatedAt: now}, {ID: "acct_dave", Name: "dave", CreatedAt: now}} {
		if err := st.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	_, k := store.NewKey("acct_carol", store.KeyBuyer, "", now)
	if err := st.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertNode(ctx, &store.Node{ID: "node_1", AccountID: "acct_dave", PublicKey: []byte("pk"), Name: "rig",
		FirstSeen: now, LastSeen: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.Deposit(ctx, "acct_carol", 10*money.USD, "d1", now); err != nil {
		t.Fatal(err)
	}
	fee := money.USD / 10
	if err := st.PlaceHold(ctx, &store.Hold{RequestID: "req_1", AccountID: "acct_carol", KeyID: k.ID, Amount: 2*money.USD + fee, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if errs := st.Settle(ctx, []*store.Settlement{{RequestID: "req_1", Debit: 2*money.USD + fee, Fee: fee, At: now,
		ReleaseAt: now.Add(time.Hour), Parts: []store.Part{{NodeID: "node_1", ProviderID: "acct_dave", Earned: 2 * money.USD}}}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
}

// records are what a node operation leaves in the store, as compared between callers.
type records struct {
	Level, Reason string
	Audit         []store.AuditEntry // without ids
	Balance       money.Nanos        // carol's
	Pending       money.Nanos        // node_1's
}

func recordsOf(t *testing.T, st *sqlstore.DB) records {
	t.Helper()
	ctx := context.Background()
	n, err := st.Node(ctx, "node_1")
	if err != nil {
		t.Fatal(err)
	}
	es, err := st.AuditLog(ctx, "node_1", 10)
	if err != nil {
		t.Fatal(err)
	}
	for i := range es {
		es[i].ID = 0
	}
	b, err := st.Balance(ctx, "acct_carol")
	if err != nil {
		t.Fatal(err)
	}
	earned, err := st.Earnings(ctx, "acct_dave", time.Now().AddDate(0, 0, -1))
	if err != nil {
		t.Fatal(err)
	}
	rec := records{Level: n.Level, Reason: n.LevelReason, Audit: es, Balance: b.Credits}
	for _, e := range earned {
		rec.Pending += e.Pending
	}
	return rec
}

// The console (with its fleet) and cmd/shareai (with none) suspending a node leave the same
// records: the level, the audit entries, the clawback; only the console's connected node has its
// level at once.
func TestSuspendNode(t *testing.T) {
	ctx := context.Background()
	at := time.UnixMilli(1_700_000_000_000).UTC()
	for _, kind := range sqlstoretest.Kinds() {
		t.Run(kind, func(t *testing.T) {
			var got []records
			for _, withFleet := range []bool{true, false} {
				st := sqlstoretest.Open(t, kind)
				seed(t, st)
				var fl ops.Fleet
				live := &fakeFleet{connected: map[string]bool{"node_1": true}, applied: map[string]string{}}
				if withFleet {
					fl = live
				}
				res, err := ops.SuspendNode(ctx, st, fl, ops.Decision{NodeID: "node_1", Reason: " forged outputs ", Actor: "admin:ops", At: at})
				if err != nil {
					t.Fatal(err)
				}
				if res.From != store.LevelNew || res.To != store.LevelSuspended || res.ClawedBack != 2*money.USD+money.USD/10 ||
					res.Ref != "suspend:node_1:1700000000000" || res.Live != withFleet || res.Node.Name != "rig" {
					t.Errorf("fleet %v: result %+v", withFleet, res)
				}
				if withFleet && live.applied["node_1"] != store.LevelSuspended {
					t.Errorf("the live node's level is %q, want suspended", live.applied["node_1"])
				}
				got = append(got, recordsOf(t, st))
			}
			want := records{Level: store.LevelSuspended, Reason: "forged outputs", Balance: 10 * money.USD, Audit: []store.AuditEntry{
				{At: at, Actor: "admin:ops", Action: ops.ActionClawBack, Target: "node_1", Detail: "$2.1 returned to buyers (ref suspend:node_1:1700000000000)"},
				{At: at, Actor: "admin:ops", Action: ops.ActionSuspend, Target: "node_1", Detail: "new → suspended: forged outputs"},
			}}
			for i, g := range got {
				if g.Level != want.Level || g.Reason != want.Reason || g.Balance != want.Balance || g.Pending != 0 || !slices.Equal(g.Audit, want.Audit) {
					t.Errorf("caller %d: records %+v, want %+v", i, g, want)
				}
			}
		})
	}
}

func TestSetNodeLevel(t *testing.T) {
	ctx := context.Background()
	at := time.UnixMilli(1_700_000_000_000).UTC()
	for _, kind := range sqlstoretest.Kinds() {
		t.Run(kind, func(t *testing.T) {
			st := sqlstoretest.Open(t, kind)
			seed(t, st)
			res, err := ops.SetNodeLevel(ctx, st, nil, store.LevelVerified, ops.Decision{NodeID: "node_1", Reason: "passed", Actor: "admin:ops", At: at})
			if err != nil {
				t.Fatal(err)
			}
			if res.From != store.LevelNew || res.To != store.LevelVerified || res.ClawedBack != 0 || res.Ref != "" || res.Live {
				t.Errorf("result %+v", res)
			}
			got := recordsOf(t, st)
			want := []store.AuditEntry{{At: at, Actor: "admin:ops", Action: ops.ActionLevel, Target: "node_1", Detail: "new → verified: passed"}}
			if got.Level != store.LevelVerified || got.Pending != 2*money.USD || !slices.Equal(got.Audit, want) {
				t.Errorf("records %+v; want verified, $2 pending, audit %+v", got, want)
			}
			for _, tt := range []struct {
				name  string
				level string
				d     ops.Decision
				want  error
			}{
				{"suspended", store.LevelSuspended, ops.Decision{NodeID: "node_1", Reason: "x", At: at}, ops.ErrLevel},
				{"unknown level", "admired", ops.Decision{NodeID: "node_1", Reason: "x", At: at}, ops.ErrLevel},
				{"no reason", store.LevelTrusted, ops.Decision{NodeID: "node_1", Reason: "  ", At: at}, ops.ErrNoReason},
				{"unknown node", store.LevelTrusted, ops.Decision{NodeID: "node_x", Reason: "x", At: at}, store.ErrNotFound},
			} {
				t.Run(tt.name, func(t *testing.T) {
					if _, err := ops.SetNodeLevel(ctx, st, nil, tt.level, tt.d); !errors.Is(err, tt.want) {
						t.Errorf("got %v, want %v", err, tt.want)
					}
				})
			}
		})
	}
}

// A suspension that fails part-way, here while its audit entries are recorded, leaves nothing
// written: not the level, not the clawback, not its ref; run again, it does it all.
func TestChangeNodeLevel_OneTransaction(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000).UTC()
	for _, kind := range sqlstoretest.Kinds() {
		t.Run(kind, func(t *testing.T) {
			st := sqlstoretest.Open(t, kind)
			seed(t, st)
			before := recordsOf(t, st)
			ctx, cancel := context.WithCancel(context.Background())
			_, _, err := st.ChangeNodeLevel(ctx, store.LevelChange{NodeID: "node_1", Level: store.LevelSuspended, Reason: "x", At: at,
				ClawBackRef: "r1", Audit: func(string, money.Nanos) []store.AuditEntry {
					cancel() // the level is set and the earnings clawed back, in the transaction
					return []store.AuditEntry{{At: at, Actor: "admin:ops", Action: ops.ActionSuspend, Target: "node_1"}}
				}})
			if err == nil {
				t.Fatal("ChangeNodeLevel with its context cancelled part-way: no error")
			}
			if after := recordsOf(t, st); after.Level != before.Level || after.Pending != before.Pending ||
				after.Balance != before.Balance || len(after.Audit) != 0 {
				t.Errorf("after a failed change: %+v, want as before: %+v", after, before)
			}
			from, clawed, err := st.ChangeNodeLevel(context.Background(), store.LevelChange{NodeID: "node_1", Level: store.LevelSuspended,
				Reason: "x", At: at, ClawBackRef: "r1"})
			if err != nil || from != store.LevelNew || clawed != 2*money.USD+money.USD/10 {
				t.Errorf("again: %q, %s, %v; want new, $2.1 clawed back", from, clawed, err)
			}
			// A ref used already claws back nothing, and the change is still made.
			if _, clawed, err := st.ChangeNodeLevel(context.Background(), store.LevelChange{NodeID: "node_1", Level: store.LevelSuspended,
				Reason: "y", At: at, ClawBackRef: "r1"}); err != nil || clawed != 0 {
				t.Errorf("with a used ref: %s, %v; want 0", clawed, err)
			}
		})
	}
}

// Creating a key stores it with all its rules and its cap, the same from either caller; a
// creation that fails leaves no cap behind.
func TestCreateKey(t *testing.T) {
	ctx := context.Background()
	at := time.UnixMilli(1_700_000_000_000).UTC()
	for _, kind := range sqlstoretest.Kinds() {
		t.Run(kind, func(t *testing.T) {
			st := sqlstoretest.Open(t, kind)
			seed(t, st)
			secret, k, err := ops.CreateKey(ctx, st, ops.NewKey{AccountID: "acct_carol", Kind: store.KeyBuyer, Name: " ci ",
				Models: []string{" llama3 ", "", "qwen"}, Routing: []byte(`{ "sort": "price" }`), Split: []byte(` {"qwen": 0.25} `),
				Limits:      store.RateLimits{RequestsPerMinute: 5, TokensPerMinute: -1},
				ServiceTier: "priority", Cap: &store.Cap{Period: store.Daily, Limit: money.USD}, At: at})
			if err != nil {
				t.Fatal(err)
			}
			got, err := st.KeyByHash(ctx, store.HashSecret(secret))
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != k.ID || got.Name != "ci" || !slices.Equal(got.Models, []string{"llama3", "qwen"}) || string(got.Routing) != `{"sort":"price"}` || string(got.Split) != `{"qwen":0.25}` ||
				got.Limits != (store.RateLimits{RequestsPerMinute: 5, TokensPerMinute: -1}) || got.ServiceTier != "gold" || !got.CreatedAt.Equal(at) {
				t.Errorf("stored key %+v", got)
			}
			sp, err := st.Spending(ctx, time.Now(), store.KeyScope(k.ID))
			if err != nil {
				t.Fatal(err)
			}
			if len(sp) != 1 || sp[0].Period != store.Daily || sp[0].Limit != money.USD {
				t.Errorf("the key's caps: %+v, want $1 a day", sp)
			}

			// A provider token: no rules, its account marked a provider.
			_, pk, err := ops.CreateKey(ctx, st, ops.NewKey{AccountID: "acct_dave", Kind: store.KeyProvider, Name: "rigs", At: at})
			if err != nil || pk.ServiceTier != "" || pk.Kind != store.KeyProvider {
				t.Errorf("provider token %+v, %v", pk, err)
			}
			for _, tt := range []struct {
				name string
				nk   ops.NewKey
			}{
				{"provider token with limits", ops.NewKey{AccountID: "acct_dave", Kind: store.KeyProvider, Limits: store.RateLimits{Concurrent: 1}, At: at}},
				{"provider token with a cap", ops.NewKey{AccountID: "acct_dave", Kind: store.KeyProvider, Cap: &store.Cap{Period: store.Daily, Limit: 1}, At: at}},
				{"rate limit below -1", ops.NewKey{AccountID: "acct_carol", Kind: store.KeyBuyer, Limits: store.RateLimits{RequestsPerMinute: -2}, At: at}},
				{"bad routing", ops.NewKey{AccountID: "acct_carol", Kind: store.KeyBuyer, Routing: []byte(`{"sort":"vibes"}`), At: at}},
				{"bad split", ops.NewKey{AccountID: "acct_carol", Kind: store.KeyBuyer, Split: []byte(`{"qwen":2}`), At: at}},
				{"split outside the models", ops.NewKey{AccountID: "acct_carol", Kind: store.KeyBuyer, Models: []string{"llama3"}, Split: []byte(`{"qwen":0.5}`), At: at}},
				{"provider token with a split", ops.NewKey{AccountID: "acct_dave", Kind: store.KeyProvider, Split: []byte(`{"qwen":0.5}`), At: at}},
				{"bad tier", ops.NewKey{AccountID: "acct_carol", Kind: store.KeyBuyer, ServiceTier: "platinum", At: at}},
				{"bad cap", ops.NewKey{AccountID: "acct_carol", Kind: store.KeyBuyer, Cap: &store.Cap{Period: "hourly", Limit: 1}, At: at}},
				{"no time", ops.NewKey{AccountID: "acct_carol", Kind: store.KeyBuyer}},
			} {
				t.Run(tt.name, func(t *testing.T) {
					if _, _, err := ops.CreateKey(ctx, st, tt.nk); !errors.Is(err, ops.ErrKey) {
						t.Errorf("got %v, want ErrKey", err)
					}
				})
			}

			// The key's insert fails (its hash is taken): its cap is not set either.
			dup := &store.Key{ID: "key_dup", AccountID: "acct_carol", Kind: store.KeyBuyer, Hash: got.Hash, Prefix: "sk-dup", CreatedAt: at}
			err = st.CreateKeyWithCaps(ctx, dup, []store.Cap{{Scope: store.KeyScope(dup.ID), Period: store.Monthly, Limit: money.USD}})
			if !errors.Is(err, store.ErrConflict) {
				t.Errorf("a key of a taken hash: %v, want ErrConflict", err)
			}
			if sp, err := st.Spending(ctx, time.Now(), store.KeyScope(dup.ID)); err != nil || len(sp) != 0 {
				t.Errorf("the failed key's caps: %+v, %v; want none", sp, err)
			}
		})
	}
}
