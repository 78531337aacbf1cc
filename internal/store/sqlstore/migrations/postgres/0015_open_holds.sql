-- Open holds apart, as migrations/sqlite/0015_open_holds.sql: open_holds holds the requests in
-- flight, holds from now on the closed holds only, each written once, at its settlement.
CREATE TABLE open_holds (
	request_id TEXT   PRIMARY KEY,
	account_id TEXT   NOT NULL,
	key_id     TEXT   NOT NULL,
	amount     BIGINT NOT NULL CHECK (amount >= 0),
	windows    TEXT   NOT NULL,
	checkpoint TEXT,
	created_at BIGINT NOT NULL,
	replica    TEXT   NOT NULL DEFAULT ''
);

INSERT INTO open_holds (request_id, account_id, key_id, amount, windows, checkpoint, created_at, replica)
SELECT request_id, account_id, key_id, amount, windows, checkpoint, created_at, replica FROM holds
WHERE status = 'open';
DELETE FROM holds WHERE status = 'open';

DROP INDEX holds_open;
DROP INDEX holds_open_replica;
