package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/shareai/shareai/internal/store"
)

// nodeColumns are the columns scanNode reads, in its order.
const nodeColumns = `id, account_id, public_key, name, region, engine, agent, hardware, offers,
	first_seen, last_seen, overclaims, fingerprint, hardware_changed_at, windows, timezone,
	level, level_reason, level_changed_at, score`

// UpsertNode inserts the node, or updates everything of it but ID, PublicKey and FirstSeen.
// It never writes the level or the score (trust.go does): a new node starts at level new with
// no score, and registering again leaves them as they were.
// store.ErrConflict if another node has its public key, store.ErrNotFound if its account does
// not exist.
func (db *DB) UpsertNode(ctx context.Context, n *store.Node) error {
	_, err := db.w.ExecContext(ctx, db.q(`
INSERT INTO nodes (id, account_id, public_key, name, region, engine, agent, hardware, offers,
	first_seen, last_seen, fingerprint, hardware_changed_at, windows, timezone)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
	account_id          = excluded.account_id,
	name                = excluded.name,
	region              = excluded.region,
	engine              = excluded.engine,
	agent               = excluded.agent,
	hardware            = excluded.hardware,
	offers              = excluded.offers,
	last_seen           = excluded.last_seen,
	fingerprint         = excluded.fingerprint,
	hardware_changed_at = excluded.hardware_changed_at,
	windows             = excluded.windows,
	timezone            = excluded.timezone`),
		n.ID, n.AccountID, n.PublicKey, n.Name, n.Region, n.Engine, n.Agent,
		jsonText(n.Hardware), jsonText(n.Offers), millis(n.FirstSeen), millis(n.LastSeen),
		n.Fingerprint, nullMillis(n.HardwareChangedAt), n.Windows, n.Timezone)
	if err != nil {
		return fmt.Errorf("upsert node %s: %w", n.ID, dbError(err))
	}
	return nil
}

// Node returns a node by id; store.ErrNotFound.
func (db *DB) Node(ctx context.Context, id string) (*store.Node, error) {
	n, err := scanNode(db.r.QueryRowContext(ctx, db.q(`SELECT `+nodeColumns+` FROM nodes WHERE id = ?`), id))
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", id, notFound(err))
	}
	return n, nil
}

// NodesOf lists a provider account's nodes, by name then id.
func (db *DB) NodesOf(ctx context.Context, accountID string) ([]*store.Node, error) {
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT `+nodeColumns+` FROM nodes
WHERE account_id = ? ORDER BY name, id`), accountID)
	if err != nil {
		return nil, fmt.Errorf("nodes of %s: %w", accountID, err)
	}
	defer rows.Close()
	var ns []*store.Node
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, fmt.Errorf("nodes of %s: %w", accountID, err)
		}
		ns = append(ns, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("nodes of %s: %w", accountID, err)
	}
	return ns, nil
}

// scanNode reads one row of nodeColumns.
func scanNode(row interface{ Scan(...any) error }) (*store.Node, error) {
	var (
		n               store.Node
		hardware, offer sql.NullString
		first, last     int64
		changed         sql.NullInt64
		levelChanged    sql.NullInt64
		score           sql.NullFloat64
	)
	if err := row.Scan(&n.ID, &n.AccountID, &n.PublicKey, &n.Name, &n.Region, &n.Engine, &n.Agent,
		&hardware, &offer, &first, &last, &n.Overclaims,
		&n.Fingerprint, &changed, &n.Windows, &n.Timezone,
		&n.Level, &n.LevelReason, &levelChanged, &score); err != nil {
		return nil, err
	}
	n.Hardware = fromJSONText(hardware)
	n.Offers = fromJSONText(offer)
	n.FirstSeen = fromMillis(first)
	n.LastSeen = fromMillis(last)
	n.HardwareChangedAt = fromNullMillis(changed)
	n.LevelChangedAt = fromNullMillis(levelChanged)
	n.Score = score.Float64 // 0 when never computed (NULL)
	return &n, nil
}

// TouchNodes sets LastSeen of the nodes to at, in one transaction. Unknown ids are skipped.
func (db *DB) TouchNodes(ctx context.Context, ids []string, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, db.q(`UPDATE nodes SET last_seen = ? WHERE id = ?`))
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, id := range ids {
			if _, err := stmt.ExecContext(ctx, millis(at), id); err != nil {
				return fmt.Errorf("node %s: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("touch %d nodes: %w", len(ids), err)
	}
	return nil
}

// JSON is kept as TEXT so that it reads as JSON in the database; empty is NULL.

func jsonText(b []byte) sql.NullString {
	if len(b) == 0 {
		return sql.NullString{}
	}
	return sql.NullString{String: string(b), Valid: true}
}

func fromJSONText(s sql.NullString) []byte {
	if !s.Valid || s.String == "" {
		return nil
	}
	return []byte(s.String)
}
