"""A load that finds no session: say at WARNING which stored sessions it may have meant (issue 23, item 6).

A wrong ``user_id`` or a misspelled session id would otherwise load nothing
with an INFO line alone. The hint looks at a bounded number of stored ids
(:data:`NEAR_LIMIT`, and says so when it stopped there); when nothing is near,
the common first run, the INFO line stays the only word.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable, Sequence

from statekit.errors import StatekitError
from statekit.session._log import log_missing, logger

NEAR_LIMIT = 1000
"""At most this many stored ids (of the user) and owners (of the id) are looked at."""

Some = tuple[Sequence[object], bool]
"""Up to :data:`NEAR_LIMIT` names, and whether there were more."""


async def log_missing_load(
    source: str,
    session_id: str,
    user_id: str,
    ids: Callable[[], Awaitable[Some]],
    owners: Callable[[], Awaitable[Some]],
) -> None:
    """Log a load of a missing session: WARNING with the near matches when there are any, else INFO.

    Args:
        source: Where the session would be.
        session_id: The id asked for; ``user_id``: its owner.
        ids: The user's stored session ids (bounded).
        owners: The users who hold a session with this id (bounded).
    """
    try:
        (stored, more_ids), (users, more_users) = await ids(), await owners()
    except StatekitError:  # a hint must never make a load fail
        log_missing(source)
        return
    candidates = [name for name in stored if isinstance(name, str) and name != session_id]
    near = difflib.get_close_matches(session_id, candidates, n=3, cutoff=0.75)
    elsewhere = sorted(user for user in users if isinstance(user, str) and user != user_id)[:3]
    if not near and not elsewhere:
        log_missing(source)
        return
    hints = [f"the same id under user_id={user!r}" for user in elsewhere]
    hints += [f"session {name!r} of this user" for name in near]
    bounded = f" (looked at the first {NEAR_LIMIT} only)" if more_ids or more_users else ""
    logger.warning(
        "session %s does not exist; nothing was loaded (allow_not_exist=True). Did you mean %s?%s",
        source,
        ", or ".join(hints),
        bounded,
    )
