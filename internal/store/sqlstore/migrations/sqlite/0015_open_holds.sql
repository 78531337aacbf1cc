-- Open holds apart (docs/architecture.md, "Money"). A hold placed goes into open_holds, a small
-- table of the requests in flight, which its checkpoints, a raise and a replica's takeover
-- update; when it closes it leaves open_holds for holds, which from now on keeps the closed
-- holds only, each written once, at its settlement, as the ledger's other records are. A hold
-- then writes one small table's page instead of four indexes' (the table, its key, the open
-- holds' index, the key's holds by time), and a settlement appends instead of updating.
CREATE TABLE open_holds (
	request_id TEXT    PRIMARY KEY,
	account_id TEXT    NOT NULL,
	key_id     TEXT    NOT NULL,
	amount     INTEGER NOT NULL CHECK (amount >= 0),
	windows    TEXT    NOT NULL,
	checkpoint TEXT,
	created_at INTEGER NOT NULL,
	replica    TEXT    NOT NULL DEFAULT ''
) WITHOUT ROWID;

INSERT INTO open_holds (request_id, account_id, key_id, amount, windows, checkpoint, created_at, replica)
SELECT request_id, account_id, key_id, amount, windows, checkpoint, created_at, replica FROM holds
WHERE status = 'open';
DELETE FROM holds WHERE status = 'open';

DROP INDEX holds_open;
DROP INDEX holds_open_replica;
