"""``statekit compact``: fold the appended items of sessions back into their documents."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import TextIO

from statekit.cli._batch import FAILED, Tally, Target, label, reason, targets_of
from statekit.cli._shared import INVALID, OK, Commands, command
from statekit.cli._store import add_store_options, with_store
from statekit.errors import ConflictError, LeaseError, SessionNotFoundError, StatekitError
from statekit.session import SessionBase, backoff, revision_of

LABELS = {"compacted": "compacted", "unchanged": "unchanged", FAILED: FAILED}

ATTEMPTS = 8
"""How often a session written meanwhile is read and compacted again before it is reported."""


def add_compact(commands: Commands) -> None:
    """Add ``statekit compact`` to ``commands``."""
    sub = command(
        commands,
        "compact",
        "Fold the items appended to sessions' append-only lists back into their documents.",
        _run,
        "examples:\n  statekit compact --dir sessions chat-1\n  statekit compact --dir sessions   (every session)",
    )
    sub.add_argument("session_ids", nargs="*", metavar="SESSION_ID", help="the sessions (default: all of the user's)")
    add_store_options(sub, all_users=True)


def _run(args: argparse.Namespace) -> int:
    async def work(store: SessionBase) -> int:
        todo = await targets_of(store, args)
        done = await compact_sessions(store, todo, out=sys.stdout, err=sys.stderr, all_users=args.all_users)
        return OK if done else INVALID

    return with_store(args, work)


async def compact_sessions(
    store: SessionBase, sessions: Sequence[Target], *, out: TextIO, err: TextIO, all_users: bool = False
) -> bool:
    """Rewrite each session that has appended items as one whole document, reporting each.

    Each rewrite is conditional: a session written meanwhile is read and
    compacted again (up to :data:`ATTEMPTS` times, with a short random pause),
    so nothing a writer added is lost. A session that fails is reported on
    ``err`` and the others go on; the last line on ``out`` counts them.

    Args:
        store: Where the sessions are.
        sessions: The sessions (see :func:`~statekit.cli._batch.targets`).
        out: Where the sessions done or left alone, and the counts, are printed.
        err: Where the sessions that failed are printed, with why.
        all_users: The sessions are every user's: each line names the user too.

    Returns:
        Whether none failed.
    """
    tally = Tally(LABELS, out, err)
    for target in sessions:
        name = label(target, all_users=all_users)
        try:
            status, line = await _compact_one(store, *target)
        except (StatekitError, OSError) as exc:
            status, line = FAILED, f"not compacted: {reason(exc)}"
        tally.report(status, f"{name}: {line}")
    return tally.summary()


async def _compact_one(store: SessionBase, user_id: str | None, session_id: str) -> tuple[str, str]:
    """Compact one session: its status and what the line that reports it says."""
    for attempt in range(ATTEMPTS):
        stored = await store.aread_document(session_id, user_id)
        if stored is None:
            user = store.key(session_id, user_id).user_id
            raise SessionNotFoundError(f"no session {session_id!r} of user {user!r}")
        if revision_of(stored.raw) == stored.revision:  # the raw bytes are what is stored: no deltas
            return "unchanged", "nothing appended to fold in"
        try:
            await store.awrite_document(session_id, stored.data, user_id, expected_revision=stored.revision)
        except LeaseError:
            raise  # leased by a worker: no retry wins
        except ConflictError:
            await asyncio.sleep(backoff(attempt))  # written meanwhile: read what is there now
            continue
        return "compacted", f"compacted into {stored.source}"
    return FAILED, (
        f"not compacted: it was written {ATTEMPTS} times while being compacted, and each compaction keeps "
        "what was stored when it read it; run `statekit compact` again when its writers pause (the session "
        f"is as they left it, in {store.location(session_id, user_id)})"
    )
