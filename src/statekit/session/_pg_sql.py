"""The SQL of ``PostgresSession``: its schema (with its version) and every statement it runs.

All writes are here, each one statement (so one atomic step, and one round trip)
that checks the session's lease first (:data:`FENCE`): a later check (history)
is added in one place; a save that keeps history is the same statement with two
more parts (:data:`KEEPING`). ``{t}`` is the sessions table, ``{d}`` its deltas table,
``{l}`` its leases table, ``{h}`` its history, ``{s}`` the schema-version table; placeholders are
psycopg's (``%(name)s`` text, ``%(name)b`` binary).
"""

from __future__ import annotations

from typing import Final, LiteralString

from psycopg import sql

SCHEMA_VERSION: Final = 3
"""The version of the tables this statekit writes (recorded in ``statekit_schema``): 2 added the leases table,
3 the history table."""

ADDED: Final = {2: "the leases table", 3: "the history table"}
"""What each version of the schema added (for the message that asks to upgrade older tables)."""

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
CREATE TABLE IF NOT EXISTS {l} (
    user_id    text        NOT NULL,
    session_id text        NOT NULL,
    token      bigint      NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, session_id)
);
CREATE TABLE IF NOT EXISTS {h} (
    user_id    text        NOT NULL,
    session_id text        NOT NULL,
    revision   text        NOT NULL,
    raw        bytea       NOT NULL,
    token      text,
    deltas     integer     NOT NULL DEFAULT 0,
    lines      bytea,
    kept_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, session_id, revision)
);
CREATE OR REPLACE FUNCTION {f}(u text, s text) RETURNS TABLE (token bigint, ends float8, now float8)
LANGUAGE plpgsql VOLATILE AS $fence$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended({name} || E'\\x1f' || u || E'\\x1f' || s, 0));
    RETURN QUERY SELECT l.token, extract(epoch FROM l.expires_at)::float8, extract(epoch FROM clock_timestamp())::float8
        FROM {l} l WHERE l.user_id = u AND l.session_id = s;
END
$fence$;
INSERT INTO {s} AS v (table_name, version) VALUES ({name}, {version})
    ON CONFLICT (table_name) DO UPDATE SET version = EXCLUDED.version WHERE v.version < EXCLUDED.version;
"""
"""The schema, as ``statekit init-db`` (or the first use) creates it; docs/backends.md shows it.

Run again over tables of an older version, it upgrades them in place: every
table is ``IF NOT EXISTS`` and the recorded version is raised, never lowered
(version 1 had no leases table, version 2 no history table). The leases live in a table of their own, with
no foreign key, so that a lease exists before its session does and its last
token outlives a delete of the session (tokens only grow). The fence function
(``<table>_fence``) is what every write reads the lease through (:data:`FENCE`). ``<table>_history`` holds the
kept past revisions of sessions that keep history (docs/history.md), each a row as a read of the session then
returned it: the document's bytes and its deltas joined (``lines``); no foreign key either, so that a
delete removes them in its own statement (:data:`DELETE`) and a blob may be put before its session's head."""

FAST_COMPRESSION: Final[LiteralString] = """
ALTER TABLE {t} ALTER COLUMN raw SET COMPRESSION lz4, ALTER COLUMN document SET COMPRESSION lz4;
ALTER TABLE {d} ALTER COLUMN line SET COMPRESSION lz4, ALTER COLUMN delta SET COMPRESSION lz4;
ALTER TABLE {h} ALTER COLUMN raw SET COMPRESSION lz4, ALTER COLUMN lines SET COMPRESSION lz4;
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

FENCE: Final[LiteralString] = "lease AS MATERIALIZED (SELECT token, ends, now FROM {f}(%(user)s, %(session)s))"
"""The first CTE of every write: the session's lease row (none: never leased), its expiry and the server's
clock, in seconds since the epoch, read by the fence function (:data:`DDL`). The function first takes the
session's advisory lock, shared (a take holds it exclusively: :data:`TAKE_LEASE`), then reads the row with a
snapshot of its own, taken after the lock: so a write either commits before a take returns, or sees the
lease the take made, even the first one of the session (a plain read would see the statement's snapshot,
taken before a concurrent take committed its new row)."""

_FENCED: Final[LiteralString] = (
    "NOT EXISTS (SELECT FROM lease WHERE ends > now AND token IS DISTINCT FROM %(fence)s::bigint) "
    "AND (%(fence)s::bigint IS NULL OR EXISTS (SELECT FROM lease WHERE ends > now))"
)
"""The fence as the write's condition (``_fence.fence_verdict`` is 0): no live lease but the one of the token the
write carries (``fence``: NULL for none), and that one live when it carries one."""

_VERDICT: Final[LiteralString] = "(SELECT token FROM lease), (SELECT ends FROM lease), (SELECT now FROM lease)"
"""What a write answers last: the lease row and the server's clock, from which ``fence_verdict`` tells the refusal."""

