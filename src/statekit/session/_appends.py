"""Append-only lists: what changed since the last load or save, and the delta that saves it.

A session document whose modules hold ``state_field(append_only=True)`` lists
carries a random ``token`` in its metadata (``"log"``), new at every full write.
Items appended later are stored beside it (a file's companion, a Redis list),
one delta per save, each delta naming its lists by their path from the
document's root. A load reads the document and its deltas as one state.

A session object remembers, per session, a :class:`DeltaBase`: the document
as it encodes without its append-only lists (the *skeleton*), and the items
each list held. A save takes the delta path only when the skeleton is
byte-for-byte the same and every list still starts with exactly the remembered
items (the same objects: items are immutable, so the same object is the same
data); anything else is a full rewrite, so a change is never missed.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

import attrs

from statekit.values.census import checks_deferred
from statekit.state.dump import Held, HeldList, encode_held, item_problem
from statekit._limits import depth_message, too_deep_below
from statekit.codecs import json as _json
from statekit.errors import DocumentError, PathSegment, Problem, StateDumpError
from statekit.session._prefix import Prefix
from statekit.session._proofs import check, last, seal, start
from statekit.session.document import LOG_FORMAT, header_of

Path = tuple[PathSegment, ...]

COMPACT_MIN_BYTES = 1 << 20
"""Deltas are folded into the document (a full rewrite) once they pass this size
and a quarter of the document's."""

def new_token() -> str:
    """A fresh random document token (16 hex digits)."""
    return secrets.token_hex(8)


