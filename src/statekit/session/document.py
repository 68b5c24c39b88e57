"""The session document format, in one place: its metadata key and formats, the token, the companion's header.

A session document maps module names to their states, with statekit's
metadata first::

    {"__statekit__": {"format": 1}, "agent": {...}, "notes": {...}}

A document whose modules hold append-only lists carries a random token
(format 2), and whether items were appended beside it::

    {"__statekit__": {"format": 2, "log": "9f2c4e1a0b7d3c55", "deltas": 1}, "agent": {...}}

Those items follow in a companion (a JSON file's ``.log``, the rest of a Redis
value) that starts with a header line naming the document's token and counting
the deltas (see :mod:`._proofs` for the delta lines)::

    {"statekit_log":2,"document":"9f2c4e1a0b7d3c55","deltas":2           }

A session that keeps history (format 3) carries its history's index after the
token (see :mod:`._history_index` for what ``"history"`` holds; on Redis the
records are kept beside the head, and ``"history"`` names the newest one)::

    {"__statekit__": {"format": 3, "history": {"keep": 20, "saved_at": "...", "kept": [...]}}, "agent": {...}}

The token must come within the document's first :data:`HEAD_BYTES` bytes,
where readers (and the Redis scripts, :func:`token_mark`) find it without
decoding the document.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec
import orjson

from statekit.values.plain import describe
from statekit.errors import DocumentError

META_KEY: Final = "__statekit__"
"""The reserved top-level key of a session document; no module may use it."""

FORMAT_KEY: Final = "format"
"""The metadata key holding the document's format."""

FORMAT_VERSION: Final = 1
"""The version of the session document this statekit writes when it has no deltas."""

APPENDS_FORMAT: Final = 2
"""The session format of a document with a token: older statekits refuse it
instead of loading it without its deltas."""

HISTORY_FORMAT: Final = 3
"""The session format of a document that keeps history: older statekits refuse it instead of
writing over it without its history."""

HISTORY_KEY: Final = "history"
"""The metadata key holding the history's index (a document of :data:`HISTORY_FORMAT`), after the token."""

TOKEN_KEY: Final = "log"
"""The metadata key holding the document's token (a document with deltas)."""

DELTAS_KEY: Final = "deltas"
"""The metadata key of a document with a token that says whether deltas were stored beside it:
``0`` when written, ``1`` once a file's companion holds some (set in place, see
:mod:`._companion`), so that a load refuses the document found without them."""

HEAD_BYTES: Final = 512
"""The document's metadata (and so its token) must come within its first bytes."""

_FORMATS: Any = Literal[FORMAT_VERSION, APPENDS_FORMAT, HISTORY_FORMAT]

TypedMeta: Any = msgspec.defstruct(
    "TypedMeta",
    [
        ("format", _FORMATS, msgspec.field(name=FORMAT_KEY)),
        ("token", str | None, msgspec.field(name=TOKEN_KEY, default=None)),
        ("deltas", int, msgspec.field(name=DELTAS_KEY, default=0)),
        ("history", msgspec.Raw, msgspec.field(name=HISTORY_KEY, default=None)),  # None when absent
    ],
    forbid_unknown_fields=True,
)
"""The metadata, as the typed load (:mod:`statekit.state.typed`) decodes it: statekit's
own keys only (other metadata takes the full path); ``token``: the document's, if any."""

BOM: Final = b"\xef\xbb\xbf"
"""A UTF-8 byte order mark, which a JSON document may start with."""

LOG_FORMAT: Final = 2
"""The format of the delta lines this statekit writes (1: deltas alone, no sequence or checksum)."""

LOG_KEY: Final = "statekit_log"
"""The companion header's key holding the format of its delta lines."""

LOG_DOCUMENT_KEY: Final = "document"
"""The companion header's key naming the token of the document its deltas belong to."""

LOG_COUNT_KEY: Final = "deltas"
"""The companion header's key counting the deltas saved (a fixed-width number, rewritten in place)."""

_COUNT_WIDTH = 12


def _in_meta(key: str, value: bytes) -> re.Pattern[bytes]:
    """A pattern of a document's first bytes: ``key`` in its metadata, ``value`` its first group."""
    meta, name = re.escape(META_KEY.encode()), re.escape(key.encode())
    return re.compile(rb'\A(?:%s)?\s*\{\s*"%s"\s*:\s*\{[^{}]*?"%s"\s*:\s*%s' % (re.escape(BOM), meta, name, value))


_FORMAT = _in_meta(FORMAT_KEY, rb"([0-9]+)\b")
_HEAD = _in_meta(TOKEN_KEY, rb'"([0-9a-f]{1,64})"')
_FLAG = _in_meta(DELTAS_KEY, rb"([01])\b")
_COUNT = re.compile(rb'"%s":([0-9]+ *)\}$' % re.escape(LOG_COUNT_KEY.encode()))


# -- the document ------------------------------------------------------------------------


def plain_document(states: Mapping[str, Any], history: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A session document without deltas: statekit's metadata (with the history's index, if it
    keeps history), then the module states."""
    if history is None:
        return {META_KEY: {FORMAT_KEY: FORMAT_VERSION}, **states}
    return {META_KEY: {FORMAT_KEY: HISTORY_FORMAT, HISTORY_KEY: history}, **states}


def appends_document(token: str, states: Mapping[str, Any], history: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A session document with append-only lists, new at a full write: its token, no deltas yet (and the
    history's index, after the token and the flag, where readers find them in the first bytes)."""
    if history is None:
        return {META_KEY: {FORMAT_KEY: APPENDS_FORMAT, TOKEN_KEY: token, DELTAS_KEY: 0}, **states}
    return {META_KEY: {FORMAT_KEY: HISTORY_FORMAT, TOKEN_KEY: token, DELTAS_KEY: 0, HISTORY_KEY: history}, **states}


