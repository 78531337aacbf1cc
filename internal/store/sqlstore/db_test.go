package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

func TestOpen_connections(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	handles := []struct {
		name     string
		db       *sql.DB
		readOnly string
	}{
		{"writer", db.w, "0"},
		{"reader", db.r, "1"},
	}
	for _, h := range handles {
		tests := []struct {
			pragma string
			want   string
		}{
			{"journal_mode", "wal"},
			{"foreign_keys", "1"},
			{"busy_timeout", "5000"},
			{"synchronous", "1"}, // NORMAL
			{"query_only", h.readOnly},
		}
		for _, tt := range tests {
			t.Run(h.name+"/"+tt.pragma, func(t *testing.T) {
				var got string
				if err := h.db.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Errorf("PRAGMA %s = %q, want %q", tt.pragma, got, tt.want)
				}
			})
		}
	}
	if _, err := db.r.ExecContext(ctx, `INSERT INTO accounts (id, name, created_at) VALUES ('a', 'a', 0)`); err == nil {
		t.Errorf("insert through a reader: got no error, want one")
	}
}
