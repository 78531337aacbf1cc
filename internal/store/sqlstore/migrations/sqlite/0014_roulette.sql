-- Model roulette. An API key's default split (the JSON of a request's split object; NULL:
-- none). A request's record keeps the split it was drawn under, in its written form
-- ("llama-3.1-8b=0.8,qwen-2.5-7b=0.2", '' for none), beside the model that served it. A
-- buyer's rating of a generation: one per request, a later one replacing it.
ALTER TABLE api_keys ADD COLUMN split TEXT;
ALTER TABLE usage ADD COLUMN split TEXT NOT NULL DEFAULT '';

CREATE INDEX usage_account_split ON usage (account_id, split, created_at) WHERE split <> '';

CREATE TABLE feedback (
	request_id TEXT    PRIMARY KEY,
	account_id TEXT    NOT NULL,
	score      REAL    NOT NULL CHECK (score >= 0 AND score <= 1),
	comment    TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
