"""File checks that keep a file session inside its folder and off odd files.

Before every open, the path below ``save_dir`` (the user folder, the session
file) is checked with ``lstat``: a symbolic link is refused, so that no save
writes and no load reads outside ``save_dir``, and a session path that is not a
regular file (a FIFO, a socket, a device, a folder) is refused at once instead
of blocking or being replaced. Reads also open with ``O_NOFOLLOW | O_NONBLOCK``
and check the opened file, so a file swapped in after the check cannot make a
load follow a link or wait on a FIFO. ``save_dir`` itself may be a link.
A session file (or a file beside it) with more than one hard link is refused
the same way: a write in place (a delta appended) would change the linked copy
too, and a read would read another file's content. The one exception is a link
between a session's files and its own history folder, which a save that keeps
history makes (:mod:`._file_twins`): reads and checks allow it, writes in place never.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from statekit.errors import SessionError
from statekit.session._file_twins import own_links

_READ_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
)
_NEW_FLAGS = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)
_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def check_path(save_dir: Path, path: Path, *, folder: bool = False) -> bool:
    """Refuse a session path that leaves ``save_dir`` through a link or is not a file.

    Args:
        save_dir: The session's root folder (itself allowed to be a link).
        path: A path below ``save_dir``: a session file, or a user folder.
        folder: Whether ``path`` is a user folder rather than a session file.

    Returns:
        Whether ``path`` exists.

    Raises:
        SessionError: A part of the path below ``save_dir`` is a symbolic link,
            or the session file is not a regular file.
    """
    status = None
    for current in _below(save_dir, path):
        try:
            status = os.lstat(current)
        except (FileNotFoundError, NotADirectoryError):
            return False
        if stat.S_ISLNK(status.st_mode):
            raise SessionError(f"{current} is a symbolic link; statekit never follows links inside {save_dir}")
    mode = stat.S_IFDIR if status is None else status.st_mode
    if not (stat.S_ISDIR(mode) if folder else stat.S_ISREG(mode)):
        raise not_a_file(path, mode)
    if not folder and status is not None:
        refuse_linked(path, status.st_nlink, status)
    return True


def _below(save_dir: Path, path: Path) -> list[str]:
    """Each path from the first part below ``save_dir`` down to ``path``.

    Joined as strings: pathlib's ``relative_to`` and joins cost more than the ``lstat`` calls.
    """
    root, full = str(save_dir), str(path)
    if os.altsep is None and full.startswith(root + os.sep):
        rest = full[len(root) + 1 :]
        if os.sep not in rest:
            return [full]  # a session of the default user: the file alone
        below, current = [], root
        for part in rest.split(os.sep):
            current = f"{current}{os.sep}{part}"
            below.append(current)
        return below
    parts = path.relative_to(save_dir).parts  # save_dir "." (which pathlib leaves out of joins), "/", or Windows
    return [str(save_dir.joinpath(*parts[: index + 1])) for index in range(len(parts))]


def refuse_odd(path: Path) -> bool:
    """Refuse anything but a regular file, or nothing, at ``path`` (a file beside a session's).

    Returns:
        Whether a file is there.

    Raises:
        SessionError: A link, a folder, a FIFO... is there.
    """
    try:
        status = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    if stat.S_ISLNK(status.st_mode):
        raise SessionError(f"{path} is a symbolic link; statekit never follows links inside its folder")
    if not stat.S_ISREG(status.st_mode):
        raise not_a_file(path, status.st_mode)
    refuse_linked(path, status.st_nlink, status)
    return True


def refuse_linked(path: Path, links: int, status: os.stat_result | None = None) -> None:
    """Refuse a regular file with another hard link (a name outside the session folder, maybe).

    With the file's ``status`` given (a read, a check), the links between a session's
    files and its history folder are not refused (:func:`._file_twins.own_links`);
    without it (a write in place), every other link is.

    Raises:
        SessionError: Naming it and how many links it has.
    """
    if links > 1 and (status is None or not own_links(path, status)):
        raise SessionError(
            f"{path} has {links} hard links; statekit never reads or writes a session file that "
            "another name shares (copy it instead of linking it)"
        )


def not_a_file(path: Path, mode: int) -> SessionError:
    """The error for a session path that holds something other than a regular file."""
    kind = _KINDS.get(stat.S_IFMT(mode), "a regular file" if stat.S_ISREG(mode) else "not a regular file")
    return SessionError(f"{path} is {kind}, not a session file or folder; statekit will not read, replace or delete it")


def write_new(path: str | Path) -> int:
    """Open ``path`` for writing as a new file of our own (whatever was there is removed first).

    Used for a session's temporary file, whose name is fixed: one left by a
    killed save is replaced by the next save of that session, never piled up.

    Args:
        path: The temporary file.

    Returns:
        The open file descriptor.
    """
    try:
        return os.open(path, _NEW_FLAGS, 0o600)
    except FileExistsError:  # a killed save's, or a link put there: removed, never followed
        os.unlink(path)
    return os.open(path, _NEW_FLAGS, 0o600)


def keep_mode(fd: int, target: Path) -> None:
    """Give a new file the permission bits of the regular file it will replace.

    A rewrite keeps a file AgentScope (or a user) made 0644 readable by the
    others who read it; a new session file stays as created (0600).
    """
    try:
        mode = os.lstat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISREG(mode) and hasattr(os, "fchmod"):  # no fchmod on Windows before 3.13: no POSIX modes either
        os.fchmod(fd, stat.S_IMODE(mode) & 0o777)


def read_regular(path: Path) -> bytes | None:
    """Read a whole regular file without following a link or waiting on a FIFO.

    Args:
        path: The file (already checked by :func:`check_path`).

    Returns:
        The bytes, or ``None`` when there is no file.

    Raises:
        SessionError: The path is a link or not a regular file.
        OSError: The file cannot be read.
    """
    got = read_regular_stat(path)
    return None if got is None else got[0]


_COMPARE_CHUNK = 1 << 18
_READ_WHOLE = 1 << 20
"""Below this, :func:`holds_exactly` reads the file whole and compares: cheaper than chunks."""


def holds_exactly(path: Path, expected: bytes) -> bool:
    """Whether a regular file holds exactly ``expected``, read a chunk at a time.

    A conditional save compares what is stored with what it last saw; reading
    the whole file for that would hold a second copy of a large document.

    Raises:
        SessionError: The path is a link or not a regular file.
        OSError: The file cannot be read.
    """
    opened = _open_regular(path)
    if opened is None:
        return False
    with opened[0] as file:
        if opened[1].st_size != len(expected):
            return False
        if len(expected) <= _READ_WHOLE:
            return file.read() == expected
        start = 0
        for chunk in _chunks(file):
            # a memcmp in place (comparing memoryviews goes item by item, slicing copies)
            if not expected.startswith(chunk, start):
                return False
            start += len(chunk)
    return start == len(expected)


def digest_regular(path: Path) -> tuple[str, bytes] | None:
    """The SHA-1 of a regular file, read a chunk at a time, and its first chunk (``None``: no file).

    Raises:
        SessionError: The path is a link or not a regular file.
        OSError: The file cannot be read.
    """
    opened = _open_regular(path)
    if opened is None:
        return None
    digest = hashlib.sha1(usedforsecurity=False)
    head = b""
    with opened[0] as file:
        for chunk in _chunks(file):
            head = head or chunk.tobytes()
            digest.update(chunk)
    return digest.hexdigest(), head


def _chunks(file: io.BufferedReader) -> Iterator[memoryview]:
    """The file a chunk at a time, each read into the same buffer: valid until the next one.

    A fresh 256 KiB block per chunk would cost a page fault per 4 KiB: checking
    a 450 KB file that way took 206 us, against 48 us with one buffer.
    """
    buffer = bytearray(_COMPARE_CHUNK)
    view = memoryview(buffer)
    while count := file.readinto(buffer):
        yield view[:count]


def read_regular_stat(path: Path, limit: int = -1) -> tuple[bytes, os.stat_result] | None:
    """Like :func:`read_regular`, reading at most ``limit`` bytes (-1: all), with the file's ``fstat``.

    Read with ``os.read`` into one buffer of the size ``fstat`` gave (then to the end, should the file
    have grown): half the cost of a buffered file object's read on a small file.
    """
    opened = _open_fd(path)
    if opened is None:
        return None
    fd, status = opened
    try:
        want = status.st_size + 1 if limit < 0 else limit
        parts = []
        while want > 0 and (data := os.read(fd, want)):
            parts.append(data)
            want = _READ_MORE if limit < 0 else want - len(data)
    finally:
        os.close(fd)
    return (parts[0] if len(parts) == 1 else b"".join(parts)), status


_READ_MORE = 1 << 16
"""What each read asks for once the size ``fstat`` gave was read (a file that grew meanwhile)."""


def _open_regular(path: Path) -> tuple[io.BufferedReader, os.stat_result] | None:
    """Open a regular file for reading without following a link or waiting on a FIFO (``None``: no file)."""
    opened = _open_fd(path)
    if opened is None:
        return None
    try:
        file = open(opened[0], "rb")  # noqa: SIM115 - the caller's with block closes it
    except BaseException:
        os.close(opened[0])
        raise
    return file, opened[1]


def _open_fd(path: Path) -> tuple[int, os.stat_result] | None:
    """:func:`_open_regular`'s descriptor, checked: a regular file without another hard link (``None``: no file)."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as err:
        if os.path.islink(path):
            raise SessionError(f"{path} is a symbolic link; statekit never follows links inside its folder") from err
        raise
    try:  # checked before open() wraps it: open() refuses a folder and leaves the fd open
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise not_a_file(path, status.st_mode)
        refuse_linked(path, status.st_nlink, status)
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def check_save_dir(save_dir: str | os.PathLike[str]) -> Path:
    """``save_dir`` as a path; refused now when no file system could hold it (its first use would raise a bare ValueError)."""
    path = save_dir if isinstance(save_dir, Path) else Path(save_dir)  # (a Path is immutable: kept, not parsed again)
    if "\x00" in str(path):
        raise SessionError(f"save_dir {str(path)!r} contains a NUL character")
    if not os.path.isdir(path) and path.exists():  # (one stat for the usual folder)
        raise SessionError(
            f"save_dir {str(path)!r} is a file, not a folder: sessions are files inside save_dir; "
            "give the folder that holds them (or a new one, created on the first save)"
        )
    return path