@attrs.frozen
class DeltaBase:
    """What a stored session with append-only lists holds, as a session object last saw it.

    Attributes:
        token: The document's token.
        log_len: Bytes of the deltas' complete lines stored with it (0: none yet).
        doc_len: Bytes of the document (for the compaction threshold).
        skeleton: The document without metadata, its append-only lists as ``null``, encoded.
        items: The saved items of each append-only list, by path.
        count: The delta lines stored (see :mod:`._proofs`).
        chain: The last one's checksum.
        revision: The stored revision, when a delta save named it (a session that keeps history;
            ``None``: ask the expectation holding this base).
    """

    token: str
    log_len: int
    doc_len: int
    skeleton: bytes = attrs.field(repr=False)
    items: Mapping[Path, Prefix] = attrs.field(repr=False)
    count: int = 0
    chain: int = 0
    revision: str | None = None

    def sealed(self, deltas: bytes, record: tuple[str, str] | None = None) -> tuple[bytes, int]:
        """The delta line of ``deltas`` that follows the stored ones, and its checksum (``record``: the
        revision it is saved over and when, see :func:`~._proofs.seal`)."""
        return seal(deltas, self.count + 1, self.chain if self.count else start(self.token), record)

    def after(
        self, written: int, items: Mapping[Path, Prefix], chain: int | None, revision: str | None = None
    ) -> DeltaBase:
        """The base once ``written`` more bytes of deltas made the lists hold ``items``
        (``chain``: the checksum of the line added; ``None``: no line was; ``revision``: the one stored now)."""
        if chain is None:
            return attrs.evolve(self, log_len=self.log_len + written, items=items, revision=revision or self.revision)
        return attrs.evolve(
            self, log_len=self.log_len + written, items=items, count=self.count + 1, chain=chain, revision=revision
        )

    def compacts(self, more: int) -> bool:
        """Whether deltas of ``more`` bytes would take the stored ones past the threshold."""
        return self.log_len + more > max(COMPACT_MIN_BYTES, self.doc_len // 4)


def skeleton_bytes(skeleton: Mapping[str, Any]) -> bytes:
    """The skeleton's bytes: the compact encoding the comparison uses."""
    return _json.dumps_compact(skeleton)


def new_items(base: DeltaBase | None, skeleton: bytes, held: Held) -> list[tuple[HeldList, int]] | None:
    """Each list with the index its new items start at, if only appends happened since ``base``.

    Returns:
        ``None`` when anything else changed (a full rewrite is due).
    """
    if base is None or skeleton != base.skeleton or len(held) != len(base.items):
        return None
    out: list[tuple[HeldList, int]] = []
    for entry in held:
        saved = base.items.get(entry.path)
        if saved is None or not saved.starts(entry.value):
            return None
        out.append((entry, saved.length))
    return out


def saved_after(base: DeltaBase, parts: list[tuple[HeldList, int]]) -> dict[Path, Prefix]:
    """The items each list holds once the delta of ``parts`` (see :func:`new_items`) is stored.

    Taken when the delta line is: the lists may grow before it is written.
    """
    return {entry.path: base.items[entry.path].grown(entry.value[start:]) for entry, start in parts}


def delta_line(parts: list[tuple[HeldList, int]]) -> bytes:
    """One companion line with every list's new items (``b""`` when none grew).

    Raises:
        StateDumpError: A new item cannot be saved, named by its path in the state.
    """
    grown = [(entry, start) for entry, start in parts if len(entry.value) > start]
    entries = checks_deferred(lambda: [[list(entry.path), encode_held(entry, start)] for entry, start in grown])
    try:
        line = _json.dumps_compact(entries) + b"\n" if entries else b""
    except StateDumpError as err:  # its paths run through the line: [list index, 1, item index, ...]
        problems = [_in_state(problem, grown) for problem in err.problems]
        raise StateDumpError(problems) from None
    for (entry, start), (_, items) in zip(grown, entries, strict=True):  # the line holds them fewer levels down
        if (at := too_deep_below(items, len(entry.path))) is not None:
            raise StateDumpError([item_problem(Problem((), depth_message()), entry.path, start, at)])
    return line


def _in_state(problem: Problem, grown: list[tuple[HeldList, int]]) -> Problem:
    at = problem.path
    if len(at) < 2 or not isinstance(at[0], int) or at[0] >= len(grown) or at[1] != 1:
        return problem  # not inside the new items (it cannot be: the paths are checked ids)
    entry, start = grown[at[0]]
    return item_problem(problem, entry.path, start, at[2:])


def fill(held: Held) -> None:
    """Put every held list's full encoding in its place, for a full write."""

    def encode_all() -> None:
        for entry in held:
            entry.out[entry.plan.name] = encode_held(entry)

    checks_deferred(encode_all)


def base_after_write(token: str, doc_len: int, skeleton: bytes, held: Held) -> DeltaBase:
    """The base of a document just written in full."""
    return DeltaBase(token, 0, doc_len, skeleton, saved_items(held))


def saved_items(held: Held) -> dict[Path, Prefix]:
    """Every held list's items, as saved in full (or just loaded)."""
    return {entry.path: Prefix.of(entry.value) for entry in held}


def merge(document: dict[str, Any], log: bytes, token: str, source: str) -> None:
    """Append every delta of a companion's complete lines to ``document``'s lists, in place.

    Args:
        document: The decoded document (its lists are extended).
        log: The companion's complete lines, its header first (after a
            newline in Redis, where they follow the document in one value).
        token: The document's token, which the header must name.
        source: The companion's name, for errors.

    Raises:
        DocumentError: A line is not the next delta of this document (see
            :mod:`._proofs`), or names a place that is not a list.
    """
    for number, entries in enumerate(deltas(log, token, source), start=2):
        _apply(document, entries, source, number)


def deltas(log: bytes, token: str, source: str) -> list[Any]:
    """The deltas of each of a companion's complete lines (line 2 on), decoded and checked.

    Raises:
        DocumentError: A line is not the next delta of this document (see :mod:`._proofs`).
    """
    (version, _, count), lines = _lines(log, token, source)
    decoded = _decode_lines(lines, source)
    return check(lines, decoded, token, count, source) if version == LOG_FORMAT else decoded


def log_tail(log: bytes) -> tuple[int, int] | None:
    """How many delta lines a merged companion holds and the last one's checksum; ``None``: format 1."""
    lines = log.removeprefix(b"\n").split(b"\n")
    found = header_of(lines[0])
    return None if found is None or found[0] != LOG_FORMAT else last(lines[1:-1])


def _lines(log: bytes, token: str, source: str) -> tuple[tuple[int, str, int | None], list[bytes]]:
    """The header and the delta lines of a companion whose header names ``token``."""
    lines = log.removeprefix(b"\n").split(b"\n")
    found = header_of(lines[0])
    if found is None or found[1] != token:
        raise DocumentError(
            f"the appended items do not start with their header line naming document {token} "
            "(the header was removed, or the items belong to another document); nothing was loaded",
            source=source,
            line=1,
        )
    if lines[-1]:
        raise DocumentError(
            "the last line of the appended items is cut short (no newline at its end); nothing was loaded",
            source=source,
            line=len(lines),
        )
    return found, lines[1:-1]


def appended_at(doc: bytes, log: bytes, paths: list[Path]) -> dict[Path, tuple[int, bytes, Path]]:
    """Where each path that lies inside an appended item was stored: the
    companion's line number, the line, and the path within that line.

    Only called after a load has failed: it decodes the document again.
    """
    lines = log.removeprefix(b"\n").split(b"\n")
    sealed = (header_of(lines[0]) or (1, ""))[0] == LOG_FORMAT
    lines = lines[1:-1]
    document = _json.loads(doc)
    lengths: dict[Path, int] = {}  # each list's length so far: the document's, then after each line
    placed: dict[Path, tuple[int, bytes, Path]] = {}
    decoded = _decode_lines(lines, "")
    for number, (line, value) in enumerate(zip(lines, decoded, strict=True), start=2):
        entries, first = (value[1:], 1) if sealed else (value, 0)
        for index, (target, items) in enumerate(entries, start=first):
            key = tuple(target)
            start_at = lengths.setdefault(key, _length(document, key))
            for path in paths:
                at = path[len(key)] if len(path) > len(key) and path[: len(key)] == key else None
                if isinstance(at, int) and start_at <= at < start_at + len(items):
                    placed[path] = (number, line, (index, 1, at - start_at, *path[len(key) + 1 :]))
            lengths[key] = start_at + len(items)
    return placed


def _length(document: Any, path: Path) -> int:
    node = document
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return len(node) if isinstance(node, list) else 0


def _decode_lines(lines: list[bytes], source: str) -> list[Any]:
    """Every line decoded: all at once as one array (one decoder call), else one by one to name the bad line."""
    try:
        decoded = _json.loads(b"[" + b",".join(lines) + b"]", source)
    except DocumentError:
        decoded = None
    if isinstance(decoded, list) and len(decoded) == len(lines):
        return decoded
    out = []
    for number, line in enumerate(lines, start=2):
        try:
            out.append(_json.loads(line, source))
        except DocumentError as err:
            raise DocumentError(err.reason, source=source, line=number, column=err.column) from None
    return out


def _apply(document: dict[str, Any], entries: Any, source: str, number: int) -> None:
    if not isinstance(entries, list):
        raise DocumentError("a delta line is a list of [path, items] pairs", source=source, line=number)
    for entry in entries:
        target = _target(document, entry)
        if target is None:
            raise DocumentError(f"a delta appends to {entry!r:.80}, which is not a list", source=source, line=number)
        if too_deep_below(entry[1], len(entry[0])) is not None:
            raise DocumentError(f"a delta appends items {depth_message()}", source=source, line=number)
        target.extend(entry[1])


def is_delta(entry: Any) -> bool:
    """Whether a delta line's entry is a ``[path, items]`` pair (two lists)."""
    return isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], list) and isinstance(entry[1], list)


