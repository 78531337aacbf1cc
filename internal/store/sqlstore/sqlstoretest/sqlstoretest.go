// Package sqlstoretest opens fresh sqlstore databases for other packages' tests, on SQLite and,
// when SHAREAI_TEST_POSTGRES names a database, on PostgreSQL:
//
//	for _, kind := range sqlstoretest.Kinds() {
//		t.Run(kind, func(t *testing.T) {
//			db := sqlstoretest.Open(t, kind) // skips on "postgres" when the variable is unset
//			…
//		})
//	}
//
// It is for tests only, and imports only sqlstore and what sqlstore imports.
package sqlstoretest

import (
	"context"
	"testing"

	"github.com/shareai/shareai/internal/store/sqlstore"
	"github.com/shareai/shareai/internal/store/sqlstore/internal/testdsn"
)

// Env is the environment variable holding the URL of the PostgreSQL database that tests use,
// e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable. Each test gets a schema of its
// own in it, dropped when the test ends.
const Env = testdsn.Env

// Kinds returns the kinds of database Open takes: "sqlite" and "postgres", the latter whether
// or not Env is set, so that its tests show as skipped rather than vanish.
func Kinds() []string { return testdsn.Kinds() }

// DSN returns the name of a fresh, empty database of the kind, as sqlstore.Open takes it,
// without opening it: a SQLite file in t.TempDir(), or Env's URL with search_path set to a new
// schema. It skips the test if kind is "postgres" and Env is unset.
func DSN(t testing.TB, kind string) string {
	t.Helper()
	return testdsn.New(t, kind)
}

// Open opens a fresh, migrated database of the kind, "sqlite" or "postgres", and closes it when
// the test ends. It skips the test if kind is "postgres" and Env is unset.
func Open(t testing.TB, kind string) *sqlstore.DB {
	t.Helper()
	db, err := sqlstore.Open(context.Background(), DSN(t, kind))
	if err != nil {
		t.Fatalf("open %s store: %v", kind, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
