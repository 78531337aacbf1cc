package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
)

func trustNode(id, account string) *store.Node {
	return &store.Node{ID: id, AccountID: account, PublicKey: []byte("pk-" + id), Name: id,
		Region: "eu", Engine: "ollama", Agent: "v1", FirstSeen: t0, LastSeen: t0}
}

func mustGetNode(t *testing.T, db store.Store, id string) *store.Node {
	t.Helper()
	n, err := db.Node(context.Background(), id)
	if err != nil {
		t.Fatalf("Node(%s): %v", id, err)
	}
	return n
}

func TestDB_SetNodeLevel(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		mustNode(t, db, trustNode("node_1", "acct_1"))
		mustNode(t, db, trustNode("node_2", "acct_1"))

		n := mustGetNode(t, db, "node_1")
		if n.Level != store.LevelNew || n.LevelReason != "" || !n.LevelChangedAt.IsZero() || n.Score != 0 {
			t.Fatalf("a new node: level %q (%q, %v), score %v; want new, no reason, zero time, 0",
				n.Level, n.LevelReason, n.LevelChangedAt, n.Score)
		}

		tests := []struct {
			name, node, level, reason string
			at                        time.Time
			wantErr                   error
		}{
			{"verified", "node_1", store.LevelVerified, "passed onboarding", at(time.Minute), nil},
			{"quarantined", "node_1", store.LevelQuarantined, "3 probes failed", at(time.Hour), nil},
			{"the same level again records the new reason", "node_1", store.LevelQuarantined, "still failing", at(2 * time.Hour), nil},
			{"unknown node", "node_x", store.LevelTrusted, "no such node", at(3 * time.Hour), store.ErrNotFound},
			{"unknown level", "node_1", "admired", "nice", at(3 * time.Hour), errAny},
			{"suspended", "node_2", store.LevelSuspended, "cheated", at(4 * time.Hour), nil},
		}
		want := map[string]*store.Node{"node_1": n, "node_2": mustGetNode(t, db, "node_2")}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := db.SetNodeLevel(ctx, tt.node, tt.level, tt.reason, tt.at)
				checkAnyErr(t, err, tt.wantErr)
				if err == nil {
					w := want[tt.node]
					w.Level, w.LevelReason, w.LevelChangedAt = tt.level, tt.reason, tt.at
				}
				for id, w := range want {
					if got := mustGetNode(t, db, id); !reflect.DeepEqual(got, w) {
						t.Errorf("Node(%s) = %+v\nwant %+v", id, got, w)
					}
				}
			})
		}

		// Registering again, whatever the agent says, leaves the level alone; NodesOf reads it.
		again := trustNode("node_1", "acct_1")
		again.Level, again.LevelReason, again.Score, again.LastSeen = store.LevelTrusted, "say I'm trusted", 1, at(5*time.Hour)
		mustNode(t, db, again)
		ns, err := db.NodesOf(ctx, "acct_1")
		if err != nil || len(ns) != 2 {
			t.Fatalf("NodesOf = %v, %v", ns, err)
		}
		if got := ns[0]; got.ID != "node_1" || got.Level != store.LevelQuarantined || got.LevelReason != "still failing" ||
			!got.LevelChangedAt.Equal(at(2*time.Hour)) || got.Score != 0 || !got.LastSeen.Equal(at(5*time.Hour)) {
			t.Errorf("NodesOf[0] after registering again = %+v; want quarantined, still failing, since t0+2h, score 0, seen t0+5h", got)
		}
		if got := ns[1]; got.ID != "node_2" || got.Level != store.LevelSuspended || got.LevelReason != "cheated" {
			t.Errorf("NodesOf[1] = %+v; want node_2 suspended", got)
		}
	})
}

