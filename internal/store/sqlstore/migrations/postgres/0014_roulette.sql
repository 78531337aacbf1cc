-- Model roulette, as migrations/sqlite/0014_roulette.sql: a key's default split, the split of
-- a request's record, and buyers' ratings of their generations.
ALTER TABLE api_keys ADD COLUMN split TEXT;
ALTER TABLE usage ADD COLUMN split TEXT NOT NULL DEFAULT '';

CREATE INDEX usage_account_split ON usage (account_id, split, created_at) WHERE split <> '';

CREATE TABLE feedback (
	request_id TEXT             PRIMARY KEY,
	account_id TEXT             NOT NULL,
	score      DOUBLE PRECISION NOT NULL CHECK (score >= 0 AND score <= 1),
	comment    TEXT             NOT NULL,
	created_at BIGINT           NOT NULL,
	updated_at BIGINT           NOT NULL
);