_INSERT: Final[LiteralString] = (
    "INSERT INTO {t} AS s (user_id, session_id, revision, raw, document, token) "
    "SELECT %(user)s, %(session)s, %(revision)s, %(raw)b, " + _DOCUMENT + ", %(token)s WHERE " + _FENCED + " "
)
WRITE_KINDS: Final[dict[str, LiteralString]] = {
    "always": _INSERT + "ON CONFLICT (user_id, session_id) DO UPDATE SET " + _SET_ROW + " RETURNING 1",
    "missing": _INSERT + "ON CONFLICT (user_id, session_id) DO NOTHING RETURNING 1",
    "revision": "UPDATE {t} SET " + _SET_ROW + " WHERE " + _KEY + " AND revision = %(expected)s AND " + _FENCED
    + " RETURNING 1",
    "base": "UPDATE {t} SET " + _SET_ROW + " WHERE " + _KEY
    + " AND token = %(base_token)s AND log_bytes = %(base_bytes)s AND " + _FENCED + " RETURNING 1",
}
"""A full write: unconditional, only if nothing is stored, only over a revision, only over a delta base;
each only if the fence lets it."""

_WRITTEN: Final[LiteralString] = (
    "dropped AS (DELETE FROM {d} WHERE " + _KEY + " AND EXISTS (SELECT FROM written)) "
    "SELECT (SELECT count(*) FROM written), (SELECT revision IS NULL FROM {t} WHERE " + _KEY + "), " + _VERDICT
)
WRITE: Final[LiteralString] = "WITH " + FENCE + ", written AS ({write}), " + _WRITTEN
"""The fence, a full write and the removal of the deltas it replaces, in one statement. Answers whether it
wrote, whether the row it found (when it did not) has deltas, so no revision to compare in SQL, and the lease
row with the server's clock (:data:`_VERDICT`)."""

_LINES: Final[LiteralString] = (
    "CASE WHEN s.deltas > 0 THEN (SELECT string_agg(d.line, ''::bytea ORDER BY d.seq) "
    "FROM {d} d WHERE d.user_id = s.user_id AND d.session_id = s.session_id AND d.token = s.token) END"
)
"""The deltas of the session row ``s``, joined in order (NULL: none)."""
_BLOB_COLUMNS: Final[LiteralString] = "INSERT INTO {h} (user_id, session_id, revision, raw, token, deltas, lines) "
KEEPING: Final[LiteralString] = (
    "WITH " + FENCE + ", written AS ({write}), "
    "kept AS (" + _BLOB_COLUMNS + "SELECT s.user_id, s.session_id, %(keep_as)s, s.raw, s.token, s.deltas, " + _LINES
    + " FROM {t} s WHERE s.user_id = %(user)s AND s.session_id = %(session)s AND %(keep_as)s::text IS NOT NULL "
    "AND EXISTS (SELECT FROM written) ON CONFLICT DO NOTHING), "
    "pruned AS (DELETE FROM {h} WHERE " + _KEY + " AND revision = ANY(%(drop)s::text[]) AND EXISTS (SELECT FROM written)), "
    + _WRITTEN
)
""":data:`WRITE` keeping history: when the write is done, the row it replaced (with its deltas) is kept as the blob
``keep_as`` and the blobs ``drop`` removed, in the same statement. Every part of a statement reads the one
snapshot taken at its start, so ``kept`` copies the row as it was before ``written`` replaced it, inside the
server (the bytes never travel), and only when it did (a blob of that name already kept holds the same bytes)."""

