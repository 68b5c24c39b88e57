"""JSON codec: plain JSON data <-> UTF-8 bytes, with orjson and msgspec.

msgspec decodes (faster than ``orjson.loads`` on large documents, and it
builds the objects without orjson's intermediate buffers: a 46 MB session
peaks at about 120 MiB instead of 670). Any document msgspec refuses is read
again by orjson, whose errors name the line and column. The two agree on every
document except integers beyond 64 bits, which msgspec keeps exact (orjson
made them floats); the encoder refuses to write them back, as before.

Output is pretty-printed (two-space indent, trailing newline) so that session
files read well and diff well. Only plain JSON data is accepted: ``str``,
``int``, ``float``, ``bool``, ``None``, ``list`` (or ``tuple``) and ``dict``
with ``str`` keys; anything else is a :class:`~statekit.errors.StateDumpError`
naming the path, raised before a single byte is written.
"""

from __future__ import annotations

import json as _stdlib_json
import re
from collections.abc import Iterable
from typing import Any

import msgspec
import orjson

from statekit._limits import depth_message, path_too_deep, shallow_bytes, shallow_indented, too_deep
from statekit.codecs._nonjson import diagnose
from statekit.codecs._positions import Path, Position, first_bad_value, line_columns, nearest, prefixes
from statekit.errors import DocumentError, StateDumpError

SUFFIX = ".json"

_DUMP_OPTIONS = (
    orjson.OPT_INDENT_2
    | orjson.OPT_APPEND_NEWLINE
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
_COMPACT_OPTIONS = _DUMP_OPTIONS & ~orjson.OPT_INDENT_2 & ~orjson.OPT_APPEND_NEWLINE
_BOM = b"\xef\xbb\xbf"
_DECODER = msgspec.json.Decoder()
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.DOTALL)


def dumps(data: Any) -> bytes:
    """Encode plain JSON data as pretty-printed UTF-8 JSON.

    Args:
        data: Plain JSON data (for a session, a mapping of module states).

    Returns:
        The bytes, ending with a newline.

    Raises:
        StateDumpError: A value is not JSON data (a lone surrogate, a non-``str``
            key, an integer beyond 64 bits, an object); the problem names its path.
    """
    return _dumps(data, _DUMP_OPTIONS)


def dumps_compact(data: Any) -> bytes:
    """Like :func:`dumps`, without indentation or final newline (for Redis)."""
    return _dumps(data, _COMPACT_OPTIONS)


def _dumps(data: Any, options: int) -> bytes:
    try:
        out = orjson.dumps(data, option=options)
    except orjson.JSONEncodeError as err:
        raise StateDumpError([first_bad_value(data, int64=True)]) from err
    shallow = shallow_indented if options & orjson.OPT_INDENT_2 else shallow_bytes
    if not shallow(out) and too_deep(data):
        raise StateDumpError([first_bad_value(data, int64=True)])
    return out


def loads(raw: bytes, source: str | None = None) -> Any:
    """Decode UTF-8 JSON bytes (a leading byte order mark is allowed).

    Args:
        raw: The document.
        source: Where it came from (a file name), for error messages.

    Returns:
        The plain JSON data.

    Raises:
        DocumentError: The bytes are not JSON, or nest deeper than
            ``MAX_DEPTH``; names the line and column.
    """
    if raw[:3] == _BOM:
        raw = raw[3:]
    try:
        data = _DECODER.decode(raw)
    except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
        data = _orjson_loads(raw, source)  # the same refusal, with its line and column
    if not shallow_bytes(raw) and too_deep(data):
        raise _depth_error(raw, data, source)
    return data


def _orjson_loads(raw: bytes, source: str | None) -> Any:
    try:  # a view: orjson refuses a bytes subclass (a session read with its deltas)
        return orjson.loads(memoryview(raw))
    except orjson.JSONDecodeError as err:
        raise _document_error(raw, err, source) from None


def loads_unique(raw: bytes, source: str | None = None) -> Any:
    """Like :func:`loads`, and refuse a key written twice in one object.

    orjson keeps the last of two equal keys without a word; config files and
    ``statekit validate`` use this slower, stricter read (see docs/sessions.md
    for why session loads do not).

    Raises:
        DocumentError: As :func:`loads`, or a duplicate key, at the second one.
    """
    data = loads(raw, source)
    text = raw.removeprefix(_BOM).decode("utf-8")
    duplicate = _first_duplicate(text) if _has_duplicates(text) else None
    if duplicate is not None:
        key, offset = duplicate
        line, column = line_columns(text, [offset])[offset]
        reason = f"invalid JSON: the key {key!r} appears twice in this object (the second would replace the first)"
        raise DocumentError(reason, source=source, line=line, column=column)
    return data


class _DuplicateKeyError(Exception):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _DuplicateKeyError
    return out


def _has_duplicates(text: str) -> bool:
    try:
        _stdlib_json.loads(text, object_pairs_hook=_unique_pairs)
    except _DuplicateKeyError:
        return True
    return False


