package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
)

// t0 is 2023-11-14T22:13:20Z: t0+2h is the next UTC day, t0-22h13m20s the day's start.

func day(s string) time.Time {
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return d
}

func mustNode(t *testing.T, db store.Store, n *store.Node) {
	t.Helper()
	if err := db.UpsertNode(context.Background(), n); err != nil {
		t.Fatalf("UpsertNode(%s): %v", n.ID, err)
	}
}

func TestDB_NodesOf(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		mustAccount(t, db, "acct_2", "bob")
		node := func(id, account, name string) *store.Node {
			return &store.Node{ID: id, AccountID: account, PublicKey: []byte(id), Name: name,
				Region: "eu", Engine: "ollama", Agent: "v1", FirstSeen: t0, LastSeen: t0, Level: store.LevelNew}
		}
		full := node("node_c", "acct_1", "alpha")
		full.Hardware, full.Offers = []byte(`{"gpus":2}`), []byte(`[{"model":"llama"}]`)
		full.Fingerprint, full.HardwareChangedAt = "fp-c", at(time.Hour)
		full.Windows, full.Timezone = "mon-fri 09:00-17:00", "Europe/Paris"
		for _, n := range []*store.Node{
			node("node_b", "acct_1", "zeta"),
			full,
			node("node_a", "acct_1", "alpha"),
			node("node_d", "acct_2", "alpha"),
			node("node_e", "acct_2", "beta"),
		} {
			mustNode(t, db, n)
		}
		// node_e moves to alice's account on its next registration.
		mustNode(t, db, node("node_e", "acct_1", "beta"))

		tests := []struct {
			account string
			want    []string
		}{
			{"acct_1", []string{"node_a", "node_c", "node_e", "node_b"}},
			{"acct_2", []string{"node_d"}},
			{"acct_x", nil},
		}
		for _, tt := range tests {
			t.Run(tt.account, func(t *testing.T) {
				ns, err := db.NodesOf(ctx, tt.account)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, n := range ns {
					got = append(got, n.ID)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("NodesOf(%s) = %v, want %v", tt.account, got, tt.want)
				}
			})
		}
		ns, err := db.NodesOf(ctx, "acct_1")
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) < 2 || !reflect.DeepEqual(ns[1], full) {
			t.Errorf("NodesOf(acct_1)[1] = %+v, want %+v", ns[1], full)
		}
	})
}

// The fields added with migration 0004: an update writes them all, and a zero
// HardwareChangedAt reads back as the zero time.
func TestDB_UpsertNode_hardwareAndAvailability(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		mustAccount(t, db, "acct_1", "alice")
		base := store.Node{ID: "node_1", AccountID: "acct_1", PublicKey: []byte("pk1"), Name: "rig",
			Region: "eu", Engine: "ollama", Agent: "v1", FirstSeen: t0, LastSeen: t0, Level: store.LevelNew}
		with := func(fingerprint string, changed time.Time, windows, tz string) store.Node {
			n := base
			n.Fingerprint, n.HardwareChangedAt, n.Windows, n.Timezone = fingerprint, changed, windows, tz
			return n
		}
		tests := []struct {
			name string
			n    store.Node
		}{
			{"new node, never changed", with("fp1", time.Time{}, "", "")},
			{"availability declared", with("fp1", time.Time{}, "mon-fri 09:00-17:00", "Europe/Paris")},
			{"fingerprint changed", with("fp2", at(time.Hour), "mon-fri 09:00-17:00", "Europe/Paris")},
			{"change time kept by the caller", with("fp2", at(time.Hour), "", "")},
			{"change time cleared", with("fp2", time.Time{}, "", "UTC")},
			{"before the epoch", with("fp3", time.UnixMilli(-1).UTC(), "", "")},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := db.UpsertNode(ctx, &tt.n); err != nil {
					t.Fatal(err)
				}
				got, err := db.Node(ctx, tt.n.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, &tt.n) {
					t.Errorf("Node = %+v\nwant %+v", got, &tt.n)
				}
				if tt.n.HardwareChangedAt.IsZero() && !got.HardwareChangedAt.IsZero() {
					t.Errorf("HardwareChangedAt = %v, want the zero time", got.HardwareChangedAt)
				}
			})
		}
	})
}

