"""A JSON session's companion: the deltas of its append-only lists, beside the document.

``chat-1.json`` stays a whole, readable document; ``chat-1.json.log`` holds
what was appended since it was written: a header line naming the document's
token, then one line per delta save, each written with one ``write`` and
fsync'd. A line cut short by a crash (no final newline) is ignored by readers
and cut off by the next writer.

A full write (a save that is not a delta, compaction) first renames the
companion aside (``.chat-1.json.log.old``), then replaces the document, then
deletes the old companion: whenever a crash stops it, the document found is
either the old one, whose deltas are in the companion or aside, or the new one,
which holds everything (and a leftover aside names another token, so it is
ignored). A companion at the main name always belongs to its document; one
that names another token is an error, not something to guess about.

Every function here runs in a worker thread; writers hold the session's lock.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from statekit.errors import DocumentError, SessionError
from statekit.session._appends import DeltaBase, header, header_token
from statekit.session._safe_files import read_regular, read_regular_stat

HEAD_BYTES = 512
"""The document's metadata (and so its token) must come within its first bytes."""

READ_ATTEMPTS = 20
"""How often a read starts again when a writer replaced the document while it was read."""

_HEAD = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"__statekit__"\s*:\s*\{[^{}]*?"log"\s*:\s*"([0-9a-f]{1,64})"')
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class Stored(bytes):
    """A document's bytes carrying its deltas (the companion's complete lines).

    It compares, and :func:`~statekit.session._revisions.revision_of` hashes
    it, as the document followed by the deltas, without copying the two into
    one buffer (a 45 MB document would be copied on every load).

    Attributes:
        log: The deltas.
        token: The document's token.
    """

    log: bytes
    token: str

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Stored):
            return bytes.__eq__(self, other) and self.log == other.log
        if isinstance(other, bytes):
            return len(other) == len(self) + len(self.log) and other == bytes(self) + self.log
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash((bytes(self), self.log))


def companion(path: Path) -> Path:
    """The companion of the document at ``path``."""
    return path.with_name(path.name + ".log")


def aside(path: Path) -> Path:
    """Where a full write puts the companion while it replaces the document."""
    return path.with_name(f".{path.name}.log.old")


def doc_token(head: bytes) -> str | None:
    """The token in a document's metadata, from its first :data:`HEAD_BYTES` bytes."""
    found = _HEAD.match(head[:HEAD_BYTES])
    return None if found is None else found.group(1).decode()


def split(raw: bytes) -> tuple[bytes, bytes, str | None]:
    """A read's document bytes, its companion's complete lines and the token."""
    if isinstance(raw, Stored):
        return raw, raw.log, raw.token
    return raw, b"", None


def read_session(path: Path) -> bytes | None:
    """The document and its companion's complete lines, read as one state.

    Returns:
        ``None`` when there is no document; the document alone when it has no
        deltas; else a :class:`Stored`.

    Raises:
        DocumentError: A companion that belongs to another document.
        SessionError: Writers kept replacing the document while it was read.
    """
    for _ in range(READ_ATTEMPTS):
        got = read_regular_stat(path)
        if got is None:
            return None
        doc, status = got
        token = doc_token(doc)
        if token is None:
            return doc  # no deltas belong to it (a companion beside it is left from before it)
        log = _read_log(path, token)
        if _unchanged(path, status):
            return _joined(path, doc, log, token)
    raise SessionError(f"{path} kept being replaced while it was read; try again")


def _joined(path: Path, doc: bytes, log: bytes | None, token: str) -> bytes:
    if log is None:
        raise DocumentError(
            f"the companion {companion(path)} does not belong to this document (it names another one); "
            "move it away to load the document alone",
            source=str(path),
        )
    if not log:
        return doc
    return joined(doc, log, token)


def joined(doc: bytes, log: bytes, token: str) -> Stored:
    """The document ``doc`` carrying ``log``, deltas of document ``token``."""
    out = Stored(doc)
    out.log, out.token = log, token
    return out


