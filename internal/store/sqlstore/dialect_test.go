package sqlstore

import (
	"strings"
	"testing"
)

func TestRebind(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"none", `SELECT 1`, `SELECT 1`},
		{"one", `SELECT * FROM a WHERE id = ?`, `SELECT * FROM a WHERE id = $1`},
		{"many", `INSERT INTO a VALUES (?, ?, ?)`, `INSERT INTO a VALUES ($1, $2, $3)`},
		{"ten and more", strings.Repeat("?,", 11) + "?", "$1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12"},
		{"in a string", `SELECT '?' , ? FROM a WHERE b = 'x?y'`, `SELECT '?' , $1 FROM a WHERE b = 'x?y'`},
		{"doubled quote", `SELECT 'it''s ?', ?`, `SELECT 'it''s ?', $1`},
		{"identifier", `SELECT "odd?" FROM a WHERE b = ?`, `SELECT "odd?" FROM a WHERE b = $1`},
		{"line comment", "SELECT ? -- why?\nFROM a WHERE b = ?", "SELECT $1 -- why?\nFROM a WHERE b = $2"},
		{"block comment", `SELECT ? /* why? */ FROM a WHERE b = ?`, `SELECT $1 /* why? */ FROM a WHERE b = $2`},
		{"unterminated string", `SELECT ? WHERE a = 'x?`, `SELECT $1 WHERE a = 'x?`},
		{"unterminated comment", `SELECT ? /* x?`, `SELECT $1 /* x?`},
		{"minus", `SELECT ? - ?`, `SELECT $1 - $2`},
		{"divide", `SELECT ? / ?`, `SELECT $1 / $2`},
		{"utf-8", `SELECT 'é?', ?`, `SELECT 'é?', $1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rebind(tt.in); got != tt.want {
				t.Errorf("rebind(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestDB_q(t *testing.T) {
	const query = `SELECT a FROM b WHERE c = ? AND d = '?'`
	tests := []struct {
		dialect       dialect
		want          string
		wantForUpdate string
	}{
		{sqliteDialect, query, ""},
		{postgresDialect, `SELECT a FROM b WHERE c = $1 AND d = '?'`, " FOR UPDATE"},
	}
	for _, tt := range tests {
		t.Run(tt.dialect.String(), func(t *testing.T) {
			db := &DB{dialect: tt.dialect}
			for range 2 { // the second from the memo
				if got := db.q(query); got != tt.want {
					t.Errorf("q(%q) = %q, want %q", query, got, tt.want)
				}
			}
			if got := db.forUpdate(); got != tt.wantForUpdate {
				t.Errorf("forUpdate() = %q, want %q", got, tt.wantForUpdate)
			}
		})
	}
}

func BenchmarkDB_q(b *testing.B) {
	db := &DB{dialect: postgresDialect}
	const query = `SELECT id, account_id, kind, name, prefix, hash, created_at, revoked_at FROM api_keys WHERE hash = ?`
	b.ReportAllocs()
	for b.Loop() {
		db.q(query)
	}
}

func TestIsPostgres(t *testing.T) {
	tests := []struct {
		dsn  string
		want bool
	}{
		{"postgres://u@h/db", true},
		{"postgresql://u@h:5432/db?sslmode=disable", true},
		{"POSTGRES://u@h/db", true},
		{"/var/lib/shareai/coordinator.db", false},
		{"coordinator.db", false},
		{"data/postgres/x.db", false},
		{"file:x.db", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := isPostgres(tt.dsn); got != tt.want {
			t.Errorf("isPostgres(%q) = %v, want %v", tt.dsn, got, tt.want)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		dsn, want string
	}{
		{"postgres://u:secret@h/db?sslmode=disable", "postgres://u:xxxxx@h/db?sslmode=disable"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://u:secret@h:bad port/db", "postgres://…"},
	}
	for _, tt := range tests {
		if got := redact(tt.dsn); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.dsn, got, tt.want)
		}
	}
}