func TestDB_NodeSessions(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		s1 := &store.NodeSession{ID: "ns_1", NodeID: "node_1", ConnectedAt: t0, LastSeen: t0}
		s2 := &store.NodeSession{ID: "ns_2", NodeID: "node_1", ConnectedAt: at(time.Hour), LastSeen: at(time.Hour)}
		s3 := &store.NodeSession{ID: "ns_3", NodeID: "node_2", ConnectedAt: t0, LastSeen: t0}
		for _, s := range []*store.NodeSession{s2, s1, s3} {
			if err := db.StartNodeSession(ctx, s); err != nil {
				t.Fatalf("StartNodeSession(%s): %v", s.ID, err)
			}
		}
		if err := db.StartNodeSession(ctx, &store.NodeSession{ID: "ns_1", NodeID: "node_9"}); !errors.Is(err, store.ErrConflict) {
			t.Errorf("StartNodeSession with a taken id: got error %v, want %v", err, store.ErrConflict)
		}
		if err := db.UpdateNodeSessions(ctx, nil); err != nil {
			t.Errorf("UpdateNodeSessions(nil): %v", err)
		}
		s1.LastSeen, s1.Busy, s1.Ended = at(30*time.Minute), 10*time.Minute+time.Microsecond, true
		s2.LastSeen, s2.Busy = at(2*time.Hour), 5*time.Second
		unknown := &store.NodeSession{ID: "ns_x", NodeID: "node_1", LastSeen: at(time.Hour)}
		if err := db.UpdateNodeSessions(ctx, []*store.NodeSession{s1, unknown, s2}); err != nil {
			t.Fatalf("UpdateNodeSessions: %v", err)
		}
		tests := []struct {
			name  string
			node  string
			since time.Time
			want  []*store.NodeSession
		}{
			{"all, oldest first", "node_1", time.Time{}, []*store.NodeSession{s1, s2}},
			{"since is inclusive", "node_1", at(30 * time.Minute), []*store.NodeSession{s1, s2}},
			{"a session that ended before since is left out", "node_1", at(30*time.Minute + time.Millisecond), []*store.NodeSession{s2}},
			{"a session online at since counts though it connected before", "node_1", at(90 * time.Minute), []*store.NodeSession{s2}},
			{"nothing since", "node_1", at(3 * time.Hour), nil},
			{"another node", "node_2", time.Time{}, []*store.NodeSession{s3}},
			{"unknown node", "node_x", time.Time{}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.NodeSessions(ctx, tt.node, tt.since)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("NodeSessions(%s, %v)\n got %s\nwant %s", tt.node, tt.since, sessions(got), sessions(tt.want))
				}
			})
		}
	})
}

func sessions(ss []*store.NodeSession) string {
	var s string
	for _, x := range ss {
		s += fmt.Sprintf("%+v ", *x)
	}
	return "[" + s + "]"
}

// Only the sessions last seen before the time end: a live replica's, seen since, stay open.
func TestDB_EndSessionsSeenBefore(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		for _, s := range []*store.NodeSession{
			{ID: "ns_old", NodeID: "node_1", ConnectedAt: t0, LastSeen: at(time.Minute)},
			{ID: "ns_live", NodeID: "node_2", ConnectedAt: t0, LastSeen: at(time.Hour)},
		} {
			if err := db.StartNodeSession(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := db.EndSessionsSeenBefore(ctx, at(30*time.Minute)); err != nil || n != 1 {
			t.Errorf("EndSessionsSeenBefore = %d, %v; want 1, the session seen before", n, err)
		}
		live, err := db.NodeSessions(ctx, "node_2", t0)
		if err != nil || len(live) != 1 || live[0].Ended {
			t.Errorf("the live session: %+v, %v; want it open", live, err)
		}
		old, err := db.NodeSessions(ctx, "node_1", t0)
		if err != nil || len(old) != 1 || !old[0].Ended || !old[0].LastSeen.Equal(at(time.Minute)) {
			t.Errorf("the stale session: %+v, %v; want it ended at its last sighting", old, err)
		}
	})
}