APPEND: Final[LiteralString] = (
    "WITH " + FENCE + ", "
    "bumped AS (UPDATE {t} SET deltas = deltas + 1, log_bytes = log_bytes + %(grew)s, revision = NULL, "
    "saved_at = now() WHERE " + _KEY + " AND token = %(base_token)s AND log_bytes = %(base_bytes)s AND " + _FENCED
    + " RETURNING deltas), "
    "added AS (INSERT INTO {d} (user_id, session_id, token, seq, line, delta) "
    "SELECT %(user)s, %(session)s, %(base_token)s, deltas, %(line)b, "
    "CASE WHEN %(queryable)s THEN convert_from(%(line)b, 'UTF8')::jsonb END FROM bumped RETURNING 1) "
    "SELECT (SELECT count(*) FROM added), " + _VERDICT
)
"""The fence and one delta: the row's count, size and time bumped if it is still the base, and the line inserted."""

AT_BASE: Final[LiteralString] = (
    "WITH " + FENCE + " SELECT EXISTS (SELECT FROM {t} WHERE " + _KEY
    + " AND token = %(base_token)s AND log_bytes = %(base_bytes)s), " + _VERDICT
)
"""A save after appends that adds nothing: whether the session is still the base, and the lease row with the clock."""

DELETE: Final[LiteralString] = (
    "WITH " + FENCE + ", gone AS (DELETE FROM {t} WHERE " + _KEY + " AND " + _FENCED + " RETURNING 1), "
    "erased AS (DELETE FROM {h} WHERE " + _KEY + " AND " + _FENCED + ") "
    "SELECT (SELECT count(*) FROM gone), " + _VERDICT
)
"""The fence, the session's row (its deltas by the foreign key) and its kept revisions (its lease row stays:
tokens only grow)."""

PUT_BLOB: Final[LiteralString] = (
    "WITH " + FENCE + ", put AS (" + _BLOB_COLUMNS
    + "SELECT %(user)s, %(session)s, %(name)s, %(raw)b, %(token)s, %(deltas)s, %(lines)b WHERE " + _FENCED
    + " ON CONFLICT DO NOTHING) SELECT " + _VERDICT
)
"""A blob stored, behind the fence, unless one of that name is there (it holds the same bytes)."""
DROP_BLOBS: Final[LiteralString] = (
    "WITH " + FENCE + ", pruned AS (DELETE FROM {h} WHERE " + _KEY + " AND revision = ANY(%(drop)s::text[]) AND "
    + _FENCED + ") SELECT " + _VERDICT
)
BLOB: Final[LiteralString] = "SELECT raw, token, deltas, lines FROM {h} WHERE " + _KEY + " AND revision = %(name)s"
"""A blob, as :data:`READ` answers a session."""
BLOBS: Final[LiteralString] = "SELECT revision FROM {h} WHERE " + _KEY

