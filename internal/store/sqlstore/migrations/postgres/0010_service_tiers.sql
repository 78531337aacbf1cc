-- Service tiers, as migrations/sqlite/0010_service_tiers.sql: an API key's default tier
-- ('' is silver), and in a request's record the tier that served it and its wait in the
-- admission queue, in microseconds.
ALTER TABLE api_keys ADD COLUMN service_tier TEXT NOT NULL DEFAULT '';
ALTER TABLE usage ADD COLUMN service_tier TEXT NOT NULL DEFAULT '';
ALTER TABLE usage ADD COLUMN queue_us BIGINT NOT NULL DEFAULT 0;
