-- Each model a node serves is verified on its own (docs/reputation.md): its level on that node
-- (new, verified or quarantined: store.Level*, checked by the program), why, and since when.
-- A model with no row is new. Rows of models a node no longer offers are kept: a model
-- quarantined on a node stays so if the node offers it again.
CREATE TABLE offer_levels (
	node_id    TEXT    NOT NULL,
	model      TEXT    NOT NULL,
	level      TEXT    NOT NULL,
	reason     TEXT    NOT NULL,
	changed_at INTEGER NOT NULL,
	PRIMARY KEY (node_id, model)
);

-- How many of nodes.overclaims the reputation rules have counted already (as failed checks of
-- kind usage): over-claims recorded before these rules do not count.
ALTER TABLE nodes ADD COLUMN overclaims_checked INTEGER NOT NULL DEFAULT 0;
UPDATE nodes SET overclaims_checked = overclaims;