def _read_log(path: Path, token: str) -> bytes | None:
    """The companion's complete lines (``b""``: none); ``None`` when it names another document."""
    data = read_regular(companion(path))
    if data is not None:
        return _complete(data) if _names(data, token) else None
    old = read_regular(aside(path))
    return _complete(old) if old is not None and _names(old, token) else b""


def _names(data: bytes, token: str) -> bool:
    return header_token(data.split(b"\n", 1)[0]) == token


def _complete(data: bytes) -> bytes:
    return data[: data.rfind(b"\n") + 1]


def _unchanged(path: Path, status: os.stat_result) -> bool:
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (now.st_ino, now.st_dev, now.st_size, now.st_mtime_ns) == (
        status.st_ino,
        status.st_dev,
        status.st_size,
        status.st_mtime_ns,
    )


# -- writers (under the session's lock) ---------------------------------------------


def base_holds(path: Path, base: DeltaBase) -> bool:
    """Whether the stored session is still what ``base`` says (the lock is held).

    Cheap: reads the document's head and the companion's size (and its tail
    when it is longer). Brings back a companion a crash left aside, and cuts
    off a line a crash left unfinished.
    """
    got = read_regular_stat(path, HEAD_BYTES)
    if got is None or doc_token(got[0]) != base.token:
        return False
    log = companion(path)
    size = _size(log)
    if size is None and _size(aside(path)) is not None and _names(_first(aside(path)), base.token):
        if not base.log_len:
            return False  # a crash left this document's deltas aside: they are stored, and base lacks them
        os.replace(aside(path), log)
        size = _size(log)
    if base.log_len == 0 or size is None:
        return base.log_len == 0 and size is None
    if size < base.log_len or not _names(_first(log), base.token):
        return False
    return size == base.log_len or _cut_torn_tail(log, base.log_len)


def _size(path: Path) -> int | None:
    try:
        return os.stat(path, follow_symlinks=False).st_size
    except FileNotFoundError:
        return None


def _first(path: Path) -> bytes:
    got = read_regular_stat(path, 4096)
    return b"" if got is None else got[0]


def _cut_torn_tail(log: Path, length: int) -> bool:
    """Cut an unfinished last line off; ``False`` when a complete one follows ``length``."""
    with open(log, "r+b") as file:
        file.seek(length)
        if b"\n" in file.read():
            return False
        file.truncate(length)
        file.flush()
        os.fsync(file.fileno())
    return True


def append(path: Path, base: DeltaBase, line: bytes, write_whole: object) -> int:
    """Append one delta line (creating the companion, header first, if there is none).

    Args:
        path: The document.
        base: What is stored (already checked by :func:`base_holds`).
        line: The delta, newline-terminated.
        write_whole: ``atomic_write(path, data, locked=True)`` (passed in, to avoid an import cycle).

    Returns:
        The bytes added to the companion.
    """
    log = companion(path)
    if base.log_len == 0:
        data = header(base.token) + line
        write_whole(log, data)  # type: ignore[operator]
        return len(data)
    fd = os.open(log, _APPEND_FLAGS)
    try:
        _write_all(fd, line)
        os.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, base.log_len)
        raise
    finally:
        os.close(fd)
    return len(line)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def tidy(path: Path, token: str, temps: tuple[Path, ...]) -> None:
    """Before a delta: remove what a killed save left (its temporary files, a stale companion put aside).

    Args:
        path: The document.
        token: The document's token (a companion aside that names it is kept: it is this document's).
        temps: The temporary files of the document's and the companion's writes.
    """
    for temp in temps:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    old = aside(path)
    if _size(old) is not None and not _names(_first(old), token):
        drop_retired(path)


def retire(path: Path) -> None:
    """Before a full write: move the companion aside (the new document holds its items)."""
    with contextlib.suppress(FileNotFoundError):
        os.replace(companion(path), aside(path))


def drop_retired(path: Path) -> None:
    """After a full write (or a delete): remove the companion put aside."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(aside(path))
