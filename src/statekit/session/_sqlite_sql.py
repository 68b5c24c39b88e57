"""The SQL of ``SQLiteSession``: its schema (with its version) and every statement it runs.

Every write of a session goes through :data:`WRITE_KINDS` (a whole document) or
:data:`APPEND` (one delta), each one statement that compares and sets at once,
inside a ``BEGIN IMMEDIATE`` transaction that first reads the session's lease
(:data:`LEASE`, the fence); a save that keeps history adds :data:`DROP_BLOB` and :data:`KEEP`
before it, in the same transaction. ``{t}`` is the sessions table, ``{d}`` its deltas
table, ``{l}`` its leases table, ``{h}`` its history (the blobs of past revisions); placeholders are sqlite3's named ones. Documents and delta lines are bound as bytes and stored as TEXT
(``CAST(... AS TEXT)``: the bytes kept exactly, and ``json_extract`` works on them).
"""

from __future__ import annotations

import re
from typing import Final

from statekit.errors import SessionError

SCHEMA_VERSION: Final = 3
"""The version of the tables this statekit writes (recorded in ``statekit_schema``): 2 added the leases table,
3 the history table."""

SCHEMA_TABLE: Final = "statekit_schema"
"""The table recording, per sessions table, the version of its schema."""

_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

SCHEMA_DDL: Final = """CREATE TABLE IF NOT EXISTS statekit_schema (
    table_name TEXT    PRIMARY KEY,
    version    INTEGER NOT NULL
)"""

LEASES_DDL: Final = """CREATE TABLE "{l}" (
    user_id    TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    token      INTEGER NOT NULL, -- the last fencing token given (kept after a release and a delete: tokens only grow)
    expires_at REAL    NOT NULL, -- when the lease ends: seconds since the epoch, the local clock (0: released)
    PRIMARY KEY (user_id, session_id)
)"""
"""The leases of the sessions (issue 29), one row per session ever leased, outliving the session's row."""

HISTORY_DDL: Final = """CREATE TABLE "{h}" (
    user_id    TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    revision   TEXT    NOT NULL, -- the blob's name: the revision of the session it kept (docs/history.md)
    seq        INTEGER NOT NULL, -- 0: the document, then 1, 2, ...: its deltas, as the session held them
    token      TEXT,             -- the document's token (seq 0; append-only lists), else NULL
    saved_at   TEXT    NOT NULL, -- UTC, ISO 8601: when it was kept
    data       TEXT    NOT NULL, -- the document (seq 0) or a delta line, the bytes as they were
    PRIMARY KEY (user_id, session_id, revision, seq)
)"""
"""The kept past revisions of the sessions that keep history (issue 30): each one the rows of a read of the
session then (its document and its deltas, as :data:`READ` gives them), copied in the transaction that
replaced them (:data:`KEEP`), so that a blob reads back as the session's bytes did."""

TABLES_DDL: Final = (
    """CREATE TABLE "{t}" (
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    revision   TEXT NOT NULL, -- SHA-1 of the document (the session's revision while it has no deltas)
    token      TEXT,          -- the document's token (append-only lists), else NULL
    saved_at   TEXT NOT NULL, -- UTC, ISO 8601: when the document was written
    document   TEXT NOT NULL, -- the session document as written, JSON (last: a delta never reads it)
    PRIMARY KEY (user_id, session_id)
)""",
    'CREATE INDEX "{t}_session_id" ON "{t}" (session_id, user_id)',
    """CREATE TABLE "{d}" (
    user_id    TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    seq        INTEGER NOT NULL, -- 1, 2, ... since the document was written
    saved_at   TEXT    NOT NULL, -- UTC, ISO 8601
    line       TEXT    NOT NULL, -- the delta line (items appended by one save), JSON
    PRIMARY KEY (user_id, session_id, seq)
)""",
    LEASES_DDL,
    HISTORY_DDL,
)
"""The tables of one sessions table name, made with its ``statekit_schema`` row (docs/sessions.md shows them).

A delta touches only the deltas table: SQLite rewrites a whole row when any of its
columns changes, so no counter lives beside the document (the deltas' count is their
highest ``seq``, found in the primary key's index). The leases live in a table of their own for the same
reason (a lease taken or renewed would rewrite the document), and so that a lease's row outlives a delete
of the session's row and exists before the session does."""

