"""``statekit compact``: fold the appended items of sessions back into their documents."""

from __future__ import annotations

from statekit.errors import SessionNotFoundError
from statekit.session import SessionBase
from statekit.session._revisions import revision_of


async def compact_sessions(store: SessionBase, session_ids: list[str], user_id: str | None) -> list[str]:
    """Rewrite each session that has appended items as one whole document.

    Each rewrite is conditional: a session written meanwhile raises
    ``ConflictError`` and is left as it is.

    Args:
        store: Where the sessions are.
        session_ids: The sessions; empty: every session of the user.
        user_id: Their owner (``None``: the store's default user).

    Returns:
        One line per session, saying what was done.

    Raises:
        SessionNotFoundError: A session named does not exist.
    """
    lines = []
    for session_id in session_ids or await store.alist_sessions(user_id):
        stored = await store.aread_document(session_id, user_id)
        if stored is None:
            user = store.key(session_id, user_id).user_id
            raise SessionNotFoundError(f"no session {session_id!r} of user {user!r}")
        if revision_of(stored.raw) == stored.revision:  # the raw bytes are what is stored: no deltas
            lines.append(f"{session_id}: nothing appended to fold in")
            continue
        await store.awrite_document(session_id, stored.data, user_id, expected_revision=stored.revision)
        lines.append(f"{session_id}: compacted into {stored.source}")
    return lines
