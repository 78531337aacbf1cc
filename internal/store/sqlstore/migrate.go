package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// migration is one numbered .sql file.
type migration struct {
	version int
	name    string // file name, for errors
	sql     string
}

// loadMigrations reads the files named NNNN_description.sql in dir of fsys, in version order.
// Other files are ignored.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	seen := make(map[int]string)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: name is not NNNN_description.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name is not NNNN_description.sql", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s: same version %d", other, name, v)
		}
		seen[v] = name
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies the migrations in dir of fsys that db has not recorded in schema_migrations,
// each in its own transaction that also records its version. It returns the versions it
// applied. It refuses a database that records a version it does not know, which a newer
// program wrote.
//
// Its own statements take no placeholders and use only portable SQL, so every dialect shares
// it; a dialect brings its own directory of migrations and the lock that begins each of its
// transactions (see [dialect.migrationLock]), so that programs starting at once neither race
// to create schema_migrations nor apply a migration twice.
func migrate(ctx context.Context, db *sql.DB, d dialect, fsys fs.FS, dir string, now func() time.Time) ([]int, error) {
	ms, err := loadMigrations(fsys, dir)
	if err != nil {
		return nil, err
	}
	err = migrationTx(ctx, db, d, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at BIGINT  NOT NULL
)`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create schema_migrations: %w", err)
	}
	var latest sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&latest); err != nil {
		return nil, fmt.Errorf("read schema version: %w", err)
	}
	if n := len(ms); latest.Valid && (n == 0 || latest.Int64 > int64(ms[n-1].version)) {
		return nil, fmt.Errorf("database schema version %d is newer than this program knows", latest.Int64)
	}
	var applied []int
	for _, m := range ms {
		ok, err := applyMigration(ctx, db, d, m, now())
		if err != nil {
			return applied, err
		}
		if ok {
			applied = append(applied, m.version)
		}
	}
	return applied, nil
}

// errSkip rolls back a migration transaction without failing.
var errSkip = errors.New("skip")

// migrationTx runs fn in a transaction that holds the dialect's migration lock, and commits
// it if fn returns nil.
func migrationTx(ctx context.Context, db *sql.DB, d dialect, fn func(tx *sql.Tx) error) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if lock := d.migrationLock(); lock != "" {
		if _, err := tx.ExecContext(ctx, lock); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// applyMigration applies m unless it is recorded, and reports whether it did. It checks inside
// the locked transaction, so two programs opening the database at once apply it once.
func applyMigration(ctx context.Context, db *sql.DB, d dialect, m migration, at time.Time) (bool, error) {
	err := migrationTx(ctx, db, d, func(tx *sql.Tx) error {
		var n int
		q := fmt.Sprintf(`SELECT COUNT(*) FROM schema_migrations WHERE version = %d`, m.version)
		if err := tx.QueryRowContext(ctx, q).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errSkip
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return err
		}
		q = fmt.Sprintf(`INSERT INTO schema_migrations (version, applied_at) VALUES (%d, %d)`, m.version, at.UnixMilli())
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("record version: %w", err)
		}
		return nil
	})
	switch {
	case errors.Is(err, errSkip):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("migration %s: %w", m.name, err)
	}
	return true, nil
}