UPGRADES: Final = {1: (LEASES_DDL,), 2: (HISTORY_DDL,)}
"""What brings the tables of a version up to the next one, run in place on first use (in one transaction)."""

_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
_KEY = "user_id = :user AND session_id = :session"
_DELTAS = '(SELECT coalesce(max(seq), 0) FROM "{d}" WHERE ' + _KEY + ")"
_SET_ROW = "revision = :revision, token = :token, saved_at = " + _NOW + ", document = CAST(:document AS TEXT)"
_INSERT = (
    'INSERT INTO "{t}" (user_id, session_id, revision, token, saved_at, document) '
    "VALUES (:user, :session, :revision, :token, " + _NOW + ", CAST(:document AS TEXT)) "
)
_AT_BASE = "token = :base_token AND " + _DELTAS + " = :base_count"

WRITE_KINDS: Final = {
    "always": _INSERT + "ON CONFLICT (user_id, session_id) DO UPDATE SET " + _SET_ROW,
    "missing": _INSERT + "ON CONFLICT (user_id, session_id) DO NOTHING",
    "revision": 'UPDATE "{t}" SET ' + _SET_ROW + " WHERE " + _KEY + " AND revision = :expected AND " + _DELTAS + " = 0",
    "base": 'UPDATE "{t}" SET ' + _SET_ROW + " WHERE " + _KEY + " AND " + _AT_BASE,
}
"""A whole document: unconditionally, only if nothing is stored, only over a revision (of a document without
deltas), only over a delta base (the document's token and how many deltas follow it)."""

DROP_DELTAS: Final = 'DELETE FROM "{d}" WHERE ' + _KEY
"""After a whole document is written: the deltas of the one it replaced."""

APPEND: Final = (
    'INSERT INTO "{d}" (user_id, session_id, seq, saved_at, line) '
    "SELECT :user, :session, :base_count + 1, " + _NOW + ', CAST(:line AS TEXT) FROM "{t}" WHERE ' + _KEY + " AND " + _AT_BASE
)
"""One delta, inserted only if the session is still the base: one statement."""

AT_BASE: Final = 'SELECT 1 FROM "{t}" WHERE ' + _KEY + " AND " + _AT_BASE
LEASE: Final = 'SELECT token, expires_at FROM "{l}" WHERE ' + _KEY
"""The session's lease record (none: never leased): what the fence of every write reads first, in its transaction."""
SET_LEASE: Final = (
    'INSERT INTO "{l}" (user_id, session_id, token, expires_at) VALUES (:user, :session, :token, :expires_at) '
    "ON CONFLICT (user_id, session_id) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at"
)
"""A lease taken (a new token) or renewed (the same token), after :data:`LEASE` was read in the same transaction."""
END_LEASE: Final = 'UPDATE "{l}" SET expires_at = 0 WHERE ' + _KEY + " AND token = :token"
"""A lease released, if it is still the lease of that token; the token stays, so the next one is greater."""
READ: Final = 'SELECT 0, document, token FROM "{t}" WHERE ' + _KEY + ' UNION ALL SELECT seq, line, NULL FROM "{d}" WHERE ' + _KEY
"""A session's document (``seq`` 0) and its deltas, in one statement (so from one snapshot)."""
EXISTS: Final = 'SELECT 1 FROM "{t}" WHERE ' + _KEY
DELETE: Final = 'DELETE FROM "{t}" WHERE ' + _KEY
KEEP: Final = (
    'INSERT OR IGNORE INTO "{h}" (user_id, session_id, revision, seq, token, saved_at, data) '
    'SELECT user_id, session_id, :name, 0, token, ' + _NOW + ', document FROM "{t}" WHERE ' + _KEY + " UNION ALL "
    'SELECT user_id, session_id, :name, seq, NULL, ' + _NOW + ', line FROM "{d}" WHERE ' + _KEY
)
"""The session as stored (its document and deltas) kept as the blob ``:name``, copied inside SQLite, in the
transaction of the write that replaces it (before it); a blob of that name already kept holds the same bytes."""
PUT_BLOB: Final = (
    'INSERT OR IGNORE INTO "{h}" (user_id, session_id, revision, seq, token, saved_at, data) '
    "VALUES (:user, :session, :name, :seq, :token, " + _NOW + ", CAST(:data AS TEXT))"
)
BLOB: Final = 'SELECT seq, data, token FROM "{h}" WHERE ' + _KEY + " AND revision = :name"
"""A blob's rows, as :data:`READ` gives a session's (the document at ``seq`` 0)."""
BLOBS: Final = 'SELECT revision FROM "{h}" WHERE ' + _KEY + " AND seq = 0"
DROP_BLOB: Final = 'DELETE FROM "{h}" WHERE ' + _KEY + " AND revision = :name"
DROP_HISTORY: Final = 'DELETE FROM "{h}" WHERE ' + _KEY
"""A delete of the session: its blobs too, in its transaction."""
LIST: Final = 'SELECT session_id FROM "{t}" WHERE user_id = :user'
LIST_SOME: Final = LIST + " ORDER BY session_id LIMIT :limit"
OWNERS: Final = 'SELECT user_id FROM "{t}" WHERE session_id = :session ORDER BY user_id LIMIT :limit'
USERS: Final = 'SELECT DISTINCT user_id FROM "{t}"'
VERSION: Final = "SELECT version FROM statekit_schema WHERE table_name = :table"
TABLE_EXISTS: Final = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :table"
RECORD_VERSION: Final = "INSERT INTO statekit_schema (table_name, version) VALUES (:table, :version)"
RAISE_VERSION: Final = "UPDATE statekit_schema SET version = :version WHERE table_name = :table"


