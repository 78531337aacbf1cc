package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Statements over many rows are cut into chunks of fixed sizes, the powers of two up to 64, so
// that the database sees few distinct query texts (each is prepared once per connection and
// cached by db.q) and a batch of n rows takes at most log2(n)+1 statements, not n.
var chunkSizes = []int{1, 2, 4, 8, 16, 32, 64}

// chunkSize is the size of the next chunk for n remaining rows: the largest size that fits, or
// for IN lists (pad), the smallest size that holds them all, up to 64.
func chunkSize(n int, pad bool) int {
	if pad {
		for _, s := range chunkSizes {
			if s >= n {
				return s
			}
		}
		return chunkSizes[len(chunkSizes)-1]
	}
	for i := len(chunkSizes) - 1; i >= 0; i-- {
		if chunkSizes[i] <= n {
			return chunkSizes[i]
		}
	}
	return 1
}

// placeholders returns n groups of width placeholders: "(?, ?), (?, ?)".
func placeholders(n, width int) string {
	group := "(" + strings.Repeat("?, ", width-1) + "?)"
	return strings.Repeat(group+", ", n-1) + group
}

// rows are the values of a multi-row INSERT, row after row: one slice, so that the
// statement's arguments are a part of it, not a copy of rows of their own. Its first row sets
// how many values each has.
type rows struct {
	width int
	args  []any
	n     int // the rows to make room for at the first
}

// newRows returns rows with room for n.
func newRows(n int) rows { return rows{n: n} }

// add appends a row, of as many values as the first.
func (r *rows) add(row ...any) {
	switch {
	case r.width == 0:
		r.width = len(row)
		r.args = make([]any, 0, r.width*max(r.n, 1))
	case len(row) != r.width:
		panic(fmt.Sprintf("sqlstore: a row of %d values where %d go", len(row), r.width))
	}
	r.args = append(r.args, row...)
}

// len returns the number of rows.
func (r rows) len() int {
	if r.width == 0 {
		return 0
	}
	return len(r.args) / r.width
}

// row returns row i's values.
func (r rows) row(i int) []any { return r.args[i*r.width : (i+1)*r.width] }

// insertRows runs head + " VALUES " + rows + " " + tail for chunks of rs. When scan is not nil
// the statement returns rows (tail has RETURNING), and scan reads each.
func (db *DB) insertRows(ctx context.Context, tx *sql.Tx, head, tail string, rs rows, scan func(*sql.Rows) error) error {
	for rs.len() > 0 {
		n := chunkSize(rs.len(), false)
		args := rs.args[:n*rs.width]
		q := head + " VALUES " + placeholders(n, rs.width) + " " + tail
		if scan == nil {
			if _, err := db.txExec(ctx, tx, q, args...); err != nil {
				return err
			}
		} else if err := db.queryEach(ctx, tx, q, args, scan); err != nil {
			return err
		}
		rs.args = rs.args[n*rs.width:]
	}
	return nil
}

// inChunks runs prefix + "(?, …)" + suffix for the values in chunks, padding the last chunk
// with its last value (a value twice in an IN list changes nothing). args come before the
// values. When scan is not nil the statement returns rows, and scan reads each.
func (db *DB) inChunks(ctx context.Context, tx *sql.Tx, prefix, suffix string, args []any, values []string, scan func(*sql.Rows) error) error {
	for len(values) > 0 {
		n := chunkSize(len(values), true)
		take := min(n, len(values))
		all := append([]any(nil), args...)
		for i := range n {
			all = append(all, values[min(i, take-1)])
		}
		q := prefix + "(" + strings.Repeat("?, ", n-1) + "?)" + suffix
		if scan == nil {
			if _, err := db.txExec(ctx, tx, q, all...); err != nil {
				return err
			}
		} else if err := db.queryEach(ctx, tx, q, all, scan); err != nil {
			return err
		}
		values = values[take:]
	}
	return nil
}

func (db *DB) queryEach(ctx context.Context, tx *sql.Tx, q string, args []any, scan func(*sql.Rows) error) error {
	rows, err := db.txQuery(ctx, tx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