def _first_duplicate(text: str) -> tuple[str, int] | None:
    """The first key written twice in one object, and its second offset."""
    stack: list[tuple[set[str], list[bool]] | None] = []  # objects: (keys, [want_key]); arrays: None
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "{[":
            stack.append((set(), [True]) if token == "{" else None)
        elif token in "}]":
            stack.pop()
        elif stack and stack[-1] is not None:
            keys, want_key = stack[-1]
            if token in ",:":
                want_key[0] = token == ","
            elif want_key[0]:
                key = _key_text(token)
                if key in keys:
                    return key, match.start()
                keys.add(key)
    return None


def _depth_error(raw: bytes, data: Any, source: str | None) -> DocumentError:
    path = path_too_deep(data)
    line, column = locate(raw, [path]).get(path, (None, None)) if path is not None else (None, None)
    return DocumentError(depth_message(), source=source, line=line, column=column)


def _document_error(raw: bytes, err: orjson.JSONDecodeError, source: str | None) -> DocumentError:
    error = _syntax_error(raw, err, source)
    written_by_python = diagnose(raw)  # NaN, Infinity, lone surrogates: the first is where decoding stopped
    if written_by_python is not None:
        return DocumentError(written_by_python[1], source=source, line=error.line, column=error.column)
    return error


def _syntax_error(raw: bytes, err: orjson.JSONDecodeError, source: str | None) -> DocumentError:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        line = raw.count(b"\n", 0, bad.start) + 1
        column = len(raw[raw.rfind(b"\n", 0, bad.start) + 1 : bad.start].decode("utf-8")) + 1  # in characters
        return DocumentError("invalid JSON: the bytes are not UTF-8", source=source, line=line, column=column)
    if err.msg.startswith("depth limit exceeded"):
        return DocumentError(depth_message(), source=source, line=err.lineno, column=err.colno)
    return DocumentError(f"invalid JSON: {err.msg}", source=source, line=err.lineno, column=err.colno)


def locate(raw: bytes, paths: Iterable[Path]) -> dict[Path, Position]:
    """Find where paths sit in a JSON document (for error messages only).

    One scan of the text; subtrees off every requested path are skipped over
    without building their paths. A mapping member is placed at its key.

    Args:
        raw: The document, as it was loaded.
        paths: The paths of the problems.

    Returns:
        ``path -> (line, column)``; a path missing from the document gets the
        position of its nearest existing ancestor.
    """
    targets = [tuple(path) for path in paths]
    text = raw.removeprefix(_BOM).decode("utf-8", "replace")
    offsets = _JSONScanner(text, prefixes(targets)).scan()
    columns = line_columns(text, offsets.values())
    return nearest({path: columns[offset] for path, offset in offsets.items()}, targets)


class _Frame:
    """One open container while scanning: its path (``None`` when off every target)."""

    __slots__ = ("index", "is_object", "key", "key_offset", "path", "want_key")

    def __init__(self, path: Path | None, is_object: bool) -> None:
        self.path = path
        self.is_object = is_object
        self.want_key = is_object
        self.index = 0
        self.key = ""
        self.key_offset = 0

    def child(self) -> Path | None:
        """The path of the value that starts now, ``None`` when not tracked."""
        if self.path is None:
            return None
        return (*self.path, self.key if self.is_object else self.index)


class _JSONScanner:
    """A token scan of JSON text that records where wanted paths start."""

    def __init__(self, text: str, wanted: set[Path]) -> None:
        self.text = text
        self.wanted = wanted
        self.found: dict[Path, int] = {}
        self.stack: list[_Frame] = []

    def scan(self) -> dict[Path, int]:
        """Scan the whole text; return ``path -> character offset``."""
        for match in _TOKEN.finditer(self.text):
            self._token(match.group(), match.start())
        return self.found

    def _token(self, token: str, offset: int) -> None:
        first = token[0]
        if not self.stack:
            self._value(None, first, offset)
            return
        top = self.stack[-1]
        if first == ",":
            top.want_key = top.is_object
            top.index += 1
        elif first == ":":
            top.want_key = False
        elif first in "}]":
            self.stack.pop()
        elif top.want_key:
            top.key, top.key_offset = _key_text(token), offset
        else:
            self._value(top, first, offset)

    def _value(self, top: _Frame | None, first: str, offset: int) -> None:
        path = () if top is None else top.child()
        if path is not None and path in self.wanted:
            keyed = top is not None and top.is_object
            # the last of two equal keys: the value the decoders keep
            self.found[path] = top.key_offset if keyed and top is not None else offset
        else:
            path = None
        if first in "{[":
            self.stack.append(_Frame(path, is_object=first == "{"))


def _key_text(token: str) -> str:
    if "\\" not in token:
        return token[1:-1]
    try:
        return str(_stdlib_json.loads(token))
    except ValueError:
        return token[1:-1]
