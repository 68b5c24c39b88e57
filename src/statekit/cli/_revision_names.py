"""Revisions as the command line names them: a unique prefix, ``head`` or ``head~N``, found in the session's history.

The history commands print revisions cut to :data:`SHORT` characters; every
command that takes a revision (``show --at``, ``diff``, ``rollback``) accepts
such a prefix (at least :data:`MIN_PREFIX` characters, or the whole revision),
``head`` (the session as it is now) or ``head~N`` (the N-th revision before it
in ``statekit history``'s list, newest first).
"""

from __future__ import annotations

import re
from typing import Final

from statekit.cli._shared import UsageError
from statekit.cli._store import no_session
from statekit.errors import SessionNotFoundError
from statekit.session import Revision, SessionBase

SHORT: Final = 12
"""How many characters of a revision the commands print."""

MIN_PREFIX: Final = 4
"""The shortest prefix a revision may be named by (a whole revision is always accepted)."""

_HEAD = re.compile(r"head(?:~(\d+))?", re.IGNORECASE)


def short(revision: str) -> str:
    """A revision cut to :data:`SHORT` characters, as the commands print it."""
    return revision[:SHORT]


async def history_of(store: SessionBase, session_id: str, user_id: str | None) -> list[Revision]:
    """The session's revisions, newest first (the head first).

    Raises:
        SessionNotFoundError: There is no such session.
    """
    revisions = await store.ahistory(session_id, user_id)
    if not revisions:
        raise no_session(store, session_id, user_id)
    return revisions


def pick(revisions: list[Revision], name: str, session_id: str) -> Revision:
    """The revision of ``revisions`` (a session's history, head first) that ``name`` names.

    Raises:
        UsageError: ``name`` is no revision name, too short a prefix, or a prefix of several revisions.
        SessionNotFoundError: The session holds no revision of that name (never kept, or pruned).
    """
    head = _HEAD.fullmatch(name)
    if head is not None:
        back = int(head.group(1) or 0)
        if back >= len(revisions):
            raise SessionNotFoundError(
                f"{name}: session {session_id!r} lists {len(revisions)} revision(s), "
                f"head to head~{len(revisions) - 1} (statekit history lists them)"
            )
        return revisions[back]
    wanted = name.lower()
    exact = [revision for revision in revisions if revision.revision == wanted]
    if exact:
        return exact[0]
    if not re.fullmatch(r"[0-9a-f]+", wanted):
        raise UsageError(f"{name!r} is not a revision: give one statekit history lists (or a prefix of it), head or head~N")
    if len(wanted) < MIN_PREFIX:
        raise UsageError(f"revision prefix {name!r} is too short: give at least {MIN_PREFIX} characters")
    found = list({revision.revision: revision for revision in revisions if revision.revision.startswith(wanted)}.values())
    if len(found) > 1:
        names = ", ".join(short(revision.revision) for revision in found)
        raise UsageError(f"revision prefix {name!r} names {len(found)} revisions of session {session_id!r} ({names}): give more characters")
    if not found:
        raise SessionNotFoundError(
            f"session {session_id!r} holds no revision {name!r}: it was never kept, or was pruned (statekit history lists them)"
        )
    return found[0]


async def resolve(store: SessionBase, session_id: str, user_id: str | None, name: str) -> str:
    """The whole revision ``name`` names in the session's history (see :func:`pick`).

    Raises:
        SessionNotFoundError: No such session, or no such revision.
        UsageError: ``name`` is ambiguous or no revision name.
    """
    return pick(await history_of(store, session_id, user_id), name, session_id).revision
