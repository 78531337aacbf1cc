-- An API key's routing defaults (the JSON of a request's provider object) and the models it
-- may use (comma-separated; empty: any).
ALTER TABLE api_keys ADD COLUMN routing TEXT;
ALTER TABLE api_keys ADD COLUMN models TEXT NOT NULL DEFAULT '';
