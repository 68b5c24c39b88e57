"""How session ids become file names and folders, and how a folder lists back to ids."""

from __future__ import annotations

import contextlib
import functools
import os
import re
from pathlib import Path
from urllib.parse import unquote

from statekit.errors import InvalidSessionIdError

MAX_NAME_LENGTH = 240
"""The longest encoded id, in characters (file names hold 255 bytes)."""

USER_MARK = "@"
"""Prefix of a user's folder; never the first character of an encoded id."""

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")
_PLAIN = re.compile(r"[a-z0-9_-]([a-z0-9._-]*[a-z0-9_-])?")
_DEVICES = frozenset(
    ["con", "prn", "aux", "nul"] + [f"{name}{digit}" for name in ("com", "lpt") for digit in range(1, 10)]
)


@functools.lru_cache(maxsize=1024)  # pathlib joins cost more than the write's own calls
def lease_path(path: Path) -> Path:
    """The lease record of a session file: hidden, beside it (``.chat-1.json.lease``, see :mod:`._file_leases`)."""
    return path.with_name(f".{path.name}.lease")


@functools.lru_cache(maxsize=1024)  # pathlib joins cost more than the write's own calls
def companion(path: Path) -> Path:
    """The companion of the document at ``path``: its append-only lists' deltas (``chat-1.json.log``, :mod:`._companion`)."""
    return path.with_name(path.name + ".log")


@functools.lru_cache(maxsize=1024)  # pathlib joins cost more than the write's own calls
def aside(path: Path) -> Path:
    """Where a full write puts the companion while it replaces the document (``.chat-1.json.log.old``)."""
    return path.with_name(f".{path.name}.log.old")


def session_file(save_dir: Path, user_id: str, session_id: str, suffix: str) -> Path:
    """The file of a session in statekit's layout (``@<user>/<session><suffix>`` under ``save_dir``).

    Raises:
        InvalidSessionIdError: An id too long for a file name once encoded.
    """
    return _session_file(str(save_dir), user_id, session_id, suffix)  # (a new Path's str is kept; its hash is not)


@functools.lru_cache(maxsize=1024)  # every call checks its key and names its file: pathlib's joins cost more than a small read
def _session_file(save_dir: str, user_id: str, session_id: str, suffix: str) -> Path:
    refuse_long_names(user_id, session_id)
    return user_folder(Path(save_dir), user_id) / (encode_id(session_id) + suffix)


def user_folder(save_dir: Path, user_id: str) -> Path:
    """The folder of a user's sessions in statekit's layout (``save_dir`` itself for the default user)."""
    return save_dir / (USER_MARK + encode_id(user_id)) if user_id else save_dir


HISTORY_MARK = ".history"
"""The end of a session's history folder's name (see :func:`history_folder`)."""


@functools.lru_cache(maxsize=1024)  # pathlib joins cost more than the write's own calls
def history_folder(path: Path) -> Path:
    """The folder of a session file's past revisions: hidden, beside it (``.chat-1.json.history``, :mod:`._file_history`)."""
    return path.with_name(f".{path.name}{HISTORY_MARK}")


def encode_id(value: str) -> str:
    """Turn an id into a file name that cannot escape or collide.

    Args:
        value: A checked, non-empty id.

    Returns:
        The file name stem (no suffix).
    """
    if _PLAIN.fullmatch(value) is None:
        value = "".join(char if char in _SAFE else _percent(char) for char in value)
        if value[0] == ".":
            value = "%2E" + value[1:]
        if value[-1] == ".":
            value = value[:-1] + "%2E"
    if value.split(".", 1)[0] in _DEVICES:
        value = _percent(value[0]) + value[1:]
    return value


def refuse_long_names(user_id: str, session_id: str) -> None:
    """Refuse ids whose file or folder names would be too long once encoded.

    Raises:
        InvalidSessionIdError: Naming the id and its encoded length.
    """
    for what, value in (("user_id", user_id), ("session_id", session_id)):
        size = len(encode_id(value)) if value else 0
        if size > MAX_NAME_LENGTH:
            raise InvalidSessionIdError(
                f"{what} {value[:20]!r}... is too long for a file name once encoded "
                f"({size} > {MAX_NAME_LENGTH} characters)"
            )


def decode_id(name: str) -> str | None:
    """The id a file name stands for, or ``None`` when statekit did not write it."""
    try:
        value = unquote(name, errors="strict")
    except UnicodeDecodeError:
        return None
    return value if value and encode_id(value) == name else None


def _percent(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))


def list_folder(folder: Path, suffix: str) -> list[str]:
    """The session ids of one folder's files that end in ``suffix`` (a link or another file is not one)."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    names = (
        entry.name[: -len(suffix)]
        for entry in entries
        if entry.name.endswith(suffix) and entry.is_file(follow_symlinks=False)
    )
    return [session_id for session_id in map(decode_id, names) if session_id is not None]


def some_ids(folder: Path, suffix: str, limit: int) -> tuple[list[str], bool]:
    """Up to ``limit`` session ids of one folder, and whether there are more."""
    ids: list[str] = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError), os.scandir(folder) as entries:
        for entry in entries:
            if len(ids) >= limit:
                return ids, True
            if entry.name.endswith(suffix) and (session_id := decode_id(entry.name[: -len(suffix)])) is not None:
                ids.append(session_id)
    return ids, False


def some_owners(save_dir: Path, name: str, limit: int) -> tuple[list[str], bool]:
    """Up to ``limit`` users whose folder under ``save_dir`` holds the file ``name``, and whether there were more folders."""
    owners = [""] if (save_dir / name).is_file() else []
    looked = 0
    with contextlib.suppress(FileNotFoundError, NotADirectoryError), os.scandir(save_dir) as entries:
        for entry in entries:
            if not entry.name.startswith(USER_MARK) or not entry.is_dir(follow_symlinks=False):
                continue
            looked += 1
            if looked > limit:
                return owners, True
            user = decode_id(entry.name[len(USER_MARK) :])
            if user is not None and os.path.isfile(os.path.join(entry.path, name)):
                owners.append(user)
    return owners, False
