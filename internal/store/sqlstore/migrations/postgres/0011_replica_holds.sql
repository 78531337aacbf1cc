-- Replicas, as migrations/sqlite/0011_replica_holds.sql (docs/architecture.md, "Money"): a hold
-- records the replica that placed it ('' for holds from before replicas), and each replica
-- renews a lease while it runs; a peer that takes over an expired lease deletes its row and moves
-- the replica's open holds to itself, in one transaction.
ALTER TABLE holds ADD COLUMN replica TEXT NOT NULL DEFAULT '';
CREATE INDEX holds_open_replica ON holds (replica) WHERE status = 'open';

CREATE TABLE replica_leases (
	replica    TEXT   PRIMARY KEY,
	expires_at BIGINT NOT NULL,
	updated    BIGINT NOT NULL
);
