-- Dynamic pricing (internal/pricing). A node's ask schedule set in the console, which its
-- provider file's gives way to: the JSON of a protocol.AskSchedule.
CREATE TABLE node_ask_schedules (
	node_id    TEXT    PRIMARY KEY,
	schedule   TEXT    NOT NULL,
	updated_at INTEGER NOT NULL
);
-- The ask a node's earnings were billed at: the ask schedule's window ('' the flat ask) and
-- the surge multiplier in basis points (0: entries from before surge, and not a node's: ×1).
ALTER TABLE ledger_entries ADD COLUMN ask_window TEXT NOT NULL DEFAULT '';
ALTER TABLE ledger_entries ADD COLUMN surge_bp INTEGER NOT NULL DEFAULT 0;
