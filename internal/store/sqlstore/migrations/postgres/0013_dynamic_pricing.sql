-- Dynamic pricing, as migrations/sqlite/0013_dynamic_pricing.sql: a node's ask schedule set in
-- the console (JSON), and the ask a node's earnings were billed at (window, surge in basis
-- points; 0: ×1).
CREATE TABLE node_ask_schedules (
	node_id    TEXT   PRIMARY KEY,
	schedule   TEXT   NOT NULL,
	updated_at BIGINT NOT NULL
);
ALTER TABLE ledger_entries ADD COLUMN ask_window TEXT NOT NULL DEFAULT '';
ALTER TABLE ledger_entries ADD COLUMN surge_bp BIGINT NOT NULL DEFAULT 0;
