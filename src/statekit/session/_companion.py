"""A JSON session's companion: the deltas of its append-only lists, beside the document.

``chat-1.json`` stays a whole, readable document; ``chat-1.json.log`` holds
what was appended since it was written: a header line naming the document's
token and counting the deltas, then one line per delta save (see
:mod:`._proofs`), each written with one ``write`` and fsync'd, then counted in
the header (in place). A line cut short by a crash (no final newline, not yet
counted) is ignored by readers and cut off by the next writer. The first delta
also sets the document's ``"deltas"`` to 1 in place, so that a document found
without its companion is refused.

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
from pathlib import Path

from statekit.errors import DocumentError, SessionError
from statekit.session._appends import DeltaBase
from statekit.session._file_names import aside as aside, companion as companion  # named here too, as before
from statekit.session._safe_files import read_regular_stat, refuse_linked
from statekit.session.document import (
    DELTAS_KEY,
    HEAD_BYTES,
    count_at,
    count_field,
    deltas_flag,
    doc_token,
    has_deltas,
    header,
    header_of,
    header_token,
)

READ_ATTEMPTS = 20
"""How often a read starts again when a writer replaced the document while it was read."""

_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_UPDATE_FLAGS = os.O_RDWR | _NO_FOLLOW


class Stored(bytes):
    """A document's bytes carrying its deltas (the companion's complete lines).

    It compares, and :func:`~statekit.session._revisions.revision_of` hashes
    it, as the document followed by the deltas, without copying the two into
    one buffer (a 45 MB document would be copied on every load).

    Attributes:
        log: The deltas (``b""``: a companion lies beside a document without a
            token in its first bytes, which the load refuses, saying why).
        token: The document's token (there, the one the companion names, or ``""``).
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


def split(raw: bytes) -> tuple[bytes, bytes, str | None]:
    """A read's document bytes, its companion's complete lines and the token."""
    if isinstance(raw, Stored):
        return raw, raw.log, raw.token
    return raw, b"", None


def read_session(path: Path) -> bytes | None:
    """The document and its companion's complete lines, read as one state.

    Returns:
        ``None`` when there is no document; the document alone when it has no
        deltas; else a :class:`Stored` (with no deltas and the companion's token
        when a companion lies beside a document without a token in its head:
        the load then says what is wrong).

    Raises:
        DocumentError: A companion that belongs to another document, is
            damaged at its header, or is missing though the document says it holds deltas.
        SessionError: Writers kept replacing the document while it was read;
            the companion cannot be read (naming it).
    """
    for attempt in range(READ_ATTEMPTS):
        got = read_regular_stat(path)
        if got is None:
            return None
        doc, status = got
        token = doc_token(doc)
        log = _read_log(path, token)
        if _unchanged(path, status) and (not _torn(log) or attempt == READ_ATTEMPTS - 1):
            return _joined(path, doc, log, token)
    raise SessionError(f"{path} kept being replaced while it was read; try again")


def _torn(log: bytes | None) -> bool:
    """Whether the companion holds more complete lines than its header's count allows (one more: a save
    killed before it counted its line): its header was read before writers appended and counted more
    lines, in the same read. Read again; a companion that stays so is what the load refuses."""
    if not log:
        return False
    first, _, rest = log.partition(b"\n")
    found = header_of(first)
    return found is not None and found[2] is not None and _complete(rest).count(b"\n") > found[2] + 1


def _joined(path: Path, doc: bytes, log: bytes | None, token: str | None) -> bytes:
    if token is None:  # a companion beside it: the token was removed (the load says so, or where it went)
        return doc if log is None else joined(doc, b"", header_token(log.split(b"\n", 1)[0]) or "")
    if log is None:
        if has_deltas(doc):
            raise DocumentError(
                f"the companion {companion(path)} is missing: this document's metadata says items were appended "
                "beside it (was the document copied or restored without its .log?); put the companion back beside "
                f'it, or set "{DELTAS_KEY}" to 0 in its metadata to load the last full write without those items',
                source=str(path),
            )
        return doc
    if header_token(log.split(b"\n", 1)[0]) is None:
        what = "is empty" if not log else "does not start with its header line"
        raise DocumentError(
            f"the companion of {path} {what}: it is damaged, so the items appended to the document are unknown; "
            "restore it from a backup, or move it away to load the document alone",
            source=str(companion(path)),
            line=1,
        )
    if not _names(log, token):
        raise DocumentError(
            f"the companion {companion(path)} does not belong to {path} (it names another document); "
            "move it away to load the document alone",
            source=str(companion(path)),
            line=1,
        )
    return joined(doc, _complete(log), token) if b"\n" in log else doc


def value_joined(value: bytes) -> bytes:
    """A value that holds its deltas after its document's first line (a Redis value, see ``_redis_scripts``),
    as a read returns it: marked for the decoder when it has a token and deltas."""
    end = value.find(b"\n")
    token = doc_token(value) if end >= 0 else None
    return value if token is None else joined(value[:end], value[end:], token)


def joined(doc: bytes, log: bytes, token: str) -> Stored:
    """The document ``doc`` carrying ``log``, deltas of document ``token``."""
    out = Stored(doc)
    out.log, out.token = log, token
    return out


