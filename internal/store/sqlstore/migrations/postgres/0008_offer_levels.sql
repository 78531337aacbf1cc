-- Each model a node serves is verified on its own, as migrations/sqlite/0008_offer_levels.sql.
CREATE TABLE offer_levels (
	node_id    TEXT   NOT NULL,
	model      TEXT   NOT NULL,
	level      TEXT   NOT NULL,
	reason     TEXT   NOT NULL,
	changed_at BIGINT NOT NULL,
	PRIMARY KEY (node_id, model)
);

ALTER TABLE nodes ADD COLUMN overclaims_checked BIGINT NOT NULL DEFAULT 0;
UPDATE nodes SET overclaims_checked = overclaims;