func TestDB_EndOpenSessions(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		if n, err := db.EndOpenSessions(ctx); err != nil || n != 0 {
			t.Errorf("EndOpenSessions on no sessions = %d, %v; want 0", n, err)
		}
		ss := []*store.NodeSession{
			{ID: "ns_1", NodeID: "node_1", ConnectedAt: t0, LastSeen: at(time.Minute), Ended: true},
			{ID: "ns_2", NodeID: "node_1", ConnectedAt: at(time.Hour), LastSeen: at(2 * time.Hour), Busy: time.Minute},
			{ID: "ns_3", NodeID: "node_2", ConnectedAt: t0, LastSeen: at(3 * time.Hour)},
		}
		for _, s := range ss {
			if err := db.StartNodeSession(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := db.EndOpenSessions(ctx); err != nil || n != 2 {
			t.Errorf("EndOpenSessions = %d, %v; want 2", n, err)
		}
		if n, err := db.EndOpenSessions(ctx); err != nil || n != 0 {
			t.Errorf("EndOpenSessions again = %d, %v; want 0", n, err)
		}
		for _, s := range ss {
			s.Ended = true // at their LastSeen, which stays
		}
		for _, node := range []string{"node_1", "node_2"} {
			got, err := db.NodeSessions(ctx, node, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			want := ss[:2]
			if node == "node_2" {
				want = ss[2:]
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("NodeSessions(%s)\n got %s\nwant %s", node, sessions(got), sessions(want))
			}
		}
	})
}

func TestDB_NodeDays(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		if err := db.AddNodeDays(ctx, nil); err != nil {
			t.Errorf("AddNodeDays(nil): %v", err)
		}
		plus5 := time.FixedZone("+05", 5*60*60)
		first := []store.NodeDay{
			{NodeID: "node_1", Day: t0, Jobs: 2, Failed: 1, PromptTokens: 100, CompletionTokens: 1000},
			// the same UTC day again in one batch
			{NodeID: "node_1", Day: at(time.Hour), Jobs: 3, PromptTokens: 10, CompletionTokens: 20},
			{NodeID: "node_1", Day: at(2 * time.Hour), Jobs: 1, Failed: 1, PromptTokens: 1, CompletionTokens: 2},
			{NodeID: "node_2", Day: t0, Jobs: 7},
		}
		second := []store.NodeDay{
			// 2023-11-15 03:13 at +05:00 is still 2023-11-14 in UTC.
			{NodeID: "node_1", Day: t0.In(plus5), Jobs: 10, Failed: 2, PromptTokens: 5, CompletionTokens: 6},
			{NodeID: "node_1", Day: day("2023-11-14"), Jobs: 100},
		}
		for _, batch := range [][]store.NodeDay{first, second} {
			if err := db.AddNodeDays(ctx, batch); err != nil {
				t.Fatalf("AddNodeDays: %v", err)
			}
		}
		// More rows than one statement takes, each added twice.
		var many []store.NodeDay
		for i := range 100 {
			many = append(many, store.NodeDay{NodeID: "node_3", Day: day("2023-01-01").AddDate(0, 0, i), Jobs: i, CompletionTokens: int64(i) << 33})
		}
		for range 2 {
			if err := db.AddNodeDays(ctx, many); err != nil {
				t.Fatalf("AddNodeDays(100 days): %v", err)
			}
		}

		tests := []struct {
			name  string
			node  string
			since time.Time
			want  []store.NodeDay
		}{
			{"all, summed", "node_1", time.Time{}, []store.NodeDay{
				{NodeID: "node_1", Day: day("2023-11-14"), Jobs: 115, Failed: 3, PromptTokens: 115, CompletionTokens: 1026},
				{NodeID: "node_1", Day: day("2023-11-15"), Jobs: 1, Failed: 1, PromptTokens: 1, CompletionTokens: 2},
			}},
			{"since the middle of a day includes that day", "node_1", at(time.Hour), []store.NodeDay{
				{NodeID: "node_1", Day: day("2023-11-14"), Jobs: 115, Failed: 3, PromptTokens: 115, CompletionTokens: 1026},
				{NodeID: "node_1", Day: day("2023-11-15"), Jobs: 1, Failed: 1, PromptTokens: 1, CompletionTokens: 2},
			}},
			{"since the next day", "node_1", at(2 * time.Hour), []store.NodeDay{
				{NodeID: "node_1", Day: day("2023-11-15"), Jobs: 1, Failed: 1, PromptTokens: 1, CompletionTokens: 2},
			}},
			{"another node", "node_2", time.Time{}, []store.NodeDay{{NodeID: "node_2", Day: day("2023-11-14"), Jobs: 7}}},
			{"nothing since", "node_1", day("2023-11-16"), nil},
			{"unknown node", "node_x", time.Time{}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.NodeDays(ctx, tt.node, tt.since)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("NodeDays(%s, %v)\n got %+v\nwant %+v", tt.node, tt.since, got, tt.want)
				}
			})
		}
		got, err := db.NodeDays(ctx, "node_3", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(many) {
			t.Fatalf("NodeDays(node_3) has %d days, want %d", len(got), len(many))
		}
		for i, d := range got {
			want := many[i]
			want.Jobs, want.CompletionTokens = 2*want.Jobs, 2*want.CompletionTokens
			if d != want {
				t.Errorf("NodeDays(node_3)[%d] = %+v, want %+v", i, d, want)
			}
		}
	})
}