_EPOCH: Final[LiteralString] = "extract(epoch FROM expires_at)::float8"
TAKE_LEASE: Final[LiteralString] = (
    "INSERT INTO {l} AS l (user_id, session_id, token, expires_at) "
    "SELECT %(user)s, %(session)s, 1, clock_timestamp() + make_interval(secs => %(ttl)s) FROM "
    "(SELECT pg_advisory_xact_lock(hashtextextended({name} || E'\\x1f' || %(user)s || E'\\x1f' || %(session)s, 0))) "
    "AS locked ON CONFLICT (user_id, session_id) DO UPDATE SET token = l.token + 1, expires_at = EXCLUDED.expires_at "
    "WHERE l.expires_at <= clock_timestamp() RETURNING token, " + _EPOCH
)
"""The lease with the next token, unless a live one is stored (then no row): of takers at once, the row lock of
``ON CONFLICT`` lets one through, and the others see its lease. It first takes the session's advisory lock
exclusively, so it waits for the writes in flight (each holds it shared: :data:`FENCE`), and the writes after
it see its lease."""
LEASE_EXPIRY: Final[LiteralString] = "SELECT " + _EPOCH + " FROM {l} WHERE " + _KEY
"""When a lease a take found live ends (read after the take, for the caller's wait)."""
RENEW_LEASE: Final[LiteralString] = (
    "UPDATE {l} SET expires_at = clock_timestamp() + make_interval(secs => %(ttl)s) "
    "WHERE " + _KEY + " AND token = %(token)s AND expires_at > clock_timestamp() RETURNING " + _EPOCH
)
RELEASE_LEASE: Final[LiteralString] = (
    "UPDATE {l} SET expires_at = 'epoch' WHERE " + _KEY + " AND token = %(token)s"
)
"""The lease of that token ended (its expiry set to 1970-01-01), if it is still the stored one; the token stays,
so the next one is greater."""

READ: Final[LiteralString] = (
    "SELECT s.raw, s.token, s.deltas, " + _LINES + " FROM {t} s WHERE s.user_id = %(user)s AND s.session_id = %(session)s"
)
READ_LOCKED: Final[LiteralString] = READ + " FOR UPDATE OF s"

EXISTS: Final[LiteralString] = "SELECT 1 FROM {t} WHERE " + _KEY
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
            "l": sql.Identifier(f"{table}_leases"),
            "h": sql.Identifier(f"{table}_history"),
            "f": sql.Identifier(f"{table}_fence"),
            "s": sql.Identifier(SCHEMA_TABLE),
            "t_by_session": sql.Identifier(f"{table}_session_id"),
        }

        def composed(text: LiteralString, **more: sql.Composable) -> bytes:
            return sql.SQL(text).format(**names, **more).as_bytes(None)

        self.ddl = composed(DDL, name=sql.Literal(table), version=sql.Literal(SCHEMA_VERSION))
        self.fast_compression = composed(FAST_COMPRESSION)
        self.version = composed(VERSION)
        self.writes = {kind: composed(WRITE, write=sql.SQL(text).format(**names)) for kind, text in WRITE_KINDS.items()}
        self.keeping = {kind: composed(KEEPING, write=sql.SQL(text).format(**names)) for kind, text in WRITE_KINDS.items()}
        self.put_blob, self.drop_blobs = composed(PUT_BLOB), composed(DROP_BLOBS)
        self.blob, self.blobs = composed(BLOB), composed(BLOBS)
        self.append, self.at_base = composed(APPEND), composed(AT_BASE)
        self.read, self.read_locked = composed(READ), composed(READ_LOCKED)
        self.exists, self.delete = composed(EXISTS), composed(DELETE)
        self.list, self.list_some = composed(LIST), composed(LIST_SOME)
        self.owners, self.users = composed(OWNERS), composed(USERS)
        self.take_lease, self.lease_expiry = composed(TAKE_LEASE, name=sql.Literal(table)), composed(LEASE_EXPIRY)
        self.renew_lease, self.release_lease = composed(RENEW_LEASE), composed(RELEASE_LEASE)


def ddl_text(table: str = "statekit_sessions") -> str:
    """The schema's DDL as plain SQL text, for operators (``statekit init-db --print``, the docs)."""
    names = {
        "s": SCHEMA_TABLE,
        "t": table,
        "d": f"{table}_deltas",
        "l": f"{table}_leases",
        "h": f"{table}_history",
        "f": f"{table}_fence",
        "t_by_session": f"{table}_session_id",
    }
    ddl = DDL.format(**names, name=f"'{table}'", version=SCHEMA_VERSION).strip()
    optional = FAST_COMPRESSION.format(**names).strip()
    return f"{ddl}\n-- where the server has lz4 (PostgreSQL 14+ built with it); skipped where it fails:\n{optional}"
