-- One index of the open holds instead of two: by replica, then age. Every hold is written into
-- the open holds' indexes when placed and out of them when it closes, so each index is two
-- writes a request; this one serves both the replicas' claims (WHERE status = 'open' AND
-- replica = ?) and the list of all open holds, oldest first, which are few.
DROP INDEX holds_open;
DROP INDEX holds_open_replica;
CREATE INDEX holds_open ON holds (replica, created_at) WHERE status = 'open';
