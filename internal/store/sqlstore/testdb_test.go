package sqlstore

import (
	"context"
	"sync"
	"testing"

	"github.com/shareai/shareai/internal/store/sqlstore/internal/testdsn"
)

// Tests run on every database at hand: SQLite always, PostgreSQL when SHAREAI_TEST_POSTGRES
// names one (see testdsn). Each gets a fresh database of its own.

var logSkipOnce sync.Once

// testKinds returns the kinds of database to test on: "sqlite", and "postgres" when
// SHAREAI_TEST_POSTGRES is set. It logs, once per run, that PostgreSQL is skipped otherwise.
func testKinds(t testing.TB) []string {
	t.Helper()
	if _, ok := testdsn.PostgresURL(); ok {
		return testdsn.Kinds()
	}
	logSkipOnce.Do(func() { t.Log(testdsn.SkipMessage) })
	return []string{testdsn.SQLite}
}

// namedDB is a fresh database of one kind.
type namedDB struct {
	name string // the kind: "sqlite" or "postgres"
	dsn  string // as Open takes it, to open it again
	db   *DB
}

// testDBs opens a fresh database of each kind that testKinds returns, closed when the test
// ends.
func testDBs(t testing.TB) []namedDB {
	t.Helper()
	var dbs []namedDB
	for _, kind := range testKinds(t) {
		db, dsn := openTestDB(t, kind)
		dbs = append(dbs, namedDB{name: kind, dsn: dsn, db: db})
	}
	return dbs
}

// forEachDB runs fn in a subtest named after the kind, on a fresh database of each kind.
func forEachDB(t *testing.T, fn func(t *testing.T, db *DB)) {
	t.Helper()
	forEachKind(t, func(t *testing.T, kind string) {
		db, _ := openTestDB(t, kind)
		fn(t, db)
	})
}

// forEachKind runs fn in a subtest named after the kind, for each kind testKinds returns.
func forEachKind(t *testing.T, fn func(t *testing.T, kind string)) {
	t.Helper()
	for _, kind := range testKinds(t) {
		t.Run(kind, func(t *testing.T) { fn(t, kind) })
	}
}

// openTestDB opens a fresh database of the kind, closed when the test ends, and returns it
// with the name it was opened by.
func openTestDB(t testing.TB, kind string) (*DB, string) {
	t.Helper()
	dsn := testdsn.New(t, kind)
	db, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", kind, err)
	}
	t.Cleanup(func() { db.Close() })
	return db, dsn
}

// For the external tests (package sqlstore_test), which cannot see the names above.

// ForEachDB runs fn in a subtest per kind of database, "sqlite" and, when
// SHAREAI_TEST_POSTGRES is set, "postgres", each on a fresh database.
func ForEachDB(t *testing.T, fn func(t *testing.T, db *DB)) { forEachDB(t, fn) }

// ForEachKind runs fn in a subtest per kind of database, as ForEachDB, without opening one.
func ForEachKind(t *testing.T, fn func(t *testing.T, kind string)) { forEachKind(t, fn) }

// OpenTestDB opens a fresh database of the kind, closed when the test ends, and returns it
// with the name it was opened by.
func OpenTestDB(t testing.TB, kind string) (*DB, string) { return openTestDB(t, kind) }
