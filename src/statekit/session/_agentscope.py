"""AgentScope 1.x's session file names, for ``JSONSession(save_dir, layout="agentscope")``.

AgentScope 1.0.21 writes ``{user_id}_{session_id}.json`` (``{session_id}.json``
when ``user_id`` is empty) straight into ``save_dir``, ids as they are, case
kept. statekit reads and writes the same names, with its own safety:

- ids that would leave ``save_dir`` or reach a special name are refused: a path
  separator, ``..``, a drive (``C:``), NUL, or a name starting with ``.``
  (statekit's temporary and lock files are hidden names);
- writes stay atomic (see :mod:`statekit.session._files`);
- a missing file whose name exists with another case is an error, not a
  silent fresh start.

The names can collide, as in AgentScope: ``("a_b", "c")`` and ``("a", "b_c")``
are both ``a_b_c.json``, and ``("", "a_b")`` is ``a_b.json`` like ``("a", "b")``.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Literal

from statekit.errors import InvalidSessionIdError, SessionError
from statekit.session._ids import SessionKey
from statekit.session.document import META_KEY

Layout = Literal["statekit", "agentscope"]
LAYOUTS: tuple[Layout, ...] = ("statekit", "agentscope")

MAX_FILE_NAME = 255
"""Bytes in a file name, on the common file systems."""

MAX_SESSION_FILE_NAME = MAX_FILE_NAME - len(".") - len(".log.old")
"""Bytes in a session's file name: the files beside it (``.NAME.lock``, ``.NAME.tmp``,
``.NAME.log.old``, the longest) must fit too."""

_DRIVE = re.compile(r"[A-Za-z]:")
META_MARK = f'"{META_KEY}"'.encode()
"""How a document statekit wrote begins (its metadata key comes first)."""


def check_layout(layout: object) -> Layout:
    """The layout, checked.

    Raises:
        SessionError: Not one of :data:`LAYOUTS`.
    """
    if layout not in LAYOUTS:
        raise SessionError(f"layout must be one of {', '.join(map(repr, LAYOUTS))}, got {layout!r}")
    return layout


def legacy_name(key: SessionKey, suffix: str) -> str:
    """AgentScope's file name of a session."""
    return f"{key.user_id}_{key.session_id}{suffix}" if key.user_id else f"{key.session_id}{suffix}"


def check_legacy_key(key: SessionKey, suffix: str) -> None:
    """Refuse ids AgentScope's naming cannot hold safely.

    Raises:
        InvalidSessionIdError: Naming the id and what is wrong with it.
    """
    for what, value in (("user_id", key.user_id), ("session_id", key.session_id)):
        reason = _unsafe(value)
        if reason is not None:
            raise InvalidSessionIdError(
                f"{what} {value!r} {reason}; AgentScope's layout puts ids in the file name as they are"
            )
    name = legacy_name(key, suffix)
    if name.startswith("."):
        raise InvalidSessionIdError(f"{name!r} would be a hidden file (statekit keeps those for temporary files)")
    if len(name.encode("utf-8")) > MAX_SESSION_FILE_NAME:
        raise InvalidSessionIdError(
            f"the file name of {key.session_id[:20]!r}... is over {MAX_SESSION_FILE_NAME} bytes "
            "(the lock, temporary and companion files beside it need the rest of 255)"
        )


def refuse_empty_session_id(session_id: object, user_id: object, suffix: str) -> None:
    """Refuse an empty session id of a user, saying how to open AgentScope's file of it.

    AgentScope 1.x writes ``("alice", "")`` to ``alice_.json``, the name of
    ``("", "alice_")``; statekit holds no empty session id, but opens that file
    under the second pair.

    Raises:
        InvalidSessionIdError: ``session_id`` is ``""`` and ``user_id`` a non-empty string.
    """
    if session_id == "" and isinstance(user_id, str) and user_id:
        name = legacy_name(SessionKey(user_id, ""), suffix)
        raise InvalidSessionIdError(
            f"session_id must not be empty; AgentScope's file {name} of user {user_id!r} opens as "
            f"session {user_id + '_'!r} of no user (user_id ''): the same file name in this layout"
        )


def _unsafe(value: str) -> str | None:
    if "/" in value or "\\" in value or (os.altsep is not None and os.altsep in value):
        return "holds a path separator"
    if ".." in value:
        return "holds '..'"
    if _DRIVE.match(value):
        return "starts with a drive"
    return None


def case_twin(folder: Path, name: str) -> str | None:
    """A file in ``folder`` named ``name`` but for case (``None`` when there is none)."""
    try:
        entries = os.listdir(folder)
    except FileNotFoundError:
        return None
    wanted = name.casefold()
    return next((entry for entry in sorted(entries) if entry != name and entry.casefold() == wanted), None)


def refuse_case_twin(folder: Path, key: SessionKey, suffix: str) -> None:
    """Raise when the session's file is missing but another case of its name exists.

    Raises:
        SessionError: Naming both file names.
    """
    name = legacy_name(key, suffix)
    twin = case_twin(folder, name)
    if twin is not None:
        raise SessionError(
            f"no {folder / name}, but {twin} exists: ids are case-sensitive, so this is another session; "
            "load it under the ids its name holds"
        )


def refuse_agentscope_file(save_dir: Path, key: SessionKey, suffix: str, wanted: Path) -> None:
    """In statekit's layout, raise when a missing session has an AgentScope-named file.

    Without this, pointing statekit at an AgentScope folder starts every
    session with a user (or a capital letter) fresh, silently. A file under
    the legacy name that statekit wrote (it starts with the metadata key) is
    another session of statekit's, not a sign.

    Raises:
        SessionError: Naming both files and the two ways to open the old one.
    """
    if suffix != ".json":
        return
    try:
        check_legacy_key(key, suffix)
    except InvalidSessionIdError:
        return  # no AgentScope file can have this name safely
    path = save_dir / legacy_name(key, suffix)
    if path == wanted or not _plain_file(path) or _written_by_statekit(path):
        return
    raise SessionError(
        f"no {wanted}, but {path} looks like AgentScope 1.x's file of this session: open the folder with "
        f'JSONSession(save_dir, layout="agentscope"), or copy it with `statekit import-agentscope` (docs/agentscope.md)'
    )


def _plain_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _written_by_statekit(path: Path) -> bool:
    with open(path, "rb") as file:
        return META_MARK in file.read(256)


def legacy_files(folder: Path, suffix: str) -> list[str]:
    """The stems of the session files in ``folder`` (no hidden or special files)."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    return sorted(
        entry.name[: -len(suffix)]
        for entry in entries
        if entry.name.endswith(suffix)
        and len(entry.name) > len(suffix)
        and not entry.name.startswith(".")
        and entry.is_file(follow_symlinks=False)
    )


def list_legacy(folder: Path, user_id: str, suffix: str) -> list[str]:
    """The session ids whose file name could belong to ``user_id``.

    Names do not say where the user ends: for ``""`` every file is listed, for
    another user every file starting with ``{user_id}_``.
    """
    stems = legacy_files(folder, suffix)
    if not user_id:
        return stems
    head = f"{user_id}_"
    return [stem[len(head) :] for stem in stems if stem.startswith(head) and len(stem) > len(head)]