def _target(document: dict[str, Any], entry: Any) -> list[Any] | None:
    if not is_delta(entry):
        return None
    node: Any = document
    for key in entry[0]:
        node = node.get(key) if isinstance(node, dict) and isinstance(key, str) else None
    return node if isinstance(node, list) else None


def stored_skeleton(document: Mapping[str, Any], held: Held, meta_key: str) -> bytes | None:
    """The skeleton of a decoded document, its lists where ``held`` found the live ones.

    Returns:
        ``None`` when a list is missing or not as long as the live one.
    """
    skeleton = {key: value for key, value in document.items() if key != meta_key}
    for entry in held:
        if not _blank(skeleton, entry.path, len(entry.value)):
            return None
    return skeleton_bytes(skeleton)


def _blank(skeleton: dict[str, Any], path: Path, length: int) -> bool:
    """Replace the list at ``path`` with ``None``, copying the dicts on the way (not the document's)."""
    node = skeleton
    for key in path[:-1]:
        child = node.get(key) if isinstance(key, str) else None
        if not isinstance(child, dict):
            return False
        node[key] = node = dict(child)  # type: ignore[index]
    last = path[-1]
    if not isinstance(last, str) or not isinstance(node.get(last), list) or len(node[last]) != length:
        return False
    node[last] = None
    return True
