"""What the ``statekit`` command says when the user most likely meant something else."""

from __future__ import annotations

import shlex
from pathlib import Path

from statekit.codecs import JSON
from statekit.session import JSONSession, SessionBase, YAMLSession
from statekit.session.files import companion_path

FOLDERS = (JSONSession, YAMLSession)
"""The stores of session files (``--dir``): the two the command opens."""

STORE_OPTIONS = "--dir DIR (add --yaml for YAML files) or --redis-url URL"
"""How a command is told where stored sessions are."""


def show_target_hint(target: str) -> str:
    """Why ``statekit show TARGET`` (no store named) cannot read ``target`` as a file, and what to write.

    Empty when there is nothing to add to the suffix error.
    """
    path = Path(target)
    document = path.with_suffix("")
    if document.suffix == JSON.suffix and companion_path(document) == path:
        return (
            f"{target} is the companion of {document} (the items appended to its append-only lists): "
            f"show {document}, which includes them"
        )
    if not path.suffix:
        return f"to show a stored session by its id, say where the sessions are: {STORE_OPTIONS}"
    return ""


async def found_elsewhere(store: SessionBase, user_id: str | None) -> str | None:
    """What a command that found no session of ``user_id`` can say it found instead, and the option that reaches it.

    Other users' sessions, and (in a folder) sessions in the other file format.
    ``None`` when the store holds no session at all.
    """
    user = store.key("x", user_id).user_id
    found = []
    others, option = await _others(store, user)
    if others:
        found.append(f"{others} ({option}, or --all-users)")
    if isinstance(store, FOLDERS):
        yaml = isinstance(store, YAMLSession)
        kind, twin, suffix = ("JSON", JSONSession, "leave out --yaml") if yaml else ("YAML", YAMLSession, "add --yaml")
        async with twin(store.save_dir) as other:
            mine, (elsewhere, option) = await other.alist_sessions(user), await _others(other, user, kind)
        if mine:
            found.append(f"{_sessions(len(mine), kind)} of user {user!r} ({suffix})")
        elif elsewhere:
            found.append(f"{elsewhere} ({suffix} and {option}, or --all-users)")
    if not found:
        return None
    place = store.save_dir if isinstance(store, FOLDERS) else getattr(store, "address", type(store).__name__)
    return f"no sessions of user {user!r} in {place}; found {', and '.join(found)}"


async def _others(store: SessionBase, user: str, kind: str = "") -> tuple[str, str]:
    """``"2 sessions of user 'alice'"`` (or of several other users; ``""``: none) and how to reach them
    (``add --user alice``, ``leave out --user`` for the default user, ``add --user USER_ID``).

    ``kind``: the sessions' format when it is not the one the command was asked for (``"YAML"``).
    """
    names = [name for name in await store.alist_users() if name != user]
    counts = [(name, len(await store.alist_sessions(name))) for name in names[:_SHOWN]]
    if len(names) == 1:
        default = names[0] == store.key("x").user_id
        reach = "leave out --user" if default else f"add --user {shlex.quote(names[0])}"
        return f"{_sessions(counts[0][1], kind)} of user {names[0]!r}", reach
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    listed = ", ".join(f"{name!r} ({count})" for name, count in counts)
    return (f"{kind + ' ' if kind else ''}sessions of other users: {listed}{more}" if names else ""), "add --user USER_ID"


def _sessions(count: int, kind: str = "") -> str:
    noun = f"{kind} session" if kind else "session"
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


_SHOWN = 5
"""How many other users a message names."""
