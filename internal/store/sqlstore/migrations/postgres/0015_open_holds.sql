-- One index of the open holds instead of two, as migrations/sqlite/0015_open_holds.sql: by
-- replica, then age.
DROP INDEX holds_open;
DROP INDEX holds_open_replica;
CREATE INDEX holds_open ON holds (replica, created_at) WHERE status = 'open';
