"""``statekit compact``: fold the appended items of sessions back into their documents."""

from __future__ import annotations

import asyncio
from typing import TextIO

from statekit._cli_batch import FAILED, Tally, reason
from statekit.errors import ConflictError, SessionNotFoundError, StatekitError
from statekit.session import SessionBase
from statekit.session._revisions import backoff, revision_of

LABELS = {"compacted": "compacted", "unchanged": "unchanged", FAILED: FAILED}

ATTEMPTS = 8
"""How often a session written meanwhile is read and compacted again before it is reported."""


async def compact_sessions(store: SessionBase, session_ids: list[str], user_id: str | None, *, out: TextIO, err: TextIO) -> bool:
    """Rewrite each session that has appended items as one whole document, reporting each.

    Each rewrite is conditional: a session written meanwhile raises
    ``ConflictError`` and is left as it is. A session that fails is reported
    on ``err`` and the others go on; the last line on ``out`` counts them.

    Args:
        store: Where the sessions are.
        session_ids: The sessions; empty: every session of the user.
        user_id: Their owner (``None``: the store's default user).
        out: Where the sessions done or left alone, and the counts, are printed.
        err: Where the sessions that failed are printed, with why.

    Returns:
        Whether none failed.
    """
    tally = Tally(LABELS, out, err)
    for session_id in session_ids or await store.alist_sessions(user_id):
        try:
            status, line = await _compact_one(store, session_id, user_id)
        except (StatekitError, OSError) as exc:
            status, line = FAILED, f"{session_id}: not compacted: {reason(exc)}"
        tally.report(status, line)
    return tally.summary()


async def _compact_one(store: SessionBase, session_id: str, user_id: str | None) -> tuple[str, str]:
    """Compact one session: its status and the line that reports it."""
    source = store.location(session_id, user_id)
    for attempt in range(ATTEMPTS):
        stored = await store.aread_document(session_id, user_id)
        if stored is None:
            user = store.key(session_id, user_id).user_id
            raise SessionNotFoundError(f"no session {session_id!r} of user {user!r}")
        if revision_of(stored.raw) == stored.revision:  # the raw bytes are what is stored: no deltas
            return "unchanged", f"{session_id}: nothing appended to fold in"
        try:
            await store.awrite_document(session_id, stored.data, user_id, expected_revision=stored.revision)
        except ConflictError:
            await asyncio.sleep(backoff(attempt))  # written meanwhile: read what is there now
            continue
        return "compacted", f"{session_id}: compacted into {stored.source}"
    return FAILED, (
        f"{session_id}: not compacted: it was written {ATTEMPTS} times while being compacted, and each "
        "compaction keeps what was stored when it read it; run `statekit compact` again when its writers pause "
        f"(the session is as they left it, in {source})"
    )
