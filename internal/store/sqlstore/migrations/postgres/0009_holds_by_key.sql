-- A key's holds by time, so that a spend cap set on a key mid-window counts what the key spent
-- in the window before it (SetCap reads the key's holds created in the window).
CREATE INDEX holds_key_created ON holds (key_id, created_at);