func TestDB_SetNodeScores(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		// 70 nodes: chunks of 64, 4, 1 and 1.
		scores := map[string]float64{"node_unknown": 0.5}
		for i := range 70 {
			id := fmt.Sprintf("node_%02d", i)
			mustNode(t, db, trustNode(id, "acct_1"))
			scores[id] = float64(i) / 69
		}
		mustNode(t, db, trustNode("node_never", "acct_1"))
		if err := db.SetNodeScores(ctx, nil, t0); err != nil {
			t.Fatalf("SetNodeScores(nil): %v", err)
		}
		if err := db.SetNodeScores(ctx, scores, at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		check := func(want map[string]float64) {
			t.Helper()
			ns, err := db.NodesOf(ctx, "acct_1")
			if err != nil {
				t.Fatal(err)
			}
			if len(ns) != 71 {
				t.Fatalf("%d nodes; want 71", len(ns))
			}
			for _, n := range ns {
				if n.Score != want[n.ID] {
					t.Errorf("score of %s = %v; want %v", n.ID, n.Score, want[n.ID])
				}
				if n.Level != store.LevelNew {
					t.Errorf("level of %s = %q; want new: scores leave levels alone", n.ID, n.Level)
				}
			}
		}
		want := map[string]float64{}
		for id, s := range scores {
			want[id] = s
		}
		delete(want, "node_unknown")
		check(want) // node_never reads 0
		if _, err := db.Node(ctx, "node_unknown"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("an unknown node's score made it a node: %v", err)
		}

		// A later computation updates some; the others keep theirs.
		if err := db.SetNodeScores(ctx, map[string]float64{"node_00": 1, "node_69": 0, "node_never": 0.25}, at(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		want["node_00"], want["node_69"], want["node_never"] = 1, 0, 0.25
		check(want)

		// Out of range: an error, nothing recorded.
		for _, bad := range []float64{-0.01, 1.01, math.NaN(), math.Inf(1)} {
			if err := db.SetNodeScores(ctx, map[string]float64{"node_01": 0.5, "node_02": bad}, at(3*time.Minute)); err == nil {
				t.Errorf("SetNodeScores(%v): got no error, want one", bad)
			}
		}
		check(want)
	})
}

func TestDB_NodeChecks(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		check := func(node string, at time.Time, kind string, passed bool, detail string) store.NodeCheck {
			return store.NodeCheck{NodeID: node, At: at, Kind: kind, Model: "llama3", Passed: passed, Detail: detail}
		}
		if err := db.AddNodeChecks(ctx, nil); err != nil {
			t.Fatalf("AddNodeChecks(nil): %v", err)
		}
		first := []store.NodeCheck{
			check("node_1", at(time.Minute), store.CheckOnboarding, true, "a"),
			check("node_1", at(time.Minute), store.CheckOnboarding, false, "b"), // same time, recorded later
			check("node_2", at(time.Hour), store.CheckProbe, true, "other node"),
			check("node_1", t0, store.CheckOnboarding, true, "oldest"),
		}
		if err := db.AddNodeChecks(ctx, first); err != nil {
			t.Fatal(err)
		}
		if err := db.AddNodeChecks(ctx, []store.NodeCheck{
			check("node_1", at(2*time.Minute), store.CheckProbe, false, "newest: similarity 0.12 < 0.8"),
			check("node_1", at(time.Minute), store.CheckProbe, true, "c"), // same time, recorded last
		}); err != nil {
			t.Fatal(err)
		}
		details := func(cs []store.NodeCheck) []string {
			var out []string
			for _, c := range cs {
				out = append(out, c.Detail)
			}
			return out
		}
		tests := []struct {
			name  string
			node  string
			limit int
			want  []string
		}{
			{"all, newest first", "node_1", 10, []string{"newest: similarity 0.12 < 0.8", "c", "b", "a", "oldest"}},
			{"limit", "node_1", 2, []string{"newest: similarity 0.12 < 0.8", "c"}},
			{"another node", "node_2", 10, []string{"other node"}},
			{"unknown node", "node_x", 10, nil},
			{"limit 0", "node_1", 0, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.NodeChecks(ctx, tt.node, tt.limit)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(details(got), tt.want) {
					t.Errorf("NodeChecks(%s, %d) = %v; want %v", tt.node, tt.limit, details(got), tt.want)
				}
			})
		}
		// Every field round-trips.
		got, err := db.NodeChecks(ctx, "node_1", 3)
		if err != nil {
			t.Fatal(err)
		}
		want := []store.NodeCheck{
			check("node_1", at(2*time.Minute), store.CheckProbe, false, "newest: similarity 0.12 < 0.8"),
			check("node_1", at(time.Minute), store.CheckProbe, true, "c"),
			first[1],
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("NodeChecks = %+v\nwant %+v", got, want)
		}

		// Many in one call: chunks of 64, 16 and 4.
		var many []store.NodeCheck
		for i := range 84 {
			many = append(many, check("node_3", at(time.Duration(i)*time.Second), store.CheckProbe, i%2 == 0, fmt.Sprint(i)))
		}
		if err := db.AddNodeChecks(ctx, many); err != nil {
			t.Fatal(err)
		}
		got, err = db.NodeChecks(ctx, "node_3", 100)
		if err != nil || len(got) != 84 || got[0].Detail != "83" || got[83].Detail != "0" || !got[83].Passed || got[0].Passed {
			t.Errorf("84 checks read back as %d, %v", len(got), err)
		}
	})
}

