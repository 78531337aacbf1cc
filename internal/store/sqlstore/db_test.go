package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"

	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore/internal/testdsn"
)

func TestOpen_connections(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		db, _ := openTestDB(t, kind)
		switch kind {
		case testdsn.SQLite:
			testSQLiteConnections(t, db)
		case testdsn.Postgres:
			testPostgresConnections(t, db)
		}
	})
}

func testSQLiteConnections(t *testing.T, db *DB) {
	ctx := context.Background()
	if db.dialect != sqliteDialect {
		t.Errorf("dialect = %v, want %v", db.dialect, sqliteDialect)
	}
	handles := []struct {
		name     string
		db       *sql.DB
		readOnly string
	}{
		{"writer", db.w, "0"},
		{"reader", db.r, "1"},
	}
	for _, h := range handles {
		tests := []struct {
			pragma string
			want   string
		}{
			{"journal_mode", "wal"},
			{"foreign_keys", "1"},
			{"busy_timeout", "5000"},
			{"synchronous", "1"}, // NORMAL
			{"query_only", h.readOnly},
		}
		for _, tt := range tests {
			t.Run(h.name+"/"+tt.pragma, func(t *testing.T) {
				var got string
				if err := h.db.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Errorf("PRAGMA %s = %q, want %q", tt.pragma, got, tt.want)
				}
			})
		}
	}
	if _, err := db.r.ExecContext(ctx, `INSERT INTO accounts (id, name, created_at) VALUES ('a', 'a', 0)`); err == nil {
		t.Errorf("insert through a reader: got no error, want one")
	}
}

func testPostgresConnections(t *testing.T, db *DB) {
	ctx := context.Background()
	if db.dialect != postgresDialect {
		t.Errorf("dialect = %v, want %v", db.dialect, postgresDialect)
	}
	if db.r != db.w {
		t.Errorf("reader and writer are different pools, want one")
	}
	if got := db.w.Stats().MaxOpenConnections; got != postgresConns {
		t.Errorf("MaxOpenConnections = %d, want %d", got, postgresConns)
	}
	// The tables are in the schema the DSN's search_path names, not in public. (Other tests'
	// schemas hold tables of the same names at the same time.)
	var current string
	if err := db.r.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&current); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.r.QueryRowContext(ctx,
		`SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'accounts' AND table_schema = current_schema()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 || current == "public" {
		t.Errorf("accounts is not in the test's own schema %q", current)
	}
	if err := db.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

func TestOpen_concurrent(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		dsn := testdsn.New(t, kind)
		const opens = 4
		var (
			wg   sync.WaitGroup
			errs = make(chan error, opens)
			dbs  = make(chan *DB, opens)
		)
		for range opens {
			wg.Go(func() {
				db, err := Open(ctx, dsn)
				if err != nil {
					errs <- err
					return
				}
				dbs <- db
			})
		}
		wg.Wait()
		close(errs)
		close(dbs)
		for err := range errs {
			t.Errorf("Open: %v", err)
		}
		var db *DB
		for d := range dbs {
			t.Cleanup(func() { d.Close() })
			db = d
		}
		if db == nil {
			t.Fatal("no Open succeeded")
		}
		ms, err := loadMigrations(migrations, db.dialect.migrations())
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != len(ms) {
			t.Errorf("schema_migrations has %d rows, want %d", n, len(ms))
		}
	})
}

func TestDBError(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		insert := func(id, name string) error {
			_, err := db.w.ExecContext(ctx, db.q(`INSERT INTO accounts (id, name, created_at) VALUES (?, ?, 0)`), id, name)
			return dbError(err)
		}
		if err := insert("acct_1", "alice"); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			err  func() error
			want error
		}{
			{"unique", func() error { return insert("acct_2", "alice") }, store.ErrConflict},
			{"primary key", func() error { return insert("acct_1", "bob") }, store.ErrConflict},
			{"foreign key", func() error {
				_, err := db.w.ExecContext(ctx, db.q(`INSERT INTO providers (account_id, created_at) VALUES (?, 0)`), "acct_x")
				return dbError(err)
			}, store.ErrNotFound},
			{"other", func() error {
				_, err := db.w.ExecContext(ctx, db.q(`INSERT INTO nowhere (x) VALUES (?)`), 1)
				return dbError(err)
			}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := tt.err()
				if err == nil {
					t.Fatal("got no error, want one")
				}
				if tt.want != nil && !errors.Is(err, tt.want) {
					t.Errorf("got %v, want %v", err, tt.want)
				}
				if tt.want == nil && (errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound)) {
					t.Errorf("got %v, want neither conflict nor not found", err)
				}
				var (
					se *sqlite.Error
					pe *pgconn.PgError
				)
				if !errors.As(err, &se) && !errors.As(err, &pe) {
					t.Errorf("%v (%T) does not keep the driver's error in its chain", err, errors.Unwrap(err))
				}
			})
		}
	})
}

func TestDB_writeRollsBack(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		boom := errors.New("boom")
		err := db.write(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, db.q(`INSERT INTO accounts (id, name, created_at) VALUES (?, ?, 0)`), "acct_1", "alice"); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("write: got %v, want %v", err, boom)
		}
		var n int
		if err := db.r.QueryRowContext(ctx, db.q(`SELECT COUNT(*) FROM accounts WHERE id = ?`), "acct_1").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d accounts after a failed write, want 0", n)
		}
	})
}

// The conditional update and SELECT … FOR UPDATE keep concurrent read-modify-writes whole on
// both databases.
func TestDB_forUpdate(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		if _, err := db.w.ExecContext(ctx, db.q(`INSERT INTO accounts (id, name, created_at) VALUES (?, ?, 0)`), "acct_1", "alice"); err != nil {
			t.Fatal(err)
		}
		const writers, each = 8, 10
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					err := db.write(ctx, func(tx *sql.Tx) error {
						var created int64
						if err := tx.QueryRowContext(ctx,
							db.q(`SELECT created_at FROM accounts WHERE id = ?`+db.forUpdate()), "acct_1").Scan(&created); err != nil {
							return err
						}
						_, err := tx.ExecContext(ctx, db.q(`UPDATE accounts SET created_at = ? WHERE id = ?`), created+1, "acct_1")
						return err
					})
					if err != nil {
						errs <- fmt.Errorf("writer %d, step %d: %w", w, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		var got int64
		if err := db.r.QueryRowContext(ctx, db.q(`SELECT created_at FROM accounts WHERE id = ?`), "acct_1").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != writers*each {
			t.Errorf("counter = %d after %d increments, want %d: lost updates", got, writers*each, writers*each)
		}
	})
}