func TestDB_Telemetry(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		m0 := t0.Truncate(time.Minute) // 22:13:00
		minute := func(n int) time.Time { return m0.Add(time.Duration(n) * time.Minute) }
		sample := func(node string, at time.Time, data string) store.TelemetrySample {
			return store.TelemetrySample{NodeID: node, At: at, Data: []byte(data)}
		}
		if err := db.InsertTelemetry(ctx, nil); err != nil {
			t.Errorf("InsertTelemetry(nil): %v", err)
		}
		if err := db.InsertTelemetry(ctx, []store.TelemetrySample{
			sample("node_1", t0, `{"a":1}`), // t0 is 20s into its minute
			sample("node_1", minute(1), `{"b":2}`),
			sample("node_2", minute(0), `{"c":3}`),
			sample("node_1", minute(0), `{"dup":"in the batch"}`),
		}); err != nil {
			t.Fatalf("InsertTelemetry: %v", err)
		}
		if err := db.InsertTelemetry(ctx, []store.TelemetrySample{
			sample("node_1", minute(1).Add(59*time.Second), `{"dup":"recorded"}`),
			sample("node_1", minute(2), `{"d":4}`),
		}); err != nil {
			t.Fatalf("InsertTelemetry: %v", err)
		}
		var many []store.TelemetrySample
		for i := range 70 {
			many = append(many, sample("node_3", minute(i), fmt.Sprintf(`{"i":%d}`, i)))
		}
		if err := db.InsertTelemetry(ctx, many); err != nil {
			t.Fatalf("InsertTelemetry(70): %v", err)
		}

		tests := []struct {
			name  string
			node  string
			since time.Time
			want  []store.TelemetrySample
		}{
			{"all, the last of a minute kept", "node_1", time.Time{}, []store.TelemetrySample{
				sample("node_1", minute(0), `{"dup":"in the batch"}`),
				sample("node_1", minute(1), `{"dup":"recorded"}`),
				sample("node_1", minute(2), `{"d":4}`),
			}},
			{"since is inclusive", "node_1", minute(1), []store.TelemetrySample{
				sample("node_1", minute(1), `{"dup":"recorded"}`),
				sample("node_1", minute(2), `{"d":4}`),
			}},
			{"since within a minute", "node_1", minute(1).Add(time.Second), []store.TelemetrySample{
				sample("node_1", minute(2), `{"d":4}`),
			}},
			{"another node", "node_2", time.Time{}, []store.TelemetrySample{sample("node_2", minute(0), `{"c":3}`)}},
			{"unknown node", "node_x", time.Time{}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.Telemetry(ctx, tt.node, tt.since)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("Telemetry(%s, %v)\n got %s\nwant %s", tt.node, tt.since, got, tt.want)
				}
			})
		}
		if got, err := db.Telemetry(ctx, "node_3", time.Time{}); err != nil || !reflect.DeepEqual(got, many) {
			t.Errorf("Telemetry(node_3) = %d samples, %v; want the 70 inserted", len(got), err)
		}

		// Pruning before minute 2 deletes node_1's first two, node_2's one and node_3's first two.
		if n, err := db.PruneTelemetry(ctx, minute(2)); err != nil || n != 5 {
			t.Errorf("PruneTelemetry(minute 2) = %d, %v; want 5", n, err)
		}
		if n, err := db.PruneTelemetry(ctx, minute(2)); err != nil || n != 0 {
			t.Errorf("PruneTelemetry(minute 2) again = %d, %v; want 0", n, err)
		}
		got, err := db.Telemetry(ctx, "node_1", time.Time{})
		if want := []store.TelemetrySample{sample("node_1", minute(2), `{"d":4}`)}; err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Telemetry(node_1) after pruning = %s, %v; want %s", got, err, want)
		}
		if got, err := db.Telemetry(ctx, "node_3", time.Time{}); err != nil || len(got) != 68 {
			t.Errorf("Telemetry(node_3) after pruning = %d samples, %v; want 68", len(got), err)
		}
	})
}