func TestDB_AuditLog(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		add := func(at time.Time, action, target, detail string) *store.AuditEntry {
			t.Helper()
			e := &store.AuditEntry{At: at, Actor: "admin:ops", Action: action, Target: target, Detail: detail}
			if err := db.AddAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
			return e
		}
		e1 := add(t0, "node.level", "node_1", "new → verified")
		e2 := add(at(time.Hour), "node.suspend", "node_1", "cheated")
		e3 := add(at(time.Hour), "clawback", "node_1", "$1.5") // same time, recorded later
		e4 := add(at(time.Minute), "node.level", "node_2", "new → quarantined")
		if e1.ID == 0 || e2.ID <= e1.ID || e3.ID <= e2.ID || e4.ID <= e3.ID {
			t.Fatalf("ids %d, %d, %d, %d; want increasing", e1.ID, e2.ID, e3.ID, e4.ID)
		}
		auto := &store.AuditEntry{Actor: "coordinator", Action: "node.level", Target: "node_3"}
		if err := db.AddAudit(ctx, auto); err != nil || auto.At.IsZero() {
			t.Fatalf("AddAudit without a time: %v, at %v; want the time now", err, auto.At)
		}
		tests := []struct {
			name   string
			target string
			limit  int
			want   []*store.AuditEntry
		}{
			{"one target, newest first", "node_1", 10, []*store.AuditEntry{e3, e2, e1}},
			{"limit", "node_1", 2, []*store.AuditEntry{e3, e2}},
			{"another target", "node_2", 10, []*store.AuditEntry{e4}},
			{"all targets", "", 4, []*store.AuditEntry{auto, e3, e2, e4}},
			{"unknown target", "node_x", 10, nil},
			{"limit 0", "", 0, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.AuditLog(ctx, tt.target, tt.limit)
				if err != nil {
					t.Fatal(err)
				}
				var want []store.AuditEntry
				for _, e := range tt.want {
					w := *e
					w.At = time.UnixMilli(w.At.UnixMilli()).UTC()
					want = append(want, w)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("AuditLog(%q, %d) = %+v\nwant %+v", tt.target, tt.limit, got, want)
				}
			})
		}
	})
}

// bill settles a request of a buyer: each part earns a node of a provider; the buyer pays the
// parts plus fee, less subsidy.
type bill struct {
	id, buyer    string
	fee, subsidy money.Nanos
	release      time.Time
	parts        []store.Part
}

func mustSettle(t *testing.T, db store.Store, b bill) {
	t.Helper()
	ctx := context.Background()
	var earned money.Nanos
	for _, p := range b.parts {
		earned += p.Earned
	}
	debit := earned + b.fee - b.subsidy
	if err := db.PlaceHold(ctx, &store.Hold{RequestID: b.id, AccountID: b.buyer, KeyID: "key_" + b.buyer, Amount: debit, CreatedAt: t0}); err != nil {
		t.Fatalf("hold %s: %v", b.id, err)
	}
	s := &store.Settlement{RequestID: b.id, Debit: debit, Fee: b.fee, Subsidy: b.subsidy, Parts: b.parts, ReleaseAt: b.release, At: t0}
	if errs := db.Settle(ctx, []*store.Settlement{s}); errs[0] != nil {
		t.Fatalf("settle %s: %v", b.id, errs[0])
	}
}

func mustLedgerSum0(t *testing.T, db store.Store) {
	t.Helper()
	if sum, err := db.LedgerSum(context.Background()); sum != 0 || err != nil {
		t.Fatalf("ledger sum %d, %v; want 0", sum, err)
	}
}

