"""One writer at a time per session file: an exclusive ``flock`` on a lock file beside it.

``flock`` locks belong to an open file, so two threads of one process exclude
each other as two processes do, and the kernel drops the lock when its holder
exits or is killed: a crash never leaves a stale lock behind. The holder
removes the lock file before releasing it, so that no lock files pile up
beside the sessions; a waiter that then finds the file it locked gone or
replaced opens the current one and tries again. (A holder killed mid-write
leaves an unlocked lock file, which the next writer uses and removes.)

On Windows (no ``flock``) writers of one process still take turns, but nothing
orders writers of different processes.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from statekit.errors import SessionError

if sys.platform != "win32":
    import fcntl

LOCK_TIMEOUT = 10.0
"""Seconds a writer waits for another writer of the same session before giving up."""

_FIRST_PAUSE = 0.0005
_LONGEST_PAUSE = 0.02
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_IN_PROCESS = threading.Lock()  # Windows only: see the module docstring


@functools.lru_cache(maxsize=1024)  # pathlib joins cost more than the write's own calls
def lock_path(path: Path) -> Path:
    """The lock file of a session file: hidden, beside it (``.chat-1.json.lock``)."""
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def session_lock(path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the exclusive lock of the session file ``path`` (its folder is created).

    Args:
        path: The session file (not the lock file).
        timeout: Seconds to wait for the current holder.

    Raises:
        SessionError: Another writer held the lock for longer than ``timeout``.
        OSError: The lock file cannot be created or opened (a symlink is refused).
    """
    lock = lock_path(path)
    try:
        fd = _acquire(lock, timeout)
    except FileNotFoundError:  # the session's first save: its folder is made now
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = _acquire(lock, timeout)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        _release(fd)


def _acquire(lock: Path, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    pause = _FIRST_PAUSE
    while True:
        fd = _open(lock)
        try:
            while not _try_lock(fd):
                if time.monotonic() >= deadline:
                    raise SessionError(
                        f"{_session_of(lock)} is being written by another writer that has held "
                        f"its lock ({lock}) for more than {timeout} s"
                    )
                time.sleep(random.uniform(pause / 2, pause))  # noqa: S311 - spreading waiters, not cryptography
                pause = min(pause * 2, _LONGEST_PAUSE)
        except BaseException:
            os.close(fd)
            raise
        if _still_there(fd, lock):
            return fd
        _release(fd)  # a delete removed the lock file we waited on: lock the current one


def _open(lock: Path) -> int:
    """Open (or create) the lock file; an error names it, not the session file.

    Raises:
        SessionError: It cannot be opened (another user's, left by a writer of theirs; a folder...).
    """
    try:
        return os.open(lock, _OPEN_FLAGS, 0o600)
    except FileNotFoundError:
        raise  # its folder went away: the caller's error
    except OSError as err:
        raise SessionError(
            f"cannot open {lock}, the lock file of {_session_of(lock)}: {err.strerror or err} (a lock file of "
            "another user is left by a writer of theirs; when no writer of this session runs, remove it)"
        ) from err


def _session_of(lock: Path) -> Path:
    return lock.with_name(lock.name[1:-5])


def _try_lock(fd: int) -> bool:
    if sys.platform == "win32":
        return _IN_PROCESS.acquire(blocking=False)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _release(fd: int) -> None:
    os.close(fd)
    if sys.platform == "win32":
        _IN_PROCESS.release()


def _still_there(fd: int, lock: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(lock, follow_symlinks=False))
    except FileNotFoundError:
        return False