func TestDB_NodeEvents(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		ev := func(node string, at time.Time, detail string) *store.NodeEvent {
			return &store.NodeEvent{NodeID: node, At: at, Kind: store.EventHardwareChanged, Detail: detail}
		}
		e1 := ev("node_1", t0, "first")
		e2 := ev("node_1", at(time.Hour), "second")
		e3 := ev("node_1", at(time.Hour), "third, at the same time as the second")
		e4 := ev("node_1", at(-time.Hour), "recorded late")
		e5 := ev("node_2", at(time.Hour), "another node's")
		for _, e := range []*store.NodeEvent{e1, e2, e3, e4, e5} {
			if err := db.AddNodeEvent(ctx, e); err != nil {
				t.Fatalf("AddNodeEvent(%s): %v", e.Detail, err)
			}
		}
		tests := []struct {
			name  string
			node  string
			limit int
			want  []*store.NodeEvent
		}{
			{"all, newest first", "node_1", 10, []*store.NodeEvent{e3, e2, e1, e4}},
			{"exactly all", "node_1", 4, []*store.NodeEvent{e3, e2, e1, e4}},
			{"limited", "node_1", 2, []*store.NodeEvent{e3, e2}},
			{"zero limit", "node_1", 0, nil},
			{"negative limit", "node_1", -1, nil},
			{"another node", "node_2", 10, []*store.NodeEvent{e5}},
			{"unknown node", "node_x", 10, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.NodeEvents(ctx, tt.node, tt.limit)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("NodeEvents(%s, %d)\n got %v\nwant %v", tt.node, tt.limit, details(got), details(tt.want))
				}
			})
		}
	})
}

func details(es []*store.NodeEvent) []string {
	var ds []string
	for _, e := range es {
		ds = append(ds, e.Detail)
	}
	return ds
}

func TestDB_Receipts(t *testing.T) {
	sqlstore.ForEachDB(t, func(t *testing.T, db *sqlstore.DB) {
		ctx := context.Background()
		rc := func(req, job string, created time.Time, signed string) *store.Receipt {
			return &store.Receipt{RequestID: req, JobID: job, NodeID: "node_" + job, Signed: []byte(signed), CreatedAt: created}
		}
		b := rc("req_1", "job_b", t0, `{"job":"b"}`)
		a := rc("req_1", "job_a", at(time.Second), `{"job":"a"}`)
		c := rc("req_1", "job_c", t0, `{"job":"c"}`) // at the same time as b
		x := rc("req_2", "job_x", t0, `{"job":"x"}`)
		d := rc("req_1", "job_d", at(2*time.Second), `{"job":"d"}`)
		if err := db.InsertReceipts(ctx, nil); err != nil {
			t.Errorf("InsertReceipts(nil): %v", err)
		}
		if err := db.InsertReceipts(ctx, []*store.Receipt{b, a, c, x,
			rc("req_1", "job_a", t0, `{"dup":"in the batch"}`)}); err != nil {
			t.Fatalf("InsertReceipts: %v", err)
		}
		if err := db.InsertReceipts(ctx, []*store.Receipt{
			rc("req_1", "job_b", at(time.Hour), `{"dup":"stored"}`), d}); err != nil {
			t.Fatalf("InsertReceipts: %v", err)
		}
		tests := []struct {
			req  string
			want []*store.Receipt
		}{
			{"req_1", []*store.Receipt{b, c, a, d}},
			{"req_2", []*store.Receipt{x}},
			{"req_x", nil},
		}
		for _, tt := range tests {
			t.Run(tt.req, func(t *testing.T) {
				got, err := db.Receipts(ctx, tt.req)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("Receipts(%s)\n got %s\nwant %s", tt.req, receipts(got), receipts(tt.want))
				}
			})
		}
	})
}

func receipts(rs []*store.Receipt) string {
	var s string
	for _, r := range rs {
		s += fmt.Sprintf("{%s %s %s %s %v} ", r.RequestID, r.JobID, r.NodeID, r.Signed, r.CreatedAt)
	}
	return "[" + s + "]"
}
