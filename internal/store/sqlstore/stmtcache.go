package sqlstore

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStmts bounds the statements kept prepared on SQLite's writer connection.
const maxCachedStmts = 512

// stmtCache keeps SQLite statements prepared on the writer connection: preparing (parsing and
// planning) costs more than running most of our statements. A statement first runs unprepared
// inside its transaction and is prepared after the transaction ends, when the one writer
// connection is free again. PostgreSQL needs none of this: pgx prepares and caches statements
// on each connection itself.
type stmtCache struct {
	mu     sync.Mutex
	ready  map[string]*sql.Stmt
	wanted map[string]bool
}

func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.ready[query]; st != nil {
		return st
	}
	if len(c.ready)+len(c.wanted) < maxCachedStmts {
		if c.wanted == nil {
			c.wanted = map[string]bool{}
		}
		c.wanted[query] = true
	}
	return nil
}

// prepare prepares the statements wanted since last time. Call it outside transactions.
func (c *stmtCache) prepare(ctx context.Context, w *sql.DB) {
	c.mu.Lock()
	wanted := c.wanted
	c.wanted = nil
	c.mu.Unlock()
	for q := range wanted {
		st, err := w.PrepareContext(ctx, q)
		if err != nil {
			continue // it runs unprepared, as before
		}
		c.mu.Lock()
		if c.ready == nil {
			c.ready = map[string]*sql.Stmt{}
		}
		c.ready[q] = st
		c.mu.Unlock()
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.ready {
		st.Close()
	}
	c.ready = nil
}

// stmt returns query, rebound, prepared for tx when it can be.
func (db *DB) stmt(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, string) {
	q := db.q(query)
	if db.dialect != sqliteDialect {
		return nil, q
	}
	if st := db.stmts.get(q); st != nil {
		return tx.StmtContext(ctx, st), q
	}
	return nil, q
}

// txExec runs a statement written with ? placeholders in tx.
func (db *DB) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st, q := db.stmt(ctx, tx, query); st == nil {
		return tx.ExecContext(ctx, q, args...)
	} else {
		return st.ExecContext(ctx, args...)
	}
}

// txQuery runs a query written with ? placeholders in tx.
func (db *DB) txQuery(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if st, q := db.stmt(ctx, tx, query); st == nil {
		return tx.QueryContext(ctx, q, args...)
	} else {
		return st.QueryContext(ctx, args...)
	}
}

// txQueryRow runs a query of one row written with ? placeholders in tx.
func (db *DB) txQueryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	if st, q := db.stmt(ctx, tx, query); st == nil {
		return tx.QueryRowContext(ctx, q, args...)
	} else {
		return st.QueryRowContext(ctx, args...)
	}
}
