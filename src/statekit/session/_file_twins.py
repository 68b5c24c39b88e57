"""A session file's own hard links: those between its document (or companion) and its history folder.

A save that keeps history (:mod:`._file_history`) hard-links the document it
replaces (and its companion) into the session's history folder before the
rename: for that moment, and for good if the writer is killed before the
rename, the document has a second name. Such a link, and only such a link, is
not refused as the links of :func:`._safe_files.refuse_linked` are: both names
are the session's own, and neither is ever written in place while they share
the file (:func:`unshare` separates them first).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from statekit.session._file_names import HISTORY_MARK, aside, companion, history_folder

_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_LOG, _ASIDE = ".log", ".log.old"


def own_links(path: Path, status: os.stat_result) -> bool:
    """Whether every other hard link of the file at ``path`` (``status``: its ``lstat``/``fstat``) is the session's own.

    For a document, its companion or one put aside: names in the session's history
    folder; for a file in a history folder: the session's document, companion or
    the one put aside.
    """
    folder = path.parent
    if folder.name.startswith(".") and folder.name.endswith(HISTORY_MARK):
        document = folder.with_name(folder.name[1 : -len(HISTORY_MARK)])
        found = sum(_same(other, status) for other in (document, companion(document), aside(document)))
    else:
        found = len(_twins(history_folder(path.with_name(_document_name(path.name))), status))
    return found == status.st_nlink - 1


def _document_name(name: str) -> str:
    """The document a file beside it belongs to: itself, or the document of a companion (put aside or not)."""
    if name.startswith(".") and name.endswith(_ASIDE):
        return name[1 : -len(_ASIDE)]
    return name[: -len(_LOG)] if name.endswith(_LOG) else name


def _same(path: Path, status: os.stat_result) -> bool:
    try:
        return os.path.samestat(os.lstat(path), status)
    except (FileNotFoundError, NotADirectoryError):
        return False


def _twins(folder: Path, status: os.stat_result) -> list[str]:
    """The names in ``folder`` (a history folder; never followed if it is a link) of the file ``status`` describes."""
    try:
        fd = os.open(folder, _FOLDER_FLAGS)
    except OSError:  # none, or a link, or not a folder: no names of the session's there
        return []
    try:
        with os.scandir(fd) as entries:
            return [entry.name for entry in entries if _is(entry, status)]
    finally:
        os.close(fd)


def _is(entry: os.DirEntry[str], status: os.stat_result) -> bool:
    try:
        return os.path.samestat(entry.stat(follow_symlinks=False), status)
    except FileNotFoundError:  # a blob pruned meanwhile
        return False


def unshare(path: Path) -> None:
    """Under the session's lock, before a write in place: remove the history's names of its document and companion.

    Such names are left by a save killed between keeping the old document and
    replacing it: the revision they hold is the document's own, which its history
    does not list yet, so they are never needed.
    """
    folder = history_folder(path)
    for file in (path, companion(path)):
        try:
            status = os.lstat(file)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if stat.S_ISREG(status.st_mode) and status.st_nlink > 1:
            for name in _twins(folder, status):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(folder / name)