func mustBalance(t *testing.T, db store.Store, account string) *store.Balance {
	t.Helper()
	b, err := db.Balance(context.Background(), account)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDB_FundFromFees(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		if err := db.FundFromFees(ctx, "acct_platform", 1, "f0", t0); !errors.Is(err, store.ErrInsufficient) {
			t.Errorf("FundFromFees with no fees account: %v; want %v", err, store.ErrInsufficient)
		}
		if err := db.Deposit(ctx, "acct_b", 10_000, "d1", t0); err != nil {
			t.Fatal(err)
		}
		mustSettle(t, db, bill{id: "req_1", buyer: "acct_b", fee: 300, parts: []store.Part{{NodeID: "node_1", ProviderID: "acct_p", Earned: 1000}}})
		tests := []struct {
			name    string
			amount  money.Nanos
			ref     string
			wantErr error
			fees    money.Nanos // after
			funded  money.Nanos
		}{
			{"part of the fees", 100, "f1", nil, 200, 100},
			{"the same ref again", 50, "f1", store.ErrConflict, 200, 100},
			{"more than the fees", 201, "f2", store.ErrInsufficient, 200, 100},
			{"zero", 0, "f3", errAny, 200, 100},
			{"negative", -5, "f4", errAny, 200, 100},
			{"all the rest", 200, "f2", nil, 0, 300},
			{"nothing left", 1, "f5", store.ErrInsufficient, 0, 300},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				checkAnyErr(t, db.FundFromFees(ctx, "acct_platform", tt.amount, tt.ref, at(time.Minute)), tt.wantErr)
				if b := mustBalance(t, db, "acct_platform"); b.Credits != tt.funded {
					t.Errorf("platform credits $%s; want $%s", b.Credits, tt.funded)
				}
				if b := mustBalance(t, db, "acct_b"); b.Credits != 10_000-1300 {
					t.Errorf("the buyer's credits $%s; want unchanged", b.Credits)
				}
				mustLedgerSum0(t, db)
			})
		}
		// The fees account's balance, through what is left to fund.
		if err := db.FundFromFees(ctx, "acct_other", 1, "f6", at(time.Hour)); !errors.Is(err, store.ErrInsufficient) {
			t.Errorf("fees left after funding them all: %v", err)
		}
		// The funded account can pay for requests.
		mustSettle(t, db, bill{id: "probe_1", buyer: "acct_platform", parts: []store.Part{{NodeID: "node_1", ProviderID: "acct_p", Earned: 300}}})
		if b := mustBalance(t, db, "acct_platform"); b.Credits != 0 || b.Spent != 300 {
			t.Errorf("platform after a probe %+v; want $0, spent 300", b)
		}
		mustLedgerSum0(t, db)
	})
}

