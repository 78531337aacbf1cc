-- Replicas (docs/architecture.md, "Money"). A hold records the coordinator replica that placed
-- it ('' for holds from before replicas, or placed without a replica's name), so that recovery
-- after a crash is per replica: a replica closes its own open holds and those of replicas whose
-- lease has expired, never a live replica's. A replica renews its lease (expires_at, unix
-- milliseconds) while it runs; a peer that takes over an expired lease deletes its row and moves
-- the replica's open holds to itself, in one transaction.
ALTER TABLE holds ADD COLUMN replica TEXT NOT NULL DEFAULT '';
CREATE INDEX holds_open_replica ON holds (replica) WHERE status = 'open';

CREATE TABLE replica_leases (
	replica    TEXT    PRIMARY KEY,
	expires_at INTEGER NOT NULL,
	updated    INTEGER NOT NULL
);