def check_table(table: object) -> str:
    """A sessions table name: a plain SQL identifier (its deltas table adds ``_deltas``).

    Raises:
        SessionError: Anything else, saying what a name may hold.
    """
    if not isinstance(table, str) or _TABLE_NAME.fullmatch(table) is None or table.lower() == SCHEMA_TABLE:
        raise SessionError(
            f"table must be a plain SQL name (a letter or _, then letters, digits or _, at most 63) "
            f"other than {SCHEMA_TABLE!r}, got {table!r}"
        )
    return table


class Statements:
    """The statements of one sessions table, with its name filled in once."""

    def __init__(self, table: str) -> None:
        names = _names(table)
        self.table = table
        self.tables_ddl = tuple(text.format(**names) for text in TABLES_DDL)
        self.upgrades = {version: tuple(text.format(**names) for text in texts) for version, texts in UPGRADES.items()}
        self.writes = {kind: text.format(**names) for kind, text in WRITE_KINDS.items()}
        self.drop_deltas, self.append = DROP_DELTAS.format(**names), APPEND.format(**names)
        self.at_base, self.read = AT_BASE.format(**names), READ.format(**names)
        self.exists, self.delete = EXISTS.format(**names), DELETE.format(**names)
        self.list, self.list_some, self.owners, self.users = (s.format(**names) for s in (LIST, LIST_SOME, OWNERS, USERS))
        self.lease, self.set_lease, self.end_lease = (s.format(**names) for s in (LEASE, SET_LEASE, END_LEASE))
        self.keep, self.put_blob, self.blob = KEEP.format(**names), PUT_BLOB.format(**names), BLOB.format(**names)
        self.blobs, self.drop_blob, self.drop_history = (s.format(**names) for s in (BLOBS, DROP_BLOB, DROP_HISTORY))


def _names(table: str) -> dict[str, str]:
    return {"t": table, "d": f"{table}_deltas", "l": f"{table}_leases", "h": f"{table}_history"}


def ddl_text(table: str = "statekit_sessions") -> str:
    """The schema's DDL as plain SQL text, for operators (the docs show it)."""
    names = _names(table)
    record = f"INSERT INTO statekit_schema (table_name, version) VALUES ('{table}', {SCHEMA_VERSION})"
    return ";\n".join([SCHEMA_DDL, *(text.format(**names) for text in TABLES_DDL), record]) + ";\n"
