// Package sqlstore implements [store.Store] on SQLite, through the pure-Go driver
// modernc.org/sqlite (no cgo), and on PostgreSQL, through pgx's database/sql driver
// (github.com/jackc/pgx/v5/stdlib). [Open] picks the database by its argument: a postgres:// or
// postgresql:// URL is PostgreSQL, anything else a SQLite file. The schema lives in numbered
// .sql migrations embedded from migrations/<dialect>/, one directory per database with the same
// numbers, and applied on Open.
//
// Both databases run the same code and the same queries, with a small dialect layer
// (dialect.go):
//   - Write each query once, with '?' placeholders, in SQL both databases accept, and pass it
//     through db.q, which numbers the placeholders $1, $2, … on PostgreSQL.
//   - Where the SQL must differ, ask db.dialect, or a helper such as db.forUpdate.
//   - Write through db.write (or db.w), read through db.r; on PostgreSQL they are one pool.
//   - Money writes are safe under concurrency by construction: on SQLite every write
//     transaction is BEGIN IMMEDIATE and so runs alone; on PostgreSQL, whose transactions are
//     READ COMMITTED and run side by side, a balance changes through a conditional update
//     (UPDATE … SET balance = balance - ? WHERE … AND balance >= ?, checking the rows
//     affected) or after reading it with SELECT … FOR UPDATE (db.forUpdate), never by trusting
//     the isolation level alone.
//
// It must not import coordinator packages other than store: the ledger, gateway and the rest
// depend on the store interface, never the other way round.
package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/shareai/shareai/internal/store"
)

//go:embed migrations
var migrations embed.FS

// DB is the coordinator's store.
//
// On SQLite it is one file. It writes through one connection, so writers queue in the process
// instead of fighting over the file's lock, and reads through a pool of read-only connections
// that WAL lets run beside the writer.
//
// On PostgreSQL it is one pool of connections that both reads and writes.
type DB struct {
	w       *sql.DB // SQLite: one connection, transactions are BEGIN IMMEDIATE; PostgreSQL: the pool
	r       *sql.DB // SQLite: read-only pool; PostgreSQL: the same pool as w
	dialect dialect
	rebound sync.Map // query → query rebound to the dialect; see q
	now     func() time.Time
	name    string // for messages: the file, or the URL without its password
	stmts   stmtCache
	// ensured holds the ids of the ledger accounts known to exist, committed: a settlement
	// skips the insert that would create them. Ledger accounts are never deleted.
	ensured sync.Map
	// pending are the lazy holds not written yet (SQLite only), and lazyMu orders the
	// decisions on them against the commits: pending.go.
	pending   pendingHolds
	lazyMu    sync.Mutex
	readStmts sync.Map // query → *sql.Stmt prepared on r, for placeLazy
	// SQLite, by lazyMu: the write transactions committed, placeLazy's reads kept until the
	// next (funds.go), the ids of the requests held lately, and those the running write
	// transaction holds (placeHolds), which join them when it commits.
	commits uint64
	funds   fundsCache
	held    heldIDs
	placing []string
	// SQLite: the WAL's checkpoints (checkpoints), stopped by Close.
	stopCheckpoints, checkpointsDone chan struct{}
	stopOnce                         sync.Once
}

// String names the database for logs, never with a password.
func (db *DB) String() string { return db.name }

var _ store.Store = (*DB)(nil)

// Open opens the database named by dsn and applies the migrations it lacks. A dsn that begins
// with postgres:// or postgresql:// is a PostgreSQL connection URL, as pgx reads it; anything
// else is the path of a SQLite file, created if needed.
func Open(ctx context.Context, dsn string) (*DB, error) {
	var (
		db  *DB
		err error
	)
	if isPostgres(dsn) {
		db, err = openPostgres(ctx, dsn)
	} else {
		db, err = openSQLite(ctx, dsn)
	}
	if err != nil {
		return nil, err
	}
	db.name = "sqlite:" + dsn
	if isPostgres(dsn) {
		db.name = redact(dsn)
	}
	return db, nil
}

// openSQLite opens the SQLite file at path.
func openSQLite(ctx context.Context, path string) (*DB, error) {
	w, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	db := &DB{w: w, dialect: sqliteDialect, now: time.Now, held: newHeldIDs(time.Now())}
	if err := pingSQLite(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if _, err := migrate(ctx, w, db.dialect, migrations, db.dialect.migrations(), db.now); err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	n := max(4, runtime.NumCPU())
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	db.r = r
	if err := r.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.stopCheckpoints, db.checkpointsDone = make(chan struct{}), make(chan struct{})
	go db.checkpoints()
	return db, nil
}

// checkpointEvery is how often the WAL is checkpointed into the database file. The writer
// connection never checkpoints (wal_autocheckpoint 0): SQLite's automatic checkpoint runs in
// the commit that crosses 1,000 pages, and a commit that copies 4 MB into the database file
// and syncs it holds up the writes queued behind it, and the holds waiting for its commit.
// A checkpoint copies each page once however many commits wrote it since the last, and the
// settlements write the same few pages again and again (the ends of the indexes, the buyers'
// and the fees' rows): every second rather than every 200 ms, a settled request costs 10%
// less CPU (BenchmarkHoldSettle, SQLite, 50 at a time), for a WAL of a few MB at full load.
const checkpointEvery = time.Second

// checkpoints checkpoints the WAL every checkpointEvery, on a reader connection, beside the
// writer (PASSIVE: it copies what no reader still needs and waits for no one), until Close.
func (db *DB) checkpoints() {
	defer close(db.checkpointsDone)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-db.stopCheckpoints:
			return
		case <-t.C:
			// A checkpoint that fails (the disk full) leaves the WAL to grow until the next
			// one succeeds; the writes themselves report the disk.
			var busy, pages, copied int
			db.r.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &pages, &copied)
		}
	}
}

