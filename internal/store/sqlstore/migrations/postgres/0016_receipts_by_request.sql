-- Receipts keyed by their request, as migrations/sqlite/0016_receipts_by_request.sql: job ids
-- are random, so each receipt went into a random page of the job ids' index (a full page in
-- the WAL after each checkpoint); request ids begin with their time, so (request_id, job_id)
-- grows at its end, and serves a request's receipts, which receipts_request served.
ALTER TABLE receipts DROP CONSTRAINT receipts_pkey;
ALTER TABLE receipts ADD PRIMARY KEY (request_id, job_id);
DROP INDEX receipts_request;
