-- Batches (docs/architecture.md, "Batches"): OpenAI's Files and Batch APIs.
--
-- A file belongs to one account. Its content is in the row (content), or, for a file above the
-- coordinator's --files-dir threshold, in a file of that directory named by path (content NULL),
-- which every replica must share.
CREATE TABLE files (
	id         TEXT    PRIMARY KEY,
	account_id TEXT    NOT NULL REFERENCES accounts (id),
	purpose    TEXT    NOT NULL,
	filename   TEXT    NOT NULL,
	bytes      INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	content    BLOB,
	path       TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX files_account ON files (account_id, created_at);

-- A batch runs the lines of its input file through the request core as bronze work. errors is
-- the JSON of its validation errors (OpenAI's errors.data), metadata the JSON of its metadata.
-- runner is the replica that runs it: another takes it over once runner's lease
-- (replica_leases) has expired. The *_at columns are unix milliseconds, 0 until reached.
CREATE TABLE batches (
	id                TEXT    PRIMARY KEY,
	account_id        TEXT    NOT NULL REFERENCES accounts (id),
	key_id            TEXT    NOT NULL,
	endpoint          TEXT    NOT NULL,
	input_file_id     TEXT    NOT NULL,
	completion_window TEXT    NOT NULL,
	status            TEXT    NOT NULL,
	errors            TEXT    NOT NULL DEFAULT '',
	metadata          TEXT    NOT NULL DEFAULT '',
	output_file_id    TEXT    NOT NULL DEFAULT '',
	error_file_id     TEXT    NOT NULL DEFAULT '',
	total             INTEGER NOT NULL DEFAULT 0,
	runner            TEXT    NOT NULL DEFAULT '',
	created_at        INTEGER NOT NULL,
	in_progress_at    INTEGER NOT NULL DEFAULT 0,
	expires_at        INTEGER NOT NULL,
	finalizing_at     INTEGER NOT NULL DEFAULT 0,
	completed_at      INTEGER NOT NULL DEFAULT 0,
	failed_at         INTEGER NOT NULL DEFAULT 0,
	expired_at        INTEGER NOT NULL DEFAULT 0,
	cancelling_at     INTEGER NOT NULL DEFAULT 0,
	cancelled_at      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX batches_account ON batches (account_id, created_at);
CREATE INDEX batches_active ON batches (status) WHERE status IN ('in_progress', 'cancelling', 'finalizing');

-- A batch's line: its validated body, and its state: pending, running (request_id names the
-- current attempt: its hold and usage record), done or failed (result is the line of the
-- output or error file). A settlement writes a line's result in its own transaction, only while
-- the line is running under that settlement's request id.
CREATE TABLE batch_lines (
	batch_id   TEXT    NOT NULL REFERENCES batches (id),
	line       INTEGER NOT NULL,
	custom_id  TEXT    NOT NULL,
	body       TEXT    NOT NULL,
	status     TEXT    NOT NULL DEFAULT 'pending',
	request_id TEXT    NOT NULL DEFAULT '',
	tries      INTEGER NOT NULL DEFAULT 0,
	result     TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (batch_id, line)
);
CREATE INDEX batch_lines_status ON batch_lines (batch_id, status);
