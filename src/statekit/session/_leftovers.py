"""What killed writers leave beside file sessions, and the sweep that removes it.

A writer killed in the middle of a save can leave, beside ``chat-1.json``, its
lock file (``.chat-1.json.lock``), its temporary files (``.chat-1.json.tmp``,
``.chat-1.json.log.tmp``, ``..chat-1.json.lease.tmp`` of a lease taken, renewed
or released), a companion put aside (``.chat-1.json.log.old``) and, killed in a
delete, a companion without its document. (The lease record itself,
``.chat-1.json.lease``, is no leftover: it keeps the session's last fencing
token, also after the session is deleted.) At most one of each per
session: the names are fixed, and the next write of that session reuses or
removes them. Besides, a save or delete sweeps the whole folder when this
process has not swept it for :data:`SWEEP_EVERY` seconds: every session whose
lock it can take at once (none of its writers is running) is cleaned up; a
session being written is left to its writer.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
import time
from pathlib import Path

from statekit.errors import SessionError
from statekit.session._companion import companion, restore_aside, tidy
from statekit.session._file_names import lease_path
from statekit.session._file_twins import unshare
from statekit.session._filelock import session_lock
from statekit.session._safe_files import read_regular_stat
from statekit.session.document import HEAD_BYTES, doc_token

SWEEP_EVERY = 60.0
"""Seconds between two sweeps of one folder by one process."""

_LEFT = re.compile(r"\.(.+)\.(?:lock|tmp|log\.tmp|log\.old)\Z")
_LEASE = ".lease"
_SWEPT: dict[Path, float] = {}  # folder -> when this process last swept it
_SWEPT_LOCK = threading.Lock()
_SWEPT_KEEP = 4096


def sweep_due(folder: Path) -> bool:
    """Whether ``folder`` is due for a sweep (then it counts as swept now)."""
    now = time.monotonic()
    with _SWEPT_LOCK:
        last = _SWEPT.get(folder)
        if last is not None and now - last < SWEEP_EVERY:
            return False
        if len(_SWEPT) >= _SWEPT_KEEP:
            _SWEPT.clear()
        _SWEPT[folder] = now
    return True


@functools.lru_cache(maxsize=1024)  # pathlib joins cost more than the write's own calls
def temp_path(path: Path) -> Path:
    """The temporary file a save of ``path`` writes first (hidden, beside it: ``.chat-1.json.tmp``)."""
    return path.with_name(f".{path.name}.tmp")


def tidy_session(path: Path) -> None:
    """Under the session's lock: remove its leftovers (a companion aside that holds the
    document's deltas is put back: a full write was killed before replacing the document;
    the history's names of its files a save killed before its rename left are removed: see :mod:`._file_twins`)."""
    unshare(path)
    got = read_regular_stat(path, HEAD_BYTES)
    token = None if got is None else doc_token(got[0])
    if got is None:  # a delete killed after removing the document: its deltas are nobody's
        with contextlib.suppress(FileNotFoundError):
            os.unlink(companion(path))
    elif token is not None:
        restore_aside(path, token)
    tidy(path, token, (temp_path(path), temp_path(companion(path)), temp_path(lease_path(path))))


def sweep(folder: Path, suffix: str) -> None:
    """Clean up after every killed writer of the sessions in ``folder`` (files ending in ``suffix``).

    Nothing here is an error: a session whose lock is held, or whose files
    cannot be removed, keeps them until its next write.
    """
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    present = {entry.name for entry in entries}
    sessions = set()
    for entry in entries:
        found = _LEFT.match(entry.name)
        name = "" if found is None else found.group(1)
        if name.startswith(".") and name.endswith(suffix + _LEASE):  # a lease record's temporary file
            name = name[1 : -len(_LEASE)]
        if name.endswith(suffix) and entry.is_file(follow_symlinks=False):
            sessions.add(name)
        elif entry.name.endswith(suffix + ".log") and entry.name[:-4] not in present:
            sessions.add(entry.name[:-4])
    for name in sorted(sessions):
        with contextlib.suppress(SessionError, OSError), session_lock(folder / name, timeout=0):
            tidy_session(folder / name)
