"""A file session's past revisions: blobs in a hidden folder beside its document, kept by hard links.

Beside ``chat-1.json``, the folder ``.chat-1.json.history`` holds one blob per
kept revision, named by it: ``<revision>.json`` (the document as it was) and,
when it had appended items, ``<revision>.json.log`` (its companion then). A
blob is read as the session itself is (:func:`._companion.read_session`), so
it gives back exactly what the head's read gave.

A save that keeps history (:func:`keep_head`), under the session's lock, hard-links
the document it replaces (and its companion) into the folder, fsyncs the folder,
and only then renames the new document over the old one: no bytes are copied,
and a crash leaves the old head (whose extra names are harmless,
:mod:`._file_twins`) or the new one with its kept blob. Blobs never change:
a blob's name is the hash of its bytes, so one already there is kept as it is.
Listings never see the folder (its name starts with a dot and does not end in
the codec's suffix), and a delete removes it.

Every function here runs in a worker thread; writers hold the session's lock.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path

from statekit.errors import SessionError
from statekit.session._atomic import atomic_write, fsync_folder
from statekit.session._companion import read_session, split
from statekit.session._file_names import aside, companion, history_folder
from statekit.session._safe_files import read_regular_stat, refuse_odd
from statekit.session.document import HEAD_BYTES, doc_token, header_token

_REVISION = re.compile(r"[0-9a-f]{40}")


def blob_path(path: Path, name: str) -> Path:
    """The document of the blob ``name`` of the session file ``path`` (``<revision><suffix>`` in its history folder).

    Raises:
        SessionError: ``name`` is not a revision (40 lower-case hex digits).
    """
    if _REVISION.fullmatch(name) is None:
        raise SessionError(f"{name!r} is not a revision (40 lower-case hex digits), so it names no blob of {path}")
    return history_folder(path) / (name + path.suffix)


def history_of(path: Path) -> Path | None:
    """The session's history folder (``None``: there is none).

    Raises:
        SessionError: A link, a file or another odd thing is there (never followed).
    """
    folder = history_folder(path)
    try:
        status = os.lstat(folder)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISDIR(status.st_mode):
        raise SessionError(
            f"{folder} is not a folder (a link, a file...): it is where statekit keeps the past revisions of {path}; "
            "statekit never follows or replaces it: move it away"
        )
    return folder


def keep_head(path: Path, name: str) -> None:
    """Keep the stored document (and its deltas) as the blob ``name``, by hard links, durably; before it is replaced."""
    blob = blob_path(path, name)
    _make_folder(path)
    deltas = _deltas_file(path)
    if deltas is not None:
        _link(deltas, companion(blob))  # first: a blob is there once its document is
    _link(path, blob)
    fsync_folder(blob.parent)


def _deltas_file(path: Path) -> Path | None:
    """Where a read finds the document's deltas: its companion, or one a killed full write left aside."""
    if refuse_odd(companion(path)):
        return companion(path)
    if not refuse_odd(aside(path)):
        return None
    head, log = read_regular_stat(path, HEAD_BYTES), read_regular_stat(aside(path), 4096)
    token = None if head is None else doc_token(head[0])
    named = None if log is None else header_token(log[0].split(b"\n", 1)[0])
    return aside(path) if token is not None and named == token else None


def _make_folder(path: Path) -> None:
    """Make the session's history folder if missing (its name made durable in its parent)."""
    if history_of(path) is None:
        os.mkdir(history_folder(path), 0o700)
        fsync_folder(path.parent)


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target, follow_symlinks=False)
    except FileExistsError:  # the same revision, kept before (by a save killed before its rename, maybe)
        refuse_odd(target)


def put_blob(path: Path, name: str, data: bytes) -> None:
    """Write ``data`` (with its deltas, ``data.log``) as the blob ``name``, unless it is there; durably."""
    blob = blob_path(path, name)
    _make_folder(path)
    if refuse_odd(blob):
        return
    doc, log, _ = split(data)
    if log:  # through the session's own temporary files: a killed put leaves what the sweep removes
        atomic_write(companion(blob), log, locked=True, beside=companion(path))
    atomic_write(blob, doc, locked=True, beside=path)


def get_blob(path: Path, name: str) -> bytes | None:
    """The blob ``name`` as :func:`._companion.read_session` reads a session (``None``: no such blob)."""
    blob = blob_path(path, name)
    return None if history_of(path) is None else read_session(blob)


def list_blobs(path: Path) -> list[str]:
    """The names of the session's blobs (those whose document is there)."""
    folder, suffix = history_of(path), path.suffix
    if folder is None:
        return []
    with os.scandir(folder) as entries:
        return [
            entry.name[: -len(suffix)]
            for entry in entries
            if entry.name.endswith(suffix)
            and _REVISION.fullmatch(entry.name[: -len(suffix)])
            and entry.is_file(follow_symlinks=False)
        ]


def drop_blobs(path: Path, names: tuple[str, ...]) -> None:
    """Remove the blobs ``names`` (document first: a blob without it is not there); the folder too once
    empty, when the session is gone."""
    blobs = [blob_path(path, name) for name in names]
    folder = history_of(path)
    if folder is None:
        return
    for blob in blobs:
        for file in (blob, companion(blob)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(file)
    if not os.path.lexists(path):
        with contextlib.suppress(OSError):  # not empty (a blob put meanwhile...)
            os.rmdir(folder)


def drop_history(folder: Path) -> None:
    """Remove a session's history folder (:func:`history_of`) and every file in it (a delete); a folder in it stays."""
    for entry in list(os.scandir(folder)):
        if not entry.is_dir(follow_symlinks=False):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
    with contextlib.suppress(OSError):
        os.rmdir(folder)
