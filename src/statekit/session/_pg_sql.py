"""The SQL of ``PostgresSession``: its schema (with its version) and every statement it runs.

All writes are here, each one statement (so one atomic step, and one round trip):
a later column (leases, history) is added in one place. ``{t}`` is the sessions
table, ``{d}`` its deltas table, ``{s}`` the schema-version table; placeholders
are psycopg's (``%(name)s`` text, ``%(name)b`` binary).
"""

from __future__ import annotations

from typing import Final, LiteralString

from psycopg import sql

SCHEMA_VERSION: Final = 1
"""The version of the tables this statekit writes (recorded in ``statekit_schema``)."""

SCHEMA_TABLE: Final = "statekit_schema"

DDL: Final[LiteralString] = """
CREATE TABLE IF NOT EXISTS {s} (
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
CREATE INDEX IF NOT EXISTS {t_by_session} ON {t} (session_id);
CREATE TABLE IF NOT EXISTS {d} (
    user_id    text    NOT NULL,
    session_id text    NOT NULL,
    token      text    NOT NULL,
    seq        integer NOT NULL,
    line       bytea   NOT NULL,
    delta      jsonb,
    PRIMARY KEY (user_id, session_id, token, seq),
    FOREIGN KEY (user_id, session_id) REFERENCES {t} ON DELETE CASCADE
);
INSERT INTO {s} (table_name, version) VALUES ({name}, {version}) ON CONFLICT (table_name) DO NOTHING;
"""
"""The schema, as ``statekit init-db`` (or the first use) creates it; docs/backends.md shows it."""

FAST_COMPRESSION: Final[LiteralString] = """
ALTER TABLE {t} ALTER COLUMN raw SET COMPRESSION lz4, ALTER COLUMN document SET COMPRESSION lz4;
ALTER TABLE {d} ALTER COLUMN line SET COMPRESSION lz4, ALTER COLUMN delta SET COMPRESSION lz4;
"""
"""Run after the DDL where the server has lz4 (PostgreSQL 14+ built with it, as Debian's and the Docker
images are): large documents are compressed several times faster than by the default pglz (a 10,000-message
save: 336 -> 197 ms). Skipped, silently, where it fails: the tables work the same, only slower."""

LOCK: Final = b"SELECT pg_advisory_xact_lock(hashtext('statekit_schema'))"
"""Taken around the DDL: processes creating the tables at once wait for each other."""

VERSION: Final[LiteralString] = "SELECT version FROM {s} WHERE table_name = %(name)s"

# A row's document: the exact bytes of the last full write (the revision is their SHA-1
# followed by the deltas'), and the same as jsonb for people who query it (NULL when
# the JSON holds \u0000, which jsonb cannot store).
_DOCUMENT: Final[LiteralString] = "CASE WHEN %(queryable)s THEN convert_from(%(raw)b, 'UTF8')::jsonb END"
_SET_ROW: Final[LiteralString] = (
    "revision = %(revision)s, raw = %(raw)b, document = " + _DOCUMENT + ", token = %(token)s, "
    "log_bytes = 0, deltas = 0, saved_at = now()"
)
_KEY: Final[LiteralString] = "user_id = %(user)s AND session_id = %(session)s"

_INSERT: Final[LiteralString] = (
    "INSERT INTO {t} AS s (user_id, session_id, revision, raw, document, token) "
    "VALUES (%(user)s, %(session)s, %(revision)s, %(raw)b, " + _DOCUMENT + ", %(token)s) "
)
WRITE_KINDS: Final[dict[str, LiteralString]] = {
    "always": _INSERT + "ON CONFLICT (user_id, session_id) DO UPDATE SET " + _SET_ROW + " RETURNING 1",
    "missing": _INSERT + "ON CONFLICT (user_id, session_id) DO NOTHING RETURNING 1",
    "revision": "UPDATE {t} SET " + _SET_ROW + " WHERE " + _KEY + " AND revision = %(expected)s RETURNING 1",
    "base": "UPDATE {t} SET " + _SET_ROW + " WHERE " + _KEY
    + " AND token = %(base_token)s AND log_bytes = %(base_bytes)s RETURNING 1",
}
"""A full write: unconditional, only if nothing is stored, only over a revision, only over a delta base."""

