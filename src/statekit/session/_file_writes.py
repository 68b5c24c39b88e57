"""What a file session's appends and deletes do under its lock (its full writes are :func:`._files._replace_if`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from statekit.session._appends import DeltaBase
from statekit.session._atomic import atomic_write
from statekit.session._companion import append, aside, base_holds, companion, drop_retired, retire, tidy
from statekit.session._file_leases import fence
from statekit.session._file_history import drop_history, history_of
from statekit.session._file_twins import unshare
from statekit.session._filelock import session_lock
from statekit.session._leftovers import temp_path
from statekit.session._safe_files import refuse_odd


def delete_file(path: Path) -> bool:
    """Remove the session file and its companions; whether the file was there."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    finally:
        retire(path)  # deltas without their document are nobody's
        drop_retired(path)
    return True


def append_if(path: Path, line: bytes, base: DeltaBase, timeout: float, carried: int | None) -> int | None:
    """Under the session's lock: append a delta if the lease allows it and what is stored is ``base``;
    the bytes added, or ``None``."""
    with session_lock(path, timeout):
        fence(path, carried)
        if not base_holds(path, base):  # (which may put back a companion put aside, or cut a torn line off it)
            return None
        unshare(path)  # before any write in place: a killed keeping save's names of these files go
        tidy(path, base.token, (temp_path(path), temp_path(companion(path))))  # a killed save's leftovers
        if not line:
            return 0
        return append(path, base, line, lambda log, data: atomic_write(log, data, locked=True))


def delete_locked(path: Path, timeout: float, carried: int | None) -> bool:
    """Under the session's lock: delete the session file, its companions and its history, if the lease allows it."""
    refuse_odd_beside(path)
    with session_lock(path, timeout):
        fence(path, carried)
        history = history_of(path)  # a link there is refused before anything is removed
        found = delete_file(path)
        if history is not None:
            drop_history(history)
        return found


def fenced(path: Path, timeout: float, carried: int | None, work: Callable[[], None]) -> None:
    """Under the session's lock, if the lease allows it: ``work()`` (a write of blobs, :mod:`._file_history`)."""
    with session_lock(path, timeout):
        fence(path, carried)
        work()


def refuse_odd_beside(path: Path) -> tuple[bool, bool]:
    """Refuse a link or odd file where a save or delete would replace or remove a companion.

    Returns:
        Whether the companion is there, and whether one put aside is.

    Raises:
        SessionError: Naming it (a save would have moved it aside and deleted it).
    """
    return refuse_odd(companion(path)), refuse_odd(aside(path))
