package sqlstore

import "strconv"

// dialect is the SQL database a DB talks to. Queries are written once, in the SQL both accept,
// with '?' placeholders, and pass through [DB.q]; the few statements that must differ ask
// db.dialect or a helper such as [DB.forUpdate].
type dialect int

const (
	sqliteDialect dialect = iota
	postgresDialect
)

func (d dialect) String() string {
	switch d {
	case sqliteDialect:
		return "sqlite"
	case postgresDialect:
		return "postgres"
	}
	return "dialect(" + strconv.Itoa(int(d)) + ")"
}

// migrations is the directory of the dialect's migrations in the embedded files.
func (d dialect) migrations() string {
	if d == postgresDialect {
		return "migrations/postgres"
	}
	return "migrations/sqlite"
}

// migrationLock is the statement that begins each migration transaction, so that programs
// opening the database at once apply each migration once; empty if the transaction needs
// none. SQLite's write transactions are BEGIN IMMEDIATE and already serialize; PostgreSQL's
// take a transaction-level advisory lock, released at commit or rollback.
func (d dialect) migrationLock() string {
	if d == postgresDialect {
		return `SELECT pg_advisory_xact_lock(` + strconv.FormatInt(migrationLockKey, 10) + `)`
	}
	return ""
}

// migrationLockKey names the advisory lock of the migration runner ("shareai\x00" in ASCII).
const migrationLockKey = 0x7368617265616900

// q returns query, written with '?' placeholders, in the database's dialect: unchanged on
// SQLite, with $1, $2, … on PostgreSQL. Every query goes through it:
//
//	db.r.QueryRowContext(ctx, db.q(`SELECT name FROM accounts WHERE id = ?`), id)
//
// The rebound text is remembered per query, so pass a query built from constant pieces, not
// one that embeds values or a list of varying length.
func (db *DB) q(query string) string {
	if db.dialect != postgresDialect {
		return query
	}
	if s, ok := db.rebound.Load(query); ok {
		return s.(string)
	}
	s := rebind(query)
	db.rebound.Store(query, s)
	return s
}

// forUpdate is the suffix of a SELECT inside a write transaction that locks the rows it reads
// until the transaction ends: " FOR UPDATE" on PostgreSQL, "" on SQLite, whose write
// transactions (BEGIN IMMEDIATE) already hold the database's one write lock.
//
//	tx.QueryRowContext(ctx, db.q(`SELECT balance FROM balances WHERE account_id = ?`+db.forUpdate()), id)
func (db *DB) forUpdate() string {
	if db.dialect == postgresDialect {
		return " FOR UPDATE"
	}
	return ""
}

// rebind numbers the '?' placeholders of query $1, $2, … It leaves alone a '?' inside a
// single-quoted string, a double-quoted identifier or a comment.
func rebind(query string) string {
	b := make([]byte, 0, len(query)+16)
	n := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '?':
			n++
			b = append(b, '$')
			b = strconv.AppendInt(b, int64(n), 10)
			continue
		case c == '\'' || c == '"':
			// Copy through the closing quote; a doubled quote inside ('it''s') closes and
			// reopens, which copies the same bytes.
			j := i + 1
			for j < len(query) && query[j] != c {
				j++
			}
			b = append(b, query[i:min(j+1, len(query))]...)
			i = j
			continue
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			j := i
			for j < len(query) && query[j] != '\n' {
				j++
			}
			b = append(b, query[i:j]...)
			i = j - 1
			continue
		case c == '/' && i+1 < len(query) && query[i+1] == '*':
			j := i + 2
			for j+1 < len(query) && !(query[j] == '*' && query[j+1] == '/') {
				j++
			}
			end := min(j+2, len(query))
			b = append(b, query[i:end]...)
			i = end - 1
			continue
		}
		b = append(b, c)
	}
	return string(b)
}
