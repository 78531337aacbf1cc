-- Trust: nodes' levels and reputation scores, the results of verifying nodes, the operator's
-- audit log, and what a clawback of a node's pending earnings needs of the ledger.

-- A node's level (new, verified, trusted, quarantined, suspended: store.Level*, checked by the
-- program, not here, so that a new level needs no table rebuild), why it has it, and since when
-- (NULL: never changed). score is its reputation score in [0, 1] as last computed, at score_at;
-- NULL: never computed. Registering a node again leaves all of these alone.
ALTER TABLE nodes ADD COLUMN level TEXT NOT NULL DEFAULT 'new';
ALTER TABLE nodes ADD COLUMN level_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN level_changed_at INTEGER;
ALTER TABLE nodes ADD COLUMN score REAL;
ALTER TABLE nodes ADD COLUMN score_at INTEGER;

-- One row per verification of a node: an onboarding check or a probe. No foreign key, as the
-- tables of 0004: a batch of results never fails because one names an unknown node.
CREATE TABLE node_checks (
	id      INTEGER PRIMARY KEY,
	node_id TEXT    NOT NULL,
	at      INTEGER NOT NULL,
	kind    TEXT    NOT NULL,
	model   TEXT    NOT NULL,
	passed  INTEGER NOT NULL,
	detail  TEXT    NOT NULL
);

-- The rowid, id, ends every index, so this one also serves ORDER BY at DESC, id DESC.
CREATE INDEX node_checks_node_at ON node_checks (node_id, at);

-- Operators' decisions, and the coordinator's own about nodes' levels. Never deleted;
-- AUTOINCREMENT so that an id is never used twice.
CREATE TABLE audit_log (
	id     INTEGER PRIMARY KEY AUTOINCREMENT,
	at     INTEGER NOT NULL,
	actor  TEXT    NOT NULL,
	action TEXT    NOT NULL,
	target TEXT    NOT NULL,
	detail TEXT    NOT NULL
);

CREATE INDEX audit_log_target_at ON audit_log (target, at);
CREATE INDEX audit_log_at ON audit_log (at);

-- ledger_entries.released is now 0 (pending), 1 (released to available) or 2 (clawed back:
-- returned to the buyers by a "clawback:<ref>" transaction, never to be released or clawed
-- back again). A clawback finds a node's pending credits by node_id, and each one's request
-- (the buyer's debit and the fee) by txn_id.
CREATE INDEX ledger_entries_node_pending ON ledger_entries (node_id) WHERE released = 0 AND node_id IS NOT NULL;
CREATE INDEX ledger_entries_txn ON ledger_entries (txn_id);
