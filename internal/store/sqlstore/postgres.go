package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// PostgreSQL's SQLSTATE codes that dbError gives a meaning.
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
)

// postgresConns is the size of the PostgreSQL pool, open and idle.
const postgresConns = 32

// isPostgres reports whether dsn names a PostgreSQL database rather than a SQLite file.
func isPostgres(dsn string) bool {
	scheme, _, ok := strings.Cut(dsn, "://")
	return ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"))
}

// openPostgres opens the PostgreSQL database at the URL dsn through one pool that both reads
// and writes.
func openPostgres(ctx context.Context, dsn string) (*DB, error) {
	name := redact(dsn)
	pool, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	pool.SetMaxOpenConns(postgresConns)
	pool.SetMaxIdleConns(postgresConns)
	db := &DB{w: pool, r: pool, dialect: postgresDialect, now: time.Now}
	if err := pool.PingContext(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	if _, err := migrate(ctx, pool, db.dialect, migrations, db.dialect.migrations(), db.now); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	return db, nil
}

// redact is dsn for messages: without its password, or without its query and user if it does
// not parse.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		scheme, _, _ := strings.Cut(dsn, "://")
		return scheme + "://…"
	}
	return u.Redacted()
}