// pingSQLite connects to the database. Two programs opening a new file at once race to turn
// on its WAL journal, and SQLite answers the loser SQLITE_BUSY at once, without waiting for the
// busy timeout: it retries for a while.
func pingSQLite(ctx context.Context, db *sql.DB) error {
	for attempt := 0; ; attempt++ {
		err := db.PingContext(ctx)
		var se *sqlite.Error
		if err == nil || attempt == 50 || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dsn is the driver's name for the file at path with our pragmas.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	if readOnly {
		q.Set("_query_only", "1") // the driver applies it after the pragmas above
	} else {
		q.Set("_txlock", "immediate")
		q.Add("_pragma", "wal_autocheckpoint(0)") // the checkpoints run beside it: DB.checkpoints
		// A statement that writes many rows keeps a journal of the pages it changes, to undo
		// itself alone; in memory, not in a temporary file written and removed each time.
		q.Add("_pragma", "temp_store(MEMORY)")
	}
	// A URI, so that a path holding '?' or '#' still names the file.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return "file:" + esc.Replace(filepath.ToSlash(filepath.Clean(path))) + "?" + q.Encode()
}

// Ping checks that both the writer and the readers answer.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.w.PingContext(ctx); err != nil {
		return fmt.Errorf("ping writer: %w", err)
	}
	if db.r == db.w {
		return nil
	}
	if err := db.r.PingContext(ctx); err != nil {
		return fmt.Errorf("ping readers: %w", err)
	}
	return nil
}

// Close closes the database.
func (db *DB) Close() error {
	if db.stopCheckpoints != nil {
		db.stopOnce.Do(func() { close(db.stopCheckpoints) })
		<-db.checkpointsDone
	}
	db.stmts.close()
	db.readStmts.Range(func(_, st any) bool {
		st.(*sql.Stmt).Close()
		return true
	})
	var errs []error
	if db.r != nil && db.r != db.w {
		errs = append(errs, db.r.Close())
	}
	errs = append(errs, db.w.Close())
	return errors.Join(errs...)
}

// write runs fn in a write transaction and commits it if fn returns nil. On SQLite the
// transaction is BEGIN IMMEDIATE and runs alone, and commits under lazyMu with its changes to
// the pending holds (pending.go); on PostgreSQL it is READ COMMITTED and runs beside others, so
// fn locks what it reads to change (see the package comment).
func (db *DB) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return db.writeTx(ctx, false, fn)
}

// writeTx is write; with deciding, a transaction that decides holds against the balance and
// caps (placeHolds, RaiseHold) holds lazyMu from its start on SQLite, so that no lazy hold is
// placed meanwhile.
func (db *DB) writeTx(ctx context.Context, deciding bool, fn func(tx *sql.Tx) error) (err error) {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if db.dialect == sqliteDialect {
		locked := deciding
		if locked {
			db.lazyMu.Lock()
		}
		returned := false // not when fn panics: then it rolls back
		defer func() {
			if !locked {
				db.lazyMu.Lock()
			}
			if returned && err == nil {
				err = tx.Commit()
			} else {
				tx.Rollback()
			}
			committed := returned && err == nil
			db.pending.end(committed)
			if committed {
				db.commits++
				for _, id := range db.placing {
					db.held.add(id, time.Now())
				}
			}
			db.placing = db.placing[:0]
			db.lazyMu.Unlock()
			db.stmts.prepare(ctx, db.w) // the writer connection is free again
		}()
		err = fn(tx)
		returned = true
		return err
	}
	if err = fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// writeRetrying is write for a transaction that may lose to another in a deadlock, or a
// serialization failure, on PostgreSQL: it is run again, up to three times in all. fn must
// leave nothing behind that a second run would add to. deciding is writeTx's.
func (db *DB) writeRetrying(ctx context.Context, deciding bool, fn func(tx *sql.Tx) error) error {
	var err error
	for range 3 {
		if err = db.writeTx(ctx, deciding, fn); !retryable(err) {
			return err
		}
	}
	return err
}

// retryable says whether err is a PostgreSQL deadlock or serialization failure, which the
// database resolved by aborting this transaction.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// dbError gives err the store's meaning: a UNIQUE or PRIMARY KEY violation is
// [store.ErrConflict], a FOREIGN KEY violation is [store.ErrNotFound] (of what the row refers
// to), anything else is itself. The result keeps err in its chain.
func dbError(err error) error {
	var (
		se *sqlite.Error
		pe *pgconn.PgError
	)
	switch {
	case errors.As(err, &se):
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %w", store.ErrConflict, err)
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return fmt.Errorf("%w: %w", store.ErrNotFound, err)
		}
	case errors.As(err, &pe):
		switch pe.Code {
		case pgUniqueViolation:
			return fmt.Errorf("%w: %w", store.ErrConflict, err)
		case pgForeignKeyViolation:
			return fmt.Errorf("%w: %w", store.ErrNotFound, err)
		}
	}
	return err
}

// notFound turns sql.ErrNoRows into store.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// Times are stored as unix milliseconds and read back in UTC.

func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// nullMillis stores the zero time as NULL.
func nullMillis(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

func fromNullMillis(ms sql.NullInt64) time.Time {
	if !ms.Valid {
		return time.Time{}
	}
	return fromMillis(ms.Int64)
}

// Durations are stored as microseconds.

func micros(d time.Duration) int64 { return d.Microseconds() }

func fromMicros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
