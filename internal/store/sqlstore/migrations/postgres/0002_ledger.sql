-- Money: a double-entry ledger in integer nano-dollars, holds, and spend caps.

-- One row per ledger account: "buyer:<account>", "pending:<account>", "available:<account>",
-- "fees" and "world". balance is the sum of the account's entries; the sum over all rows is 0.
CREATE TABLE ledger_accounts (
	id         TEXT    PRIMARY KEY,
	account_id TEXT,
	kind       TEXT    NOT NULL CHECK (kind IN ('buyer', 'pending', 'available', 'fees', 'world')),
	balance    BIGINT NOT NULL DEFAULT 0,
	held       BIGINT NOT NULL DEFAULT 0 CHECK (held >= 0)
);

CREATE INDEX ledger_accounts_owner ON ledger_accounts (account_id);

-- A transaction moves money between ledger accounts; its entries sum to zero. The id makes it
-- idempotent: "settle:<request>", "deposit:<ref>", "payout:<ref>", "release:<n>".
CREATE TABLE ledger_txns (
	id         TEXT    PRIMARY KEY,
	kind       TEXT    NOT NULL,
	ref        TEXT    NOT NULL,
	created_at BIGINT NOT NULL
);

-- Entries carry no foreign keys: they are written only with their transaction and account in
-- the same database transaction, and on PostgreSQL a key check would share-lock the buyer's
-- row that every hold locks for update.
CREATE TABLE ledger_entries (
	txn_id     TEXT    NOT NULL,
	account    TEXT    NOT NULL,
	amount     BIGINT NOT NULL,
	node_id    TEXT,
	release_at BIGINT,
	released   BIGINT NOT NULL DEFAULT 0,
	created_at BIGINT NOT NULL
);

CREATE INDEX ledger_entries_account ON ledger_entries (account, created_at);
CREATE INDEX ledger_entries_due ON ledger_entries (release_at) WHERE released = 0 AND release_at IS NOT NULL;

-- A hold reserves a request's most possible cost until it settles. windows lists the spend
-- windows it counts in, as "scope|period|window_start" lines. checkpoint is the bill of what
-- was delivered so far (JSON), kept up to date during long answers, so that a crash is
-- followed by a settlement of what was delivered rather than by nothing.
CREATE TABLE holds (
	request_id TEXT    PRIMARY KEY,
	account_id TEXT    NOT NULL,
	key_id     TEXT    NOT NULL,
	amount     BIGINT NOT NULL CHECK (amount >= 0),
	windows    TEXT    NOT NULL,
	status     TEXT    NOT NULL CHECK (status IN ('open', 'settled', 'voided')),
	checkpoint TEXT,
	created_at BIGINT NOT NULL,
	closed_at  BIGINT
);

CREATE INDEX holds_open ON holds (created_at) WHERE status = 'open';

CREATE TABLE spend_caps (
	scope       TEXT    NOT NULL,
	period      TEXT    NOT NULL CHECK (period IN ('daily', 'weekly', 'monthly')),
	limit_nanos BIGINT NOT NULL CHECK (limit_nanos > 0),
	PRIMARY KEY (scope, period)
);

-- Spending per cap and window: settled debits, and open holds.
CREATE TABLE spend_windows (
	scope        TEXT    NOT NULL,
	period       TEXT    NOT NULL,
	window_start BIGINT NOT NULL,
	spent        BIGINT NOT NULL DEFAULT 0,
	held         BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (scope, period, window_start)
);

ALTER TABLE usage ADD COLUMN cost BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN finish_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE usage ADD COLUMN region TEXT NOT NULL DEFAULT '';

-- Requests whose usage a node claimed beyond what it delivered (billed at an estimate instead).
ALTER TABLE nodes ADD COLUMN overclaims BIGINT NOT NULL DEFAULT 0;
