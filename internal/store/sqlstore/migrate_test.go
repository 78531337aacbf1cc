package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"testing"
	"testing/fstest"
	"time"

	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore/internal/testdsn"
)

// rawDB opens a fresh, empty database of the kind, without migrations, as Open connects to it.
func rawDB(t *testing.T, kind string) (*sql.DB, dialect) {
	t.Helper()
	name := testdsn.New(t, kind)
	d := sqliteDialect
	if kind == testdsn.Postgres {
		d = postgresDialect
	} else {
		name = dsn(name, false)
	}
	db, err := sql.Open(testdsn.Driver(kind), name)
	if err != nil {
		t.Fatal(err)
	}
	if d == sqliteDialect {
		db.SetMaxOpenConns(1)
	}
	t.Cleanup(func() { db.Close() })
	return db, d
}

func versions(t *testing.T, db *sql.DB) []int {
	t.Helper()
	rows, err := db.Query(`SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

func tableExists(t *testing.T, db *sql.DB, d dialect, name string) bool {
	t.Helper()
	q := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?`
	if d == postgresDialect {
		q = `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?`
	}
	var n int
	if err := db.QueryRow((&DB{dialect: d}).q(q), name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func TestMigrate(t *testing.T) {
	forEachKind(t, testMigrate)
}

func testMigrate(t *testing.T, kind string) {
	ctx := context.Background()
	now := func() time.Time { return time.UnixMilli(1_700_000_000_000) }
	db, d := rawDB(t, kind)
	fsys := fstest.MapFS{
		"m/0002_b.sql":  {Data: []byte(`CREATE TABLE b (x INTEGER); INSERT INTO b VALUES (1);`)},
		"m/0001_a.sql":  {Data: []byte(`CREATE TABLE a (x INTEGER);`)},
		"m/README.md":   {Data: []byte(`not a migration`)},
		"other/0009.sq": {Data: []byte(`nonsense`)},
	}
	steps := []struct {
		name      string
		add       map[string]string // files to add before the step
		want      []int             // versions applied by the step
		wantErr   bool
		wantAll   []int // versions recorded after it
		wantTable string
	}{
		{name: "fresh", want: []int{1, 2}, wantAll: []int{1, 2}, wantTable: "b"},
		{name: "again applies nothing", wantAll: []int{1, 2}},
		{name: "new file", add: map[string]string{"m/0003_c.sql": `CREATE TABLE c (x INTEGER);`},
			want: []int{3}, wantAll: []int{1, 2, 3}, wantTable: "c"},
		{name: "failing migration is rolled back",
			add:     map[string]string{"m/0004_d.sql": `CREATE TABLE d (x INTEGER); SELECT nope FROM nowhere;`},
			wantErr: true, wantAll: []int{1, 2, 3}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			for name, sql := range st.add {
				fsys[name] = &fstest.MapFile{Data: []byte(sql)}
			}
			got, err := migrate(ctx, db, d, fsys, "m", now)
			if (err != nil) != st.wantErr {
				t.Fatalf("migrate: got error %v, want error %v", err, st.wantErr)
			}
			if !reflect.DeepEqual(got, st.want) {
				t.Errorf("applied %v, want %v", got, st.want)
			}
			if all := versions(t, db); !reflect.DeepEqual(all, st.wantAll) {
				t.Errorf("recorded %v, want %v", all, st.wantAll)
			}
			if st.wantTable != "" && !tableExists(t, db, d, st.wantTable) {
				t.Errorf("table %s missing", st.wantTable)
			}
		})
	}
	if tableExists(t, db, d, "d") {
		t.Errorf("table d of the failed migration exists, want rolled back")
	}
	var b int
	if err := db.QueryRow(`SELECT COUNT(*) FROM b`).Scan(&b); err != nil || b != 1 {
		t.Errorf("rows in b = %d (%v), want 1: migration 2 ran again?", b, err)
	}

	delete(fsys, "m/0004_d.sql")
	delete(fsys, "m/0003_c.sql")
	if _, err := migrate(ctx, db, d, fsys, "m", now); err == nil {
		t.Errorf("migrate with a database newer than the files: got no error, want one")
	}
}

func TestLoadMigrations_badNames(t *testing.T) {
	tests := []struct {
		name  string
		files []string
	}{
		{"no number", []string{"m/init.sql"}},
		{"no description", []string{"m/0001.sql"}},
		{"zero", []string{"m/0000_zero.sql"}},
		{"same version", []string{"m/0001_a.sql", "m/1_b.sql"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, f := range tt.files {
				fsys[f] = &fstest.MapFile{Data: []byte(`SELECT 1;`)}
			}
			if _, err := loadMigrations(fsys, "m"); err == nil {
				t.Errorf("loadMigrations(%v): got no error, want one", tt.files)
			}
		})
	}
}

func TestLoadMigrations_embedded(t *testing.T) {
	names := make(map[dialect][]string)
	for _, d := range []dialect{sqliteDialect, postgresDialect} {
		ms, err := loadMigrations(migrations, d.migrations())
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range ms {
			if m.version != i+1 {
				t.Errorf("%s migration %s has version %d, want %d: versions must run 1, 2, 3…", d, m.name, m.version, i+1)
			}
			names[d] = append(names[d], m.name)
		}
	}
	if got, want := names[postgresDialect], names[sqliteDialect]; !reflect.DeepEqual(got, want) {
		t.Errorf("postgres migrations %v, want the same files as sqlite's %v", got, want)
	}
}

// stmt is a statement with its arguments.
type stmt struct {
	sql  string
	args []any
}

// migratedBefore returns a fresh database of the kind, as Open takes it, with the migrations
// before version applied and then stmts run (written as for SQLite).
func migratedBefore(t *testing.T, kind string, version int, stmts []stmt) string {
	t.Helper()
	ctx := context.Background()
	name := testdsn.New(t, kind)
	d, dsnName := sqliteDialect, dsn(name, false)
	if kind == testdsn.Postgres {
		d, dsnName = postgresDialect, name
	}
	raw, err := sql.Open(testdsn.Driver(kind), dsnName)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	before := fstest.MapFS{}
	ms, err := loadMigrations(migrations, d.migrations())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version < version {
			before["m/"+m.name] = &fstest.MapFile{Data: []byte(m.sql)}
		}
	}
	if _, err := migrate(ctx, raw, d, before, "m", time.Now); err != nil {
		t.Fatal(err)
	}
	q := (&DB{dialect: d}).q
	for _, s := range stmts {
		if _, err := raw.ExecContext(ctx, q(s.sql), s.args...); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// Migration 0015 moves the open holds to open_holds and leaves the closed ones in holds: a
// hold open before it stays open, with its replica and checkpoint, and closes once; a closed
// one stays closed.
func TestMigrate_OpenHolds(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		name := migratedBefore(t, kind, 15, []stmt{
			{`INSERT INTO ledger_accounts (id, account_id, kind, balance, held) VALUES ('buyer:a', 'a', 'buyer', 1000, 100)`, nil},
			{`INSERT INTO holds (request_id, account_id, key_id, amount, windows, status, checkpoint, created_at, replica)
VALUES (?, 'a', 'k', 100, '', 'open', ?, 1700000000000, 'r1')`, []any{"req_open", `{"RequestID":"req_open"}`}},
			{`INSERT INTO holds (request_id, account_id, key_id, amount, windows, status, created_at, closed_at, replica)
VALUES ('req_done', 'a', 'k', 50, '', 'voided', 1700000000000, 1700000001000, '')`, nil},
		})
		db, err := Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		open, err := db.OpenHolds(ctx)
		if err != nil || len(open) != 1 || open[0].RequestID != "req_open" || open[0].Replica != "r1" ||
			open[0].Amount != 100 || open[0].Checkpoint == nil {
			t.Fatalf("open holds after the migration: %+v, %v; want req_open of r1, with its checkpoint", open, err)
		}
		errs := db.Settle(ctx, []*store.Settlement{{RequestID: "req_done"}, {RequestID: "req_open"}, {RequestID: "req_none"}})
		if !errors.Is(errs[0], store.ErrClosed) || errs[1] != nil || !errors.Is(errs[2], store.ErrNotFound) {
			t.Errorf("settle the closed, the open and an unknown hold: %v; want ErrClosed, nil, ErrNotFound", errs)
		}
		if open, err := db.OpenHolds(ctx); err != nil || len(open) != 0 {
			t.Errorf("open holds after voiding the last: %+v, %v; want none", open, err)
		}
		if errs := db.Settle(ctx, []*store.Settlement{{RequestID: "req_open"}}); !errors.Is(errs[0], store.ErrClosed) {
			t.Errorf("settle the voided hold again: %v; want ErrClosed", errs[0])
		}
		if b, err := db.Balance(ctx, "a"); err != nil || b.Held != 0 || b.Credits != 1000 {
			t.Errorf("balance %+v, %v; want nothing held, credits as they were", b, err)
		}
	})
}

// Migration 0016 keys receipts by request and job: the receipts stored before it are kept, a
// request's still listed in the order of its jobs, and storing one of them again changes
// nothing.
func TestMigrate_ReceiptsByRequest(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		ins := `INSERT INTO receipts (job_id, request_id, node_id, data, created_at) VALUES (?, ?, ?, ?, ?)`
		name := migratedBefore(t, kind, 16, []stmt{
			{ins, []any{"job_b", "req_1", "node_1", `{"job":"b"}`, 1700000001000}},
			{ins, []any{"job_a", "req_1", "node_2", `{"job":"a"}`, 1700000000000}},
			{ins, []any{"job_x", "req_2", "node_1", `{"job":"x"}`, 1700000000000}},
		})
		db, err := Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.InsertReceipts(ctx, []*store.Receipt{
			{RequestID: "req_1", JobID: "job_a", NodeID: "node_9", Signed: []byte(`{"dup":true}`), CreatedAt: time.UnixMilli(1700000000000)},
			{RequestID: "req_1", JobID: "job_c", NodeID: "node_3", Signed: []byte(`{"job":"c"}`), CreatedAt: time.UnixMilli(1700000002000)},
		}); err != nil {
			t.Fatal(err)
		}
		rs, err := db.Receipts(ctx, "req_1")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.JobID+" "+r.NodeID+" "+string(r.Signed))
		}
		want := []string{`job_a node_2 {"job":"a"}`, `job_b node_1 {"job":"b"}`, `job_c node_3 {"job":"c"}`}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("receipts of req_1 after the migration:\n got %q\nwant %q", got, want)
		}
		if rs, err := db.Receipts(ctx, "req_2"); err != nil || len(rs) != 1 || rs[0].JobID != "job_x" {
			t.Errorf("receipts of req_2: %v, %v; want job_x", rs, err)
		}
	})
}