def token_of(document: Mapping[str, Any]) -> str | None:
    """The document's token (``None``: it has no deltas)."""
    meta = document.get(META_KEY)
    token = meta.get(TOKEN_KEY) if isinstance(meta, dict) else None
    return token if isinstance(token, str) else None


def without_token(data: Mapping[str, Any]) -> dict[str, Any]:
    """A document to show or write whole: its metadata without the token (and so without deltas)
    and without the history's index (past revisions are the stored session's, not the document's)."""
    out = dict(data)
    meta = out.get(META_KEY)
    if isinstance(meta, dict) and (TOKEN_KEY in meta or HISTORY_KEY in meta):
        kept = {k: v for k, v in meta.items() if k not in (TOKEN_KEY, DELTAS_KEY, HISTORY_KEY)}
        out[META_KEY] = {**kept, FORMAT_KEY: FORMAT_VERSION}
    return out


def meta_format(head: bytes) -> int | None:
    """The format a JSON document's metadata names, from its first :data:`HEAD_BYTES` bytes
    (``None``: not found there, e.g. not JSON, or no metadata)."""
    found = _FORMAT.match(head[:HEAD_BYTES])
    return None if found is None else int(found.group(1))


def with_meta(data: object, source: str) -> dict[str, Any]:
    """A plain document given to be written whole (``write_document()``), with statekit's metadata.

    Raises:
        DocumentError: It is not a mapping, or its metadata is of a format this statekit does not read.
    """
    if not isinstance(data, Mapping):
        kind = type(data).__name__
        raise DocumentError(f"a session document maps module names to states, not a {kind}", source=source)
    if META_KEY in data:
        check_meta(data[META_KEY], source)
        return without_token(data)  # written whole: deltas stored beside an older document are not its
    return plain_document(data)


def as_session(document: object, source: str) -> dict[str, Any]:
    """Decoded data as a session document: a mapping of module names to states.

    Raises:
        DocumentError: It is something else (a list, a string, empty), saying what.
    """
    if not isinstance(document, dict):
        kind = "empty" if document is None else type(document).__name__
        raise DocumentError(f"a session document maps module names to states; this one is {kind}", source=source)
    return document


def check_meta(meta: object, source: str) -> None:
    """Refuse a document's ``__statekit__`` metadata unless this statekit reads its format.

    Raises:
        DocumentError: The format is not an integer, or is newer than this statekit reads.
    """
    if not isinstance(meta, dict):
        raise DocumentError(f"{META_KEY} should be an object holding the format, got {describe(meta)}", source=source)
    version = meta.get(FORMAT_KEY)
    if not isinstance(version, int) or isinstance(version, bool):
        raise DocumentError(f"{META_KEY}.{FORMAT_KEY} should be an integer, got {version!r}", source=source)
    if version > HISTORY_FORMAT:
        raise DocumentError(
            f"written in session format {version} by a newer statekit; this one reads up to {HISTORY_FORMAT}",
            source=source,
        )


# -- the document's first bytes ----------------------------------------------------------


def doc_token(head: bytes) -> str | None:
    """The token in a document's metadata, from its first :data:`HEAD_BYTES` bytes."""
    found = _HEAD.match(head[:HEAD_BYTES])
    return None if found is None else found.group(1).decode()


def deltas_flag(head: bytes) -> tuple[int, bool] | None:
    """Where a document's ``"deltas"`` digit is in its first bytes, and whether it says
    a companion holds deltas (``None``: the document has no such flag there)."""
    found = _FLAG.match(head[:HEAD_BYTES])
    return None if found is None else (found.start(1), found.group(1) == b"1")


def has_deltas(doc: bytes) -> bool:
    """Whether a document's metadata says a companion holds deltas of it (see ``DELTAS_KEY``)."""
    flag = deltas_flag(doc)
    return flag is not None and flag[1]


def token_mark(token: str) -> str:
    """What a compact JSON document's first bytes hold when its token is ``token`` (the Redis
    scripts look for it within the first :data:`HEAD_BYTES` bytes)."""
    return f'"{TOKEN_KEY}":"{token}"'


# -- the companion's header --------------------------------------------------------------


def header(token: str, count: int | None = None) -> bytes:
    """The first line of a companion: which document its deltas belong to, their format and
    (``count``, in a file) how many were saved, a fixed-width number rewritten in place by each save."""
    line = orjson.dumps({LOG_KEY: LOG_FORMAT, LOG_DOCUMENT_KEY: token})
    if count is not None:
        line = line[:-1] + b',"%s":%s}' % (LOG_COUNT_KEY.encode(), count_field(count))
    return line + b"\n"


def header_of(line: bytes) -> tuple[int, str, int | None] | None:
    """The format, document token and count of saved deltas (``None``: not kept) a companion's
    first line names; ``None``: not a header."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    version, token, count = data.get(LOG_KEY), data.get(LOG_DOCUMENT_KEY), data.get(LOG_COUNT_KEY)
    if version not in (1, LOG_FORMAT) or type(version) is not int or not isinstance(token, str):
        return None
    return version, token, count if type(count) is int else None


def header_token(line: bytes) -> str | None:
    """The document token a companion's first line names (``None``: not a header)."""
    found = header_of(line)
    return None if found is None else found[1]


def count_at(head: bytes) -> int | None:
    """Where the count of saved deltas is in a companion's first bytes (``None``: it keeps none)."""
    found = _COUNT.search(head[: head.find(b"\n")])
    return None if found is None else found.start(1)


def count_field(count: int) -> bytes:
    """The bytes of the count of saved deltas, always as wide."""
    return b"%-*d" % (_COUNT_WIDTH, count)
