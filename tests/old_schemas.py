"""The DDL of older schema versions, word for word, for the tests that upgrade tables they made.

Each version's DDL is the version before it, its additions, and its version mark.
"""

from __future__ import annotations

_SQLITE_TABLES_1 = r"""CREATE TABLE IF NOT EXISTS statekit_schema (
    table_name TEXT    PRIMARY KEY,
    version    INTEGER NOT NULL
);
CREATE TABLE "statekit_sessions" (
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    revision   TEXT NOT NULL, -- SHA-1 of the document (the session's revision while it has no deltas)
    token      TEXT,          -- the document's token (append-only lists), else NULL
    saved_at   TEXT NOT NULL, -- UTC, ISO 8601: when the document was written
    document   TEXT NOT NULL, -- the session document as written, JSON (last: a delta never reads it)
    PRIMARY KEY (user_id, session_id)
);
CREATE INDEX "statekit_sessions_session_id" ON "statekit_sessions" (session_id, user_id);
CREATE TABLE "statekit_sessions_deltas" (
    user_id    TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    seq        INTEGER NOT NULL, -- 1, 2, ... since the document was written
    saved_at   TEXT    NOT NULL, -- UTC, ISO 8601
    line       TEXT    NOT NULL, -- the delta line (items appended by one save), JSON
    PRIMARY KEY (user_id, session_id, seq)
);
"""
"""SQLite version 1: the sessions and deltas tables."""

_SQLITE_LEASES_2 = r"""CREATE TABLE "statekit_sessions_leases" (
    user_id    TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    token      INTEGER NOT NULL, -- the last fencing token given (kept after a release and a delete: tokens only grow)
    expires_at REAL    NOT NULL, -- when the lease ends: seconds since the epoch, the local clock (0: released)
    PRIMARY KEY (user_id, session_id)
);
"""
"""What SQLite version 2 added: the leases table."""

_SQLITE_MARK_1 = r"""INSERT INTO statekit_schema (table_name, version) VALUES ('statekit_sessions', 1);
"""

_SQLITE_MARK_2 = r"""INSERT INTO statekit_schema (table_name, version) VALUES ('statekit_sessions', 2);
"""

_PG_TABLES_1 = r"""
CREATE TABLE IF NOT EXISTS statekit_schema (
    table_name text    PRIMARY KEY,
    version    integer NOT NULL
);
CREATE TABLE IF NOT EXISTS {t} (
    user_id    text        NOT NULL,
    session_id text        NOT NULL,
    revision   text,
    raw        bytea       NOT NULL,
    document   jsonb,
    token      text,
    log_bytes  bigint      NOT NULL DEFAULT 0,
    deltas     integer     NOT NULL DEFAULT 0,
    saved_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, session_id)
);
CREATE INDEX IF NOT EXISTS {t}_session_id ON {t} (session_id);
CREATE TABLE IF NOT EXISTS {t}_deltas (
    user_id    text    NOT NULL,
    session_id text    NOT NULL,
    token      text    NOT NULL,
    seq        integer NOT NULL,
    line       bytea   NOT NULL,
    delta      jsonb,
    PRIMARY KEY (user_id, session_id, token, seq),
    FOREIGN KEY (user_id, session_id) REFERENCES {t} ON DELETE CASCADE
);
"""
"""PostgreSQL version 1: the sessions and deltas tables (``{t}``: the table)."""

_PG_LEASES_2 = r"""CREATE TABLE IF NOT EXISTS {t}_leases (
    user_id    text        NOT NULL,
    session_id text        NOT NULL,
    token      bigint      NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, session_id)
);
CREATE OR REPLACE FUNCTION {t}_fence(u text, s text) RETURNS TABLE (token bigint, ends float8, now float8)
LANGUAGE plpgsql VOLATILE AS $fence$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('{t}' || E'\x1f' || u || E'\x1f' || s, 0));
    RETURN QUERY SELECT l.token, extract(epoch FROM l.expires_at)::float8, extract(epoch FROM clock_timestamp())::float8
        FROM {t}_leases l WHERE l.user_id = u AND l.session_id = s;
END
$fence$;
"""
"""What PostgreSQL version 2 added: the leases table and the fence function."""

_PG_MARK_1 = r"""INSERT INTO statekit_schema (table_name, version) VALUES ('{t}', 1) ON CONFLICT (table_name) DO NOTHING;
"""

_PG_MARK_2 = r"""INSERT INTO statekit_schema AS v (table_name, version) VALUES ('{t}', 2)
    ON CONFLICT (table_name) DO UPDATE SET version = EXCLUDED.version WHERE v.version < EXCLUDED.version;
"""

SQLITE_VERSION_1_DDL = _SQLITE_TABLES_1 + _SQLITE_MARK_1
"""SQLite's schema version 1 (statekit before leases)."""

SQLITE_VERSION_2_DDL = _SQLITE_TABLES_1 + _SQLITE_LEASES_2 + _SQLITE_MARK_2
"""SQLite's schema version 2 (statekit with leases, before history)."""

PG_VERSION_1_DDL = _PG_TABLES_1 + _PG_MARK_1
"""PostgreSQL's schema version 1 (statekit before leases)."""

PG_VERSION_2_DDL = _PG_TABLES_1 + _PG_LEASES_2 + _PG_MARK_2
"""PostgreSQL's schema version 2 (statekit with leases, before history)."""
