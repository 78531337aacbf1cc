// Package testdsn makes fresh, empty databases for tests of the store: a SQLite file in the
// test's temporary directory, or a PostgreSQL schema of its own in the database that
// SHAREAI_TEST_POSTGRES names. It serves sqlstore's own tests and sqlstoretest, which other
// packages' tests use.
//
// It imports only the standard library and the PostgreSQL driver, so that sqlstore's internal
// tests can import it.
package testdsn

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// Env is the environment variable that holds the URL of a PostgreSQL database for tests, e.g.
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. Tests on PostgreSQL are skipped
// when it is unset.
const Env = "SHAREAI_TEST_POSTGRES"

// Kinds of database.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Kinds returns every kind of database, PostgreSQL included whether or not Env is set.
func Kinds() []string { return []string{SQLite, Postgres} }

// PostgresURL returns the value of Env, and whether it is set.
func PostgresURL() (string, bool) {
	u := os.Getenv(Env)
	return u, u != ""
}

// SkipMessage says why tests on PostgreSQL do not run.
const SkipMessage = "PostgreSQL tests skipped: " + Env + " is unset (set it to a URL such as " +
	"postgres://postgres@127.0.0.1:5432/test?sslmode=disable)"

// Driver is the database/sql driver name of a kind.
func Driver(kind string) string {
	if kind == Postgres {
		return "pgx"
	}
	return "sqlite"
}

// New returns the name of a fresh, empty database of the kind, which sqlstore.Open accepts: the
// path of a SQLite file in t.TempDir(), or the URL of Env with search_path set to a new
// schema of a random name, dropped with everything in it when the test ends. It skips the test
// if kind is Postgres and Env is unset.
func New(t testing.TB, kind string) string {
	t.Helper()
	switch kind {
	case SQLite:
		return filepath.Join(t.TempDir(), "shareai.db")
	case Postgres:
		return newSchema(t)
	}
	t.Fatalf("testdsn: unknown kind of database %q, want %q or %q", kind, SQLite, Postgres)
	return ""
}

// newSchema creates a schema and returns Env's URL with search_path set to it.
func newSchema(t testing.TB) string {
	t.Helper()
	base, ok := PostgresURL()
	if !ok {
		t.Skip(SkipMessage)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("%s is not a postgres:// URL", Env)
	}
	b := make([]byte, 8)
	rand.Read(b)
	schema := "test_" + hex.EncodeToString(b)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()

	exec(t, base, `CREATE SCHEMA `+schema)
	t.Cleanup(func() { exec(t, base, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`) })
	return u.String()
}

// exec runs one statement on its own connection to dsn.
func exec(t testing.TB, dsn, stmt string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		t.Fatalf("%s: %s: %v", Env, stmt, err)
	}
}
