"""A session's stored bytes cut back into the rows the SQL backends keep them in: the document, its token, each delta line.

A read of a session with deltas returns the document carrying them
(:class:`~._companion.Stored`): a newline, the header line naming the
document's token and counting the deltas, then one line per delta save. A blob
handed to ``_put_blob`` is such a read's result; these functions take it apart
so that the rows read back as the very same bytes.
"""

from __future__ import annotations

from statekit.errors import SessionError
from statekit.session._companion import split
from statekit.session.document import doc_token, header


def delta_rows(data: bytes, where: str) -> tuple[bytes, str | None, list[bytes]]:
    """The document, its token and its delta lines (each ending with its newline) that ``data`` holds.

    Args:
        data: What a read of the session returned (a plain document, or one carrying its deltas).
        where: How messages name the blob.

    Raises:
        SessionError: Deltas that are not in the form a read of this backend returns (they would not read
            back as the same bytes); nothing is stored then.
    """
    doc, log, token = split(data)
    if not log or token is None:
        return bytes(doc), doc_token(doc), []
    body = log[1:].partition(b"\n")[2]
    lines = [line + b"\n" for line in body.split(b"\n")[:-1]]
    if b"\n" + header(token, len(lines)) + b"".join(lines) != log:
        raise SessionError(
            f"{where}: the deltas given are not in the form this backend reads them back "
            "(a newline, the header line counting them, then one line each); nothing was stored"
        )
    return bytes(doc), token, lines
