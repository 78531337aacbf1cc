-- An API key's rate limits: requests per minute, tokens per minute and requests at once.
-- 0 takes the coordinator's default (--key-rpm, --key-tpm, --key-concurrent); a negative
-- value means no limit, whatever the default.
ALTER TABLE api_keys ADD COLUMN rpm_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN tpm_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN concurrent_limit INTEGER NOT NULL DEFAULT 0;
