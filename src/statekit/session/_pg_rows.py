"""``PostgresSession``'s rows: the columns a document is written as, and the bytes a session's row (or a kept blob's) reads back as."""

from __future__ import annotations

from typing import Any, Final

from statekit.session._companion import joined
from statekit.session._delta_rows import delta_rows
from statekit.session._revisions import revision_of
from statekit.session.document import doc_token, header

NUL_ESCAPE: Final = b"\\u0000"
"""JSON's escape of the character U+0000, which ``jsonb`` cannot store (the row's ``jsonb`` copy is then NULL)."""


def row_of(data: bytes) -> dict[str, Any]:
    """The columns of a full write of ``data``."""
    return {
        "raw": data,
        "revision": revision_of(data),
        "token": doc_token(data),
        "queryable": NUL_ESCAPE not in data,
    }


def stored(row: tuple[Any, ...]) -> bytes:
    """The bytes a read returns (``raw``, ``token``, ``deltas``, the joined lines: ``_pg_sql.READ``, ``_pg_sql.BLOB``):
    the document, carrying its deltas (as a Redis value holds them) when it has any."""
    raw, token, count, lines = bytes(row[0]), row[1], row[2], row[3]
    if not count or token is None:
        return raw
    return joined(raw, b"\n" + header(token, count) + bytes(lines or b""), token)


def blob_of(data: bytes, where: str) -> dict[str, Any]:
    """The columns of a blob holding ``data`` (what a read returned: :func:`stored` gives it back).

    Raises:
        SessionError: Deltas not in the form a read returns them (see :func:`~._delta_rows.delta_rows`).
    """
    document, token, lines = delta_rows(data, where)
    return {"raw": document, "token": token, "deltas": len(lines), "lines": b"".join(lines) if lines else None}