func TestDB_ClawBack(t *testing.T) {
	sqlstore.ForEachKind(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		db, dsn := sqlstore.OpenTestDB(t, kind)
		raw := rawDB(t, kind, dsn)
		for _, a := range []string{"acct_a", "acct_b"} {
			if err := db.Deposit(ctx, a, 100_000, "d-"+a, t0); err != nil {
				t.Fatal(err)
			}
		}
		later, past := at(24*time.Hour), at(-time.Hour)
		part := func(node, provider string, earned money.Nanos) store.Part {
			return store.Part{NodeID: node, ProviderID: provider, Earned: earned}
		}
		// node_1 (of acct_p) cheats. node_2 is acct_p's other node, node_3 another provider's.
		for _, b := range []bill{
			// Refunds of node_1's parts, with the fee's share: floor(debit·e/E).
			{id: "r1", buyer: "acct_a", fee: 100, release: later, parts: []store.Part{part("node_1", "acct_p", 1000)}},                                                            // a: 1100
			{id: "r2", buyer: "acct_b", fee: 101, release: later, parts: []store.Part{part("node_1", "acct_p", 300), part("node_3", "acct_q", 700)}},                              // b: floor(1101·0.3) = 330
			{id: "r3", buyer: "acct_a", fee: 50, release: past, parts: []store.Part{part("node_1", "acct_p", 500)}},                                                               // released: kept
			{id: "r4", buyer: "acct_a", fee: 40, release: later, parts: []store.Part{part("node_2", "acct_p", 400)}},                                                              // another node: kept
			{id: "r5", buyer: "acct_b", fee: 10, subsidy: 50, release: later, parts: []store.Part{part("node_1", "acct_p", 200)}},                                                 // b: 160, fees +40
			{id: "r6", buyer: "acct_a", fee: 33, release: later, parts: []store.Part{part("node_1", "acct_p", 150), part("node_1", "acct_p", 50), part("node_3", "acct_q", 100)}}, // a: floor(333·2/3) = 222
		} {
			mustSettle(t, db, b)
		}
		if released, err := db.ReleaseEarnings(ctx, t0); err != nil || released != 500 {
			t.Fatalf("release r3: %d, %v", released, err)
		}
		mustLedgerSum0(t, db)
		before := map[string]*store.Balance{}
		for _, a := range []string{"acct_a", "acct_b", "acct_p", "acct_q"} {
			before[a] = mustBalance(t, db, a)
		}
		fees := func() money.Nanos {
			t.Helper()
			var n int64
			if err := raw.QueryRow(`SELECT balance FROM ledger_accounts WHERE id = 'fees'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return money.Nanos(n)
		}
		feesBefore := fees()
		if want := money.Nanos(100 + 101 + 50 + 40 + (10 - 50) + 33); feesBefore != want {
			t.Fatalf("fees before %d; want %d", feesBefore, want)
		}

		got, err := db.ClawBack(ctx, "node_1", "suspend-1", at(time.Minute))
		if err != nil || got != 1100+330+160+222 {
			t.Fatalf("ClawBack = %d, %v; want %d", got, err, 1100+330+160+222)
		}
		mustLedgerSum0(t, db)
		wantDelta := map[string]money.Nanos{"acct_a": 1100 + 222, "acct_b": 330 + 160}
		for a, d := range wantDelta {
			if b := mustBalance(t, db, a); b.Credits != before[a].Credits+d || b.Spent != before[a].Spent || b.Held != 0 {
				t.Errorf("%s after the clawback %+v; want credits %s + %d, spent unchanged", a, b, before[a].Credits, d)
			}
		}
		if b := mustBalance(t, db, "acct_p"); b.Pending != before["acct_p"].Pending-1700 || b.Available != 500 {
			t.Errorf("acct_p after the clawback %+v; want pending %d - 1700, the released 500 kept", b, before["acct_p"].Pending)
		}
		if b := mustBalance(t, db, "acct_q"); *b != *before["acct_q"] {
			t.Errorf("acct_q after the clawback %+v; want unchanged %+v", b, before["acct_q"])
		}
		if got, want := fees(), feesBefore-100-30+40-22; got != want {
			t.Errorf("fees after %d; want %d (the fee shares of r1, r2, r6 returned, r5's subsidy share back)", got, want)
		}
		// The clawback's entries sum to zero; node_1's pending credits are marked clawed back (2),
		// its released one (r3) stays released (1).
		if got, want := rows(t, raw, `SELECT account, amount, COALESCE(node_id, '-'), COALESCE(release_at, -1), released FROM ledger_entries
WHERE txn_id = 'clawback:suspend-1' ORDER BY account`), []string{
			"buyer:acct_a 1322 - -1 0", "buyer:acct_b 490 - -1 0", "fees -112 - -1 0", "pending:acct_p -1700 - -1 0",
		}; !reflect.DeepEqual(got, want) {
			t.Errorf("the clawback's entries %q; want %q", got, want)
		}
		if got, want := rows(t, raw, `SELECT txn_id, amount, released FROM ledger_entries WHERE node_id IS NOT NULL
ORDER BY txn_id, node_id, amount`), []string{
			"settle:r1 1000 2", "settle:r2 300 2", "settle:r2 700 0", "settle:r3 500 1", "settle:r4 400 0",
			"settle:r5 200 2", "settle:r6 50 2", "settle:r6 150 2", "settle:r6 100 0",
		}; !reflect.DeepEqual(got, want) {
			t.Errorf("the earnings' entries %q; want %q", got, want)
		}
		if got := rows(t, raw, `SELECT kind, ref FROM ledger_txns WHERE id = 'clawback:suspend-1'`); !reflect.DeepEqual(got, []string{"clawback suspend-1"}) {
			t.Errorf("the clawback's transaction %q", got)
		}

		earnings, err := db.Earnings(ctx, "acct_p", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		wantEarnings := []store.Earning{
			{NodeID: "node_1", Day: day("2023-11-14"), Available: 500},
			{NodeID: "node_2", Day: day("2023-11-14"), Pending: 400},
		}
		if !reflect.DeepEqual(earnings, wantEarnings) {
			t.Errorf("Earnings of acct_p = %+v; want %+v", earnings, wantEarnings)
		}

		// The same ref again: nothing, even for what the node earned since.
		mustSettle(t, db, bill{id: "r7", buyer: "acct_a", fee: 5, release: later, parts: []store.Part{part("node_1", "acct_p", 70)}})
		if got, err := db.ClawBack(ctx, "node_1", "suspend-1", at(2*time.Minute)); got != 0 || err != nil {
			t.Errorf("ClawBack again = %d, %v; want 0, nil", got, err)
		}
		if b := mustBalance(t, db, "acct_p"); b.Pending != before["acct_p"].Pending-1700+70 {
			t.Errorf("acct_p's pending after a repeated clawback %s", b.Pending)
		}
		// A new ref takes only what is new; a third finds nothing.
		if got, err := db.ClawBack(ctx, "node_1", "suspend-2", at(3*time.Minute)); got != 75 || err != nil {
			t.Errorf("ClawBack of r7 = %d, %v; want 75", got, err)
		}
		if got, err := db.ClawBack(ctx, "node_1", "suspend-3", at(4*time.Minute)); got != 0 || err != nil {
			t.Errorf("ClawBack with nothing pending = %d, %v; want 0", got, err)
		}
		if got, err := db.ClawBack(ctx, "node_x", "unknown-node", at(4*time.Minute)); got != 0 || err != nil {
			t.Errorf("ClawBack of an unknown node = %d, %v; want 0", got, err)
		}
		mustLedgerSum0(t, db)

		// The release after it releases the other nodes' earnings only.
		released, err := db.ReleaseEarnings(ctx, later)
		if err != nil || released != 400+700+100 {
			t.Errorf("ReleaseEarnings after the clawback = %d, %v; want %d (node_2 and node_3)", released, err, 400+700+100)
		}
		if b := mustBalance(t, db, "acct_p"); b.Pending != 0 || b.Available != 900 {
			t.Errorf("acct_p after the release %+v; want nothing pending, 500 + 400 available", b)
		}
		if b := mustBalance(t, db, "acct_q"); b.Pending != 0 || b.Available != 800 {
			t.Errorf("acct_q after the release %+v; want 800 available", b)
		}
		if got, err := db.ClawBack(ctx, "node_3", "late", at(25*time.Hour)); got != 0 || err != nil {
			t.Errorf("ClawBack of released earnings = %d, %v; want 0", got, err)
		}
		mustLedgerSum0(t, db)
	})
}

// Amounts whose products overflow 64 bits: $100,000 requests.
func TestDB_ClawBack_large(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		const usd = money.USD
		if err := db.Deposit(ctx, "acct_a", 200_000*usd, "d", t0); err != nil {
			t.Fatal(err)
		}
		mustSettle(t, db, bill{id: "big", buyer: "acct_a", fee: 10_000*usd + 1, release: at(time.Hour), parts: []store.Part{
			{NodeID: "node_1", ProviderID: "acct_p", Earned: 60_000 * usd},
			{NodeID: "node_2", ProviderID: "acct_p", Earned: 40_000 * usd},
		}})
		// floor((110,000 USD + 1 nano) · 0.6) = 66,000 USD.
		if got, err := db.ClawBack(ctx, "node_1", "big", at(time.Minute)); got != 66_000*usd || err != nil {
			t.Errorf("ClawBack = %d, %v; want %d", got, err, 66_000*usd)
		}
		if b := mustBalance(t, db, "acct_a"); b.Credits != 200_000*usd-110_000*usd-1+66_000*usd {
			t.Errorf("buyer's credits %s", b.Credits)
		}
		mustLedgerSum0(t, db)
	})
}

// rawDB opens the test database dsn of the kind with database/sql, to read what the store's
// interface does not show, such as a ledger account's balance.
func rawDB(t *testing.T, kind, dsn string) *sql.DB {
	t.Helper()
	driver := "sqlite"
	if kind == "postgres" {
		driver = "pgx"
	}
	raw, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// rows runs a query without parameters and returns its rows, as lines of fields joined by " ".
func rows(t *testing.T, raw *sql.DB, query string) []string {
	t.Helper()
	rs, err := raw.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	cols, _ := rs.Columns()
	var out []string
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var fields []string
		for _, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			fields = append(fields, fmt.Sprint(v))
		}
		out = append(out, strings.Join(fields, " "))
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Two clawbacks with one ref at once return the money once; two with different refs, once too.
func TestDB_ClawBack_concurrent(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		if err := db.Deposit(ctx, "acct_a", 100_000, "d", t0); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			mustSettle(t, db, bill{id: fmt.Sprint("r", i), buyer: "acct_a", fee: 10, release: at(time.Hour),
				parts: []store.Part{{NodeID: "node_1", ProviderID: "acct_p", Earned: 100}}})
		}
		want := money.Nanos(20 * 110)
		for _, refs := range [][]string{{"same", "same", "same", "same"}, {"a", "b", "c", "d"}} {
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				total money.Nanos
			)
			for _, ref := range refs {
				wg.Go(func() {
					got, err := db.ClawBack(ctx, "node_1", ref, at(time.Minute))
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					total += got
					mu.Unlock()
				})
			}
			wg.Wait()
			if total != want {
				t.Errorf("clawbacks %v returned %d in all; want %d once", refs, total, want)
			}
			mustSettle(t, db, bill{id: "more-" + refs[1], buyer: "acct_a", fee: 10, release: at(time.Hour),
				parts: []store.Part{{NodeID: "node_1", ProviderID: "acct_p", Earned: 2000}}})
			mustSettle(t, db, bill{id: "more2-" + refs[1], buyer: "acct_a", fee: 10, release: at(time.Hour),
				parts: []store.Part{{NodeID: "node_1", ProviderID: "acct_p", Earned: 200}}})
			want = 2010 + 210
		}
		mustLedgerSum0(t, db)
	})
}

// A suspended node's earnings are never released, not even those it earned after the clawback.
func TestDB_ReleaseSkipsSuspended(t *testing.T) {
	sqlstore.ForEachKind(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		db, _ := sqlstore.OpenTestDB(t, kind)
		if err := db.Deposit(ctx, "acct_a", 100_000, "d", t0); err != nil {
			t.Fatal(err)
		}
		mustAccount(t, db, "acct_p", "cheat-gpus")
		mustAccount(t, db, "acct_q", "fair-gpus")
		mustNode(t, db, trustNode("node_cheat", "acct_p"))
		mustNode(t, db, trustNode("node_fair", "acct_q"))
		past := at(-time.Hour)
		mustSettle(t, db, bill{id: "r1", buyer: "acct_a", fee: 10, release: past, parts: []store.Part{{NodeID: "node_cheat", ProviderID: "acct_p", Earned: 1000}}})
		mustSettle(t, db, bill{id: "r2", buyer: "acct_a", fee: 10, release: past, parts: []store.Part{{NodeID: "node_fair", ProviderID: "acct_q", Earned: 700}}})
		if err := db.SetNodeLevel(ctx, "node_cheat", store.LevelSuspended, "cheats", t0); err != nil {
			t.Fatal(err)
		}
		if released, err := db.ReleaseEarnings(ctx, t0); err != nil || released != 700 {
			t.Errorf("released %d, %v; want only the fair node's 700", released, err)
		}
		if b := mustBalance(t, db, "acct_p"); b.Pending != 1000 || b.Available != 0 {
			t.Errorf("the suspended node's provider: pending %d, available %d; want 1000 held pending", b.Pending, b.Available)
		}
		mustLedgerSum0(t, db)
	})
}

// A provider's payouts are listed newest first.
func TestDB_Payouts(t *testing.T) {
	sqlstore.ForEachKind(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		db, _ := sqlstore.OpenTestDB(t, kind)
		if err := db.Deposit(ctx, "acct_a", 100_000, "d", t0); err != nil {
			t.Fatal(err)
		}
		mustSettle(t, db, bill{id: "r1", buyer: "acct_a", fee: 10, release: at(-time.Hour), parts: []store.Part{{NodeID: "n", ProviderID: "acct_p", Earned: 1000}}})
		if _, err := db.ReleaseEarnings(ctx, t0); err != nil {
			t.Fatal(err)
		}
		for i, amount := range []money.Nanos{300, 200} {
			if err := db.Payout(ctx, "acct_p", amount, fmt.Sprint("wire-", i+1), at(time.Duration(i+1)*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		ps, err := db.Payouts(ctx, "acct_p", 10)
		if err != nil || len(ps) != 2 || ps[0].Ref != "wire-2" || ps[0].Amount != 200 || ps[1].Amount != 300 || !ps[1].At.Equal(at(time.Minute)) {
			t.Errorf("payouts = %+v, %v; want wire-2 ($200 n) then wire-1 ($300 n)", ps, err)
		}
		if ps, _ := db.Payouts(ctx, "acct_other", 10); len(ps) != 0 {
			t.Errorf("another account's payouts: %+v", ps)
		}
	})
}

func TestDB_OfferLevels(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		if ls, err := db.OfferLevels(ctx, "node_1"); err != nil || len(ls) != 0 {
			t.Fatalf("OfferLevels of a node with none = %+v, %v; want none", ls, err)
		}
		set := []store.OfferLevel{
			{NodeID: "node_1", Model: "m/b", Level: store.LevelNew, Reason: "", ChangedAt: at(time.Minute)},
			{NodeID: "node_1", Model: "m/a", Level: store.LevelVerified, Reason: "passed", ChangedAt: at(2 * time.Minute)},
			{NodeID: "node_2", Model: "m/a", Level: store.LevelQuarantined, Reason: "failed", ChangedAt: at(3 * time.Minute)},
			{NodeID: "node_1", Model: "m/b", Level: store.LevelQuarantined, Reason: "4 of 6 failed", ChangedAt: at(4 * time.Minute)},
		}
		for _, l := range set {
			if err := db.SetOfferLevel(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.SetOfferLevel(ctx, store.OfferLevel{NodeID: "node_1", Model: "m/c", Level: store.LevelTrusted, ChangedAt: t0}); err == nil {
			t.Error("a model trusted on its own; want an error: trusted is a node's level")
		}
		got, err := db.OfferLevels(ctx, "node_1")
		if err != nil {
			t.Fatal(err)
		}
		want := []store.OfferLevel{set[1], set[3]}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("OfferLevels = %+v\nwant %+v", got, want)
		}
	})
}

func TestDB_CheckOverclaims(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_b", "buyer")
		mustAccount(t, db, "acct_p", "provider")
		mustNode(t, db, trustNode("node_1", "acct_p"))
		if err := db.Deposit(ctx, "acct_b", 1000, "d1", t0); err != nil {
			t.Fatal(err)
		}
		requests := 0
		overclaim := func() {
			t.Helper()
			requests++
			id := fmt.Sprintf("req_%d", requests)
			if err := db.PlaceHold(ctx, &store.Hold{RequestID: id, AccountID: "acct_b", KeyID: "key_1", Amount: 10, CreatedAt: t0}); err != nil {
				t.Fatal(err)
			}
			s := &store.Settlement{RequestID: id, Debit: 10, At: t0, ReleaseAt: at(time.Hour), Flagged: []string{"node_1"},
				Parts: []store.Part{{NodeID: "node_1", ProviderID: "acct_p", Earned: 10}}}
			if errs := db.Settle(ctx, []*store.Settlement{s}); errs[0] != nil {
				t.Fatal(errs[0])
			}
		}
		for _, tt := range []struct {
			name  string
			claim int // over-claims settled before the look
			want  int
		}{
			{"none", 0, 0},
			{"one", 1, 1},
			{"counted already", 0, 0},
			{"three more", 3, 3},
		} {
			for range tt.claim {
				overclaim()
			}
			n, err := db.CheckOverclaims(ctx, "node_1", at(time.Minute))
			if err != nil || n != tt.want {
				t.Errorf("%s: CheckOverclaims = %d, %v; want %d", tt.name, n, err, tt.want)
			}
		}
		cs := mustChecks(t, db, "node_1")
		if len(cs) != 2 {
			t.Fatalf("checks %+v; want 2 usage checks", cs)
		}
		for _, c := range cs {
			if c.Kind != store.CheckUsage || c.Passed || c.Model != "" || !strings.Contains(c.Detail, "usage claim") {
				t.Errorf("check %+v; want a failed usage check of no model", c)
			}
		}
		if !strings.HasPrefix(cs[0].Detail, "3 requests'") {
			t.Errorf("detail %q; want it to count 3 requests", cs[0].Detail)
		}
		if n, err := db.CheckOverclaims(ctx, "node_unknown", t0); err != nil || n != 0 {
			t.Errorf("an unknown node: %d, %v; want 0, nil", n, err)
		}
	})
}

func mustChecks(t *testing.T, db store.Store, node string) []store.NodeCheck {
	t.Helper()
	cs, err := db.NodeChecks(context.Background(), node, 100)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
