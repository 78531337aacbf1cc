-- The coordinator's first schema, as migrations/sqlite/0001_init.sql on PostgreSQL. Times are
-- BIGINT unix milliseconds, durations BIGINT microseconds, secrets' hashes and keys BYTEA, ids
-- TEXT, flags BOOLEAN. JSON stays TEXT, so that it reads back byte for byte.

CREATE TABLE accounts (
	id         TEXT   PRIMARY KEY,
	name       TEXT   NOT NULL UNIQUE,
	created_at BIGINT NOT NULL
);

CREATE TABLE providers (
	account_id TEXT   PRIMARY KEY REFERENCES accounts (id),
	created_at BIGINT NOT NULL
);

CREATE TABLE api_keys (
	id         TEXT   PRIMARY KEY,
	account_id TEXT   NOT NULL REFERENCES accounts (id),
	kind       TEXT   NOT NULL CHECK (kind IN ('buyer', 'provider')),
	name       TEXT   NOT NULL,
	prefix     TEXT   NOT NULL,
	hash       BYTEA  NOT NULL UNIQUE,
	created_at BIGINT NOT NULL,
	revoked_at BIGINT
);

CREATE INDEX api_keys_account_created ON api_keys (account_id, created_at);
CREATE INDEX api_keys_prefix ON api_keys (prefix);

CREATE TABLE nodes (
	id         TEXT   PRIMARY KEY,
	account_id TEXT   NOT NULL REFERENCES accounts (id),
	public_key BYTEA  NOT NULL UNIQUE,
	name       TEXT   NOT NULL,
	region     TEXT   NOT NULL,
	engine     TEXT   NOT NULL,
	agent      TEXT   NOT NULL,
	hardware   TEXT,
	offers     TEXT,
	first_seen BIGINT NOT NULL,
	last_seen  BIGINT NOT NULL
);

CREATE INDEX nodes_account ON nodes (account_id);

-- usage has no foreign keys: a request's record must never fail to land.
CREATE TABLE usage (
	request_id        TEXT    PRIMARY KEY,
	account_id        TEXT    NOT NULL,
	key_id            TEXT    NOT NULL,
	model             TEXT    NOT NULL,
	node_id           TEXT    NOT NULL,
	endpoint          TEXT    NOT NULL,
	stream            BOOLEAN NOT NULL,
	prompt_tokens     BIGINT  NOT NULL,
	completion_tokens BIGINT  NOT NULL,
	ttft_us           BIGINT  NOT NULL,
	duration_us       BIGINT  NOT NULL,
	outcome           TEXT    NOT NULL,
	error             TEXT    NOT NULL,
	created_at        BIGINT  NOT NULL
);

CREATE INDEX usage_account_created ON usage (account_id, created_at);
