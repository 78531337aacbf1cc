-- Service tiers (internal/tier). An API key's default tier, by ShareAI's name (gold, silver,
-- bronze), for its requests that name none; '' is silver. A request's record keeps the tier
-- that served it ('' for records from before tiers: silver) and how long it waited in the
-- admission queue for a slot, in microseconds as ttft_us.
ALTER TABLE api_keys ADD COLUMN service_tier TEXT NOT NULL DEFAULT '';
ALTER TABLE usage ADD COLUMN service_tier TEXT NOT NULL DEFAULT '';
ALTER TABLE usage ADD COLUMN queue_us INTEGER NOT NULL DEFAULT 0;
