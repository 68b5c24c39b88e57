"""Atomic, durable file writes: a temporary file beside the target, fsync'd, renamed over it, the folder fsync'd."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from statekit.session._leftovers import temp_path
from statekit.session._safe_files import keep_mode, write_new

_TEMP_PREFIX = ".statekit-"


def atomic_write(path: Path, data: bytes, *, locked: bool = False, beside: Path | None = None) -> None:
    """Replace ``path`` with ``data``, atomically and durably; an existing file keeps its permission bits.

    Args:
        path: The file; its folder is created when missing.
        data: The whole new content.
        locked: Whether the caller holds the session's lock; then the
            temporary file has a fixed name, so that one left by a killed save
            is replaced by the next save (none piles up).
        beside: With ``locked``: the session file whose temporary file to use, when
            ``path`` is another file of the session (a blob of its history).

    Raises:
        OSError: The write failed; ``path`` is untouched and no temporary
            file is left behind.
    """
    if locked:  # the lock file sits in the folder: it exists (made again only if it went since)
        temp = str(temp_path(beside or path))
        try:
            fd = write_new(temp)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = write_new(temp)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=_TEMP_PREFIX, suffix=".tmp")
    try:
        try:
            keep_mode(fd, path)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    fsync_folder(path.parent)


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` with ``os.write`` (a buffered file object adds a copy's worth of time to a large write)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_folder(folder: Path) -> None:
    """Make the names in ``folder`` durable (what was created, renamed or linked there)."""
    if os.name == "nt":
        return  # folders cannot be opened for fsync on Windows; the rename is durable enough
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
