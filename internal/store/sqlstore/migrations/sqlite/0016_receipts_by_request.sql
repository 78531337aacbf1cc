-- Receipts keyed by their request: (request_id, job_id) instead of job_id alone. Job ids are
-- random, so each receipt stored went into a random page of the job ids' index, and once the
-- table outgrew the page cache a batch of settlements wrote about one 4 KiB page per receipt
-- to the WAL for that index alone (5.9 KiB of WAL per 1.2 KiB receipt, at 100,000 receipts).
-- Request ids begin with their time (requestid.New), so this key grows at its end, as the
-- table's rows do, and it serves the one lookup, a request's receipts, which the index
-- receipts_request served. A job serves one request: a receipt stored already is still
-- refused, by (request_id, job_id).
CREATE TABLE receipts_by_request (
	request_id TEXT    NOT NULL,
	job_id     TEXT    NOT NULL,
	node_id    TEXT    NOT NULL,
	data       TEXT,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (request_id, job_id)
);

INSERT INTO receipts_by_request (request_id, job_id, node_id, data, created_at)
SELECT request_id, job_id, node_id, data, created_at FROM receipts ORDER BY request_id, job_id;

DROP TABLE receipts;
ALTER TABLE receipts_by_request RENAME TO receipts;