WRITE: Final[LiteralString] = (
    "WITH written AS ({write}), "
    "dropped AS (DELETE FROM {d} WHERE " + _KEY + " AND EXISTS (SELECT FROM written)) "
    "SELECT (SELECT count(*) FROM written), (SELECT revision IS NULL FROM {t} WHERE " + _KEY + ")"
)
"""A full write and the removal of the deltas it replaces, in one statement. Answers whether it wrote, and
whether the row it found (when it did not) has deltas, so no revision to compare in SQL."""

APPEND: Final[LiteralString] = (
    "WITH bumped AS (UPDATE {t} SET deltas = deltas + 1, log_bytes = log_bytes + %(grew)s, revision = NULL, "
    "saved_at = now() WHERE " + _KEY + " AND token = %(base_token)s AND log_bytes = %(base_bytes)s RETURNING deltas) "
    "INSERT INTO {d} (user_id, session_id, token, seq, line, delta) "
    "SELECT %(user)s, %(session)s, %(base_token)s, deltas, %(line)b, "
    "CASE WHEN %(queryable)s THEN convert_from(%(line)b, 'UTF8')::jsonb END FROM bumped"
)
"""One delta: the row's count, size and time bumped if it is still the base, and the line inserted."""

AT_BASE: Final[LiteralString] = (
    "SELECT 1 FROM {t} WHERE " + _KEY + " AND token = %(base_token)s AND log_bytes = %(base_bytes)s"
)

READ: Final[LiteralString] = (
    "SELECT s.raw, s.token, s.deltas, CASE WHEN s.deltas > 0 THEN (SELECT string_agg(d.line, ''::bytea ORDER BY d.seq) "
    "FROM {d} d WHERE d.user_id = s.user_id AND d.session_id = s.session_id AND d.token = s.token) END "
    "FROM {t} s WHERE s.user_id = %(user)s AND s.session_id = %(session)s"
)
READ_LOCKED: Final[LiteralString] = READ + " FOR UPDATE OF s"

EXISTS: Final[LiteralString] = "SELECT 1 FROM {t} WHERE " + _KEY
DELETE: Final[LiteralString] = "DELETE FROM {t} WHERE " + _KEY
LIST: Final[LiteralString] = "SELECT session_id FROM {t} WHERE user_id = %(user)s"
LIST_SOME: Final[LiteralString] = LIST + " ORDER BY session_id LIMIT %(limit)s"
OWNERS: Final[LiteralString] = "SELECT user_id FROM {t} WHERE session_id = %(session)s ORDER BY user_id LIMIT %(limit)s"
USERS: Final[LiteralString] = "SELECT DISTINCT user_id FROM {t}"


class Statements:
    """The statements of one sessions table, composed once (as bytes: nothing is composed per call)."""

    def __init__(self, table: str) -> None:
        self.table = table
        names = {
            "t": sql.Identifier(table),
            "d": sql.Identifier(f"{table}_deltas"),
            "s": sql.Identifier(SCHEMA_TABLE),
            "t_by_session": sql.Identifier(f"{table}_session_id"),
        }

        def composed(text: LiteralString, **more: sql.Composable) -> bytes:
            return sql.SQL(text).format(**names, **more).as_bytes(None)

        self.ddl = composed(DDL, name=sql.Literal(table), version=sql.Literal(SCHEMA_VERSION))
        self.fast_compression = composed(FAST_COMPRESSION)
        self.version = composed(VERSION)
        self.writes = {kind: composed(WRITE, write=sql.SQL(text).format(**names)) for kind, text in WRITE_KINDS.items()}
        self.append, self.at_base = composed(APPEND), composed(AT_BASE)
        self.read, self.read_locked = composed(READ), composed(READ_LOCKED)
        self.exists, self.delete = composed(EXISTS), composed(DELETE)
        self.list, self.list_some = composed(LIST), composed(LIST_SOME)
        self.owners, self.users = composed(OWNERS), composed(USERS)


def ddl_text(table: str = "statekit_sessions") -> str:
    """The schema's DDL as plain SQL text, for operators (``statekit init-db --print``, the docs)."""
    names = {"s": SCHEMA_TABLE, "t": table, "d": f"{table}_deltas", "t_by_session": f"{table}_session_id"}
    ddl = DDL.format(**names, name=f"'{table}'", version=SCHEMA_VERSION).strip()
    optional = FAST_COMPRESSION.format(**names).strip()
    return f"{ddl}\n-- where the server has lz4 (PostgreSQL 14+ built with it); skipped where it fails:\n{optional}"
