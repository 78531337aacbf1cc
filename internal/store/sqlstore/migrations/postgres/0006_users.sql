-- The web console's users, as migrations/sqlite/0006_users.sql on PostgreSQL: the users, their
-- roles and their logged-in browsers.

-- A user logs in to the console on behalf of an account. email is unique and lower case;
-- password_hash is argon2id in the PHC string format; lang is the preferred language, '' to
-- follow the browser's.
CREATE TABLE users (
	id            TEXT   PRIMARY KEY,
	email         TEXT   NOT NULL UNIQUE,
	password_hash TEXT   NOT NULL,
	account_id    TEXT   NOT NULL REFERENCES accounts (id),
	lang          TEXT   NOT NULL DEFAULT '',
	created_at    BIGINT NOT NULL
);

CREATE INDEX users_account ON users (account_id);

-- A user's roles (buyer, provider, admin: store.Role*, checked by the program, not here).
CREATE TABLE user_roles (
	user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	role    TEXT NOT NULL,
	PRIMARY KEY (user_id, role)
);

-- A logged-in browser. hash is the SHA-256 of the secret in its cookie: the secret itself is
-- never stored. csrf is the token its forms carry.
CREATE TABLE web_sessions (
	hash       BYTEA  PRIMARY KEY,
	user_id    TEXT   NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	csrf       TEXT   NOT NULL,
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);

CREATE INDEX web_sessions_user_expires ON web_sessions (user_id, expires_at);
