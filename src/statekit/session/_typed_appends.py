"""The typed decode of a document with a token: the token checked, its deltas appended to its mirrors.

A session document with append-only lists (see :mod:`._appends`) takes the
typed load (:mod:`statekit.state.typed`) as a plain one does, when it is
well-formed: its token where readers find it, and every delta line the next
one of this document, appending items of the list's type to a list. Anything
else declines, and the full load says what is wrong, with positions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from statekit._limits import too_deep_below
from statekit.errors import DocumentError
from statekit.state.typed import meta_as, meta_of
from statekit.state.typed_lists import extend_at
from statekit.session._appends import deltas, is_delta
from statekit.session._history_index import HeadHistory, parse_index_json
from statekit.session.document import HISTORY_FORMAT, TypedMeta, doc_token


def with_deltas(document: Any, body: bytes, log: bytes, token: str | None) -> Any:
    """A typed document (see :func:`~statekit.state.typed.decode`) with its metadata checked and
    the deltas of ``log`` appended; ``None`` when the full load must run (it says why).

    Args:
        document: The document's mirrors, as decoded from ``body``.
        body: The document's bytes (without a byte order mark).
        log: Its companion's complete lines (``b""``: none).
        token: The token the companion names (``None``: no companion was read).
    """
    if (token is not None and not log) or not meta_as(document, TypedMeta):
        return None  # a companion beside a document without a token in its head, or metadata to look at
    own = token_of_typed(document)
    if own is not None and doc_token(body) != own:
        return None  # the token is not where readers find it
    if not log:
        return document
    if own is None or own != token or not _appended(document, log, own):
        return None
    return document


def token_of_typed(document: Any) -> str | None:
    """The token in a typed document's metadata (``None``: it has none)."""
    meta = meta_of(document)
    token: str | None = None if meta is None else meta.token
    return token


def history_of_typed(document: Any, source: Callable[[], str]) -> HeadHistory | None:
    """The history index in a typed document's metadata (``None``: it keeps none).

    Raises:
        DocumentError: A malformed index.
    """
    meta = meta_of(document)
    if meta is None or meta.history is None:
        return None
    return parse_index_json(bytes(meta.history), source) if meta.format == HISTORY_FORMAT else None


def _appended(document: Any, log: bytes, token: str) -> bool:
    """Append every delta of ``log`` to the document's lists; ``False`` when one does not fit."""
    try:
        lines = deltas(log, token, "")
    except DocumentError:
        return False
    for entries in lines:
        if not isinstance(entries, list):
            return False
        for entry in entries:
            if not is_delta(entry) or too_deep_below(entry[1], len(entry[0])) is not None:
                return False
            if not extend_at(document, entry[0], entry[1]):
                return False
    return True
