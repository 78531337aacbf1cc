-- What the coordinator records of nodes' lives: connections, jobs per day, hardware telemetry,
-- events and job receipts. These tables carry no foreign keys, as usage: a batch of records
-- must never fail to land because one names a node the database does not know.

-- A node's hardware fingerprint, when it last changed (NULL: never), and its declared weekly
-- availability (empty: always).
ALTER TABLE nodes ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN hardware_changed_at INTEGER;
ALTER TABLE nodes ADD COLUMN windows TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN timezone TEXT NOT NULL DEFAULT '';

-- One row per connection of a node. last_seen is the session's end once ended; busy_us is the
-- time, in microseconds, with at least one job running.
CREATE TABLE node_sessions (
	id           TEXT    PRIMARY KEY,
	node_id      TEXT    NOT NULL,
	connected_at INTEGER NOT NULL,
	last_seen    INTEGER NOT NULL,
	busy_us      INTEGER NOT NULL DEFAULT 0,
	ended        INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX node_sessions_node_seen ON node_sessions (node_id, last_seen);
CREATE INDEX node_sessions_open ON node_sessions (id) WHERE NOT ended;

-- Jobs per node and UTC day; day is the unix milliseconds of its midnight.
CREATE TABLE node_days (
	node_id           TEXT    NOT NULL,
	day               INTEGER NOT NULL,
	jobs              INTEGER NOT NULL DEFAULT 0,
	failed            INTEGER NOT NULL DEFAULT 0,
	prompt_tokens     INTEGER NOT NULL DEFAULT 0,
	completion_tokens INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (node_id, day)
);

-- A node's hardware readings per minute (at is the minute's start), as JSON.
CREATE TABLE node_telemetry (
	node_id TEXT    NOT NULL,
	at      INTEGER NOT NULL,
	data    TEXT,
	PRIMARY KEY (node_id, at)
);

CREATE INDEX node_telemetry_at ON node_telemetry (at);

CREATE TABLE node_events (
	id      INTEGER PRIMARY KEY,
	node_id TEXT    NOT NULL,
	at      INTEGER NOT NULL,
	kind    TEXT    NOT NULL,
	detail  TEXT    NOT NULL
);

-- The rowid, id, ends every index, so this one also serves ORDER BY at, id.
CREATE INDEX node_events_node_at ON node_events (node_id, at);

-- A job's receipt, signed by its node and countersigned by the coordinator (JSON).
CREATE TABLE receipts (
	job_id     TEXT    PRIMARY KEY,
	request_id TEXT    NOT NULL,
	node_id    TEXT    NOT NULL,
	data       TEXT,
	created_at INTEGER NOT NULL
);

CREATE INDEX receipts_request ON receipts (request_id, created_at, job_id);
