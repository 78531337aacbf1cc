-- An API key's rate limits, as migrations/sqlite/0007_key_limits.sql: requests per minute,
-- tokens per minute and requests at once. 0 takes the coordinator's default; a negative value
-- means no limit, whatever the default.
ALTER TABLE api_keys ADD COLUMN rpm_limit BIGINT NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN tpm_limit BIGINT NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN concurrent_limit BIGINT NOT NULL DEFAULT 0;