def _read_log(path: Path, token: str | None) -> bytes | None:
    """The companion, whole (a torn last line included); ``None``: there is none.

    Without a companion, one put aside that names ``token`` (a full write
    stopped after moving it there): its deltas are still the document's.
    """
    data = _read_beside(companion(path), path)
    if data is not None or token is None:
        return data
    old = _read_beside(aside(path), path)
    return old if old is not None and _names(old, token) else None


def _read_beside(file: Path, path: Path, limit: int = -1) -> bytes | None:
    """A file beside the document ``path`` (``None``: none); an error names that file, not the document."""
    try:
        got = read_regular_stat(file, limit)
    except OSError as err:
        raise SessionError(f"cannot read {file}, beside {path}: {err.strerror or err}") from err
    return None if got is None else got[0]


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
    if size is None and _size(aside(path)) is not None and _names(_first(aside(path), path), base.token):
        if not base.log_len:
            return False  # a crash left this document's deltas aside: they are stored, and base lacks them
        os.replace(aside(path), log)
        size = _size(log)
    if base.log_len == 0 or size is None:
        return base.log_len == 0 and size is None
    if size < base.log_len or not _names(_first(log, path), base.token):
        return False
    return size == base.log_len or _cut_torn_tail(log, base.log_len)


def _size(path: Path) -> int | None:
    try:
        return os.stat(path, follow_symlinks=False).st_size
    except FileNotFoundError:
        return None


def _first(file: Path, path: Path) -> bytes:
    """The first bytes of ``file``, beside the document ``path`` (``b""``: no file)."""
    return _read_beside(file, path, 4096) or b""


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
        write_whole: ``_atomic.atomic_write(path, data, locked=True)`` (passed in: it imports what imports this).

    Returns:
        The bytes added to the companion.
    """
    log = companion(path)
    if base.log_len == 0:
        data = header(base.token, 1) + line
        write_whole(log, data)  # type: ignore[operator]
        _mark_deltas(path)
        return len(data)
    fd = os.open(log, _UPDATE_FLAGS)
    try:
        refuse_linked(log, os.fstat(fd).st_nlink)
        head = _read_head(fd)
        at = count_at(head)
        if at is not None and head[at : at + len(count_field(base.count))] != count_field(base.count):
            # a writer killed after its line and before its count left the count one behind (which
            # loads): bring it level first, so that the line below is the only one it can lack
            _write_count(fd, at, base.count)
        try:
            os.lseek(fd, base.log_len, os.SEEK_SET)
            _write_all(fd, line)
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, base.log_len)
            raise
        # then the count: a crash before it is stored leaves one line more than it says, which loads
        if at is not None:
            _write_count(fd, at, base.count + 1)
    finally:
        os.close(fd)
    return len(line)


def _write_count(fd: int, at: int, count: int) -> None:
    """Overwrite the header's count of saved deltas, durably."""
    os.lseek(fd, at, os.SEEK_SET)
    _write_all(fd, count_field(count))
    _sync_data(fd)  # bytes overwritten in place: no size or block to record, the cheaper flush


_sync_data = getattr(os, "fdatasync", os.fsync)


def _read_head(fd: int) -> bytes:
    """The first bytes of an open file."""
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, HEAD_BYTES)


def _mark_deltas(path: Path) -> None:
    """Set the document's ``"deltas"`` to 1 in place, durably: its companion now holds some.

    One byte within the first disk block; a crash before it leaves 0 and a
    companion, which loads as well (0 only means that none may be there).
    """
    fd = os.open(path, _UPDATE_FLAGS)
    try:
        refuse_linked(path, os.fstat(fd).st_nlink)
        flag = deltas_flag(os.read(fd, HEAD_BYTES))
        if flag is not None and not flag[1]:
            os.lseek(fd, flag[0], os.SEEK_SET)
            os.write(fd, b"1")
            os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def tidy(path: Path, token: str | None, temps: tuple[Path, ...]) -> None:
    """Before a delta: remove what a killed save left (its temporary files, a stale companion put aside).

    Args:
        path: The document.
        token: The document's token (a companion aside that names it is kept: it is this
            document's); ``None``: it has none.
        temps: The temporary files of the document's and the companion's writes.
    """
    for temp in temps:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    old = aside(path)
    if _size(old) is not None and (token is None or not _names(_first(old, path), token)):
        drop_retired(path)


def restore_aside(path: Path, token: str) -> None:
    """Put back a companion that a full write killed before replacing the document left aside,
    and mark the document as having deltas when a first delta save was killed before it did."""
    if _size(companion(path)) is None and _size(aside(path)) is not None and _names(_first(aside(path), path), token):
        os.replace(aside(path), companion(path))
    if _names(_first(companion(path), path), token) and not has_deltas(_first(path, path)):
        _mark_deltas(path)


def retire(path: Path) -> None:
    """Before a full write: move the companion aside (the new document holds its items)."""
    with contextlib.suppress(FileNotFoundError):
        os.replace(companion(path), aside(path))


def drop_retired(path: Path) -> None:
    """After a full write (or a delete): remove the companion put aside."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(aside(path))
