"""What the commands that go over many sessions (``list``, ``compact``, ``migrate``) share.

Each session is reported as soon as it is done, so that what was already
rewritten is on the terminal even if the run stops later; a session that fails
is reported on standard error and the others go on; the last line counts them.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TextIO

import attrs

from statekit.cli._hints import found_elsewhere
from statekit.cli._shared import UsageError
from statekit.errors import StatekitError
from statekit.session import SessionBase

FAILED = "failed"


@attrs.define
class Tally:
    """Sessions counted by what became of them, each reported as it is counted.

    Attributes:
        labels: The summary's label of each status, in the summary's order
            (``{"migrated": "would migrate", ...}``); one of them is :data:`FAILED`.
        out: Where sessions done or left alone are reported.
        err: Where failures are reported.
        counts: Sessions per status so far.
    """

    labels: dict[str, str]
    out: TextIO
    err: TextIO
    counts: dict[str, int] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.counts = dict.fromkeys(self.labels, 0)

    def report(self, status: str, line: str) -> None:
        """Count one session under ``status`` and print its ``line``."""
        self.counts[status] += 1
        print(line, file=self.err if status == FAILED else self.out, flush=True)

    def summary(self) -> bool:
        """Print the counts (``migrated 2, unchanged 1, failed 1``); whether none failed."""
        print(", ".join(f"{self.labels[status]} {count}" for status, count in self.counts.items()), file=self.out)
        return not self.counts[FAILED]


def where(store: SessionBase, session_id: str, user_id: str | None) -> str:
    """Where a session is stored, or ``session '<id>'`` for ids the store refuses."""
    try:
        return store.location(session_id, user_id)
    except StatekitError:
        return f"session {session_id!r}"


def reason(exc: StatekitError | OSError) -> str:
    """Why a session failed, in one message (an ``OSError`` names its file)."""
    if isinstance(exc, OSError):
        return f"{exc.filename}: {exc.strerror or exc}" if exc.filename else str(exc.strerror or exc)
    return str(exc)


Target = tuple[str | None, str]
"""A session a command goes over: its user (``None``: the store's default user) and its id."""


async def targets(store: SessionBase, session_ids: Sequence[str], user_id: str | None, *, all_users: bool) -> list[Target]:
    """The sessions a command goes over: those named, every session of every user, or the user's.

    Raises:
        StatekitError: None were named and the user has none, but the store
            holds others (another user's, or in the other file format): saying
            which, and the option that reaches them. A store with no sessions
            at all is no error (a first run).
    """
    if all_users:
        return [(user, session_id) for user in await store.alist_users() for session_id in await store.alist_sessions(user)]
    if session_ids:
        return [(user_id, session_id) for session_id in session_ids]
    found = await store.alist_sessions(user_id)
    if not found:
        elsewhere = await found_elsewhere(store, user_id)
        if elsewhere is not None:
            raise StatekitError(elsewhere)
    return [(user_id, session_id) for session_id in found]


async def targets_of(store: SessionBase, args: argparse.Namespace) -> list[Target]:
    """The sessions a command over many goes over, as its arguments name them (see :func:`targets`).

    Raises:
        UsageError: ``--all-users`` with ``--user`` or session ids.
    """
    session_ids: list[str] = getattr(args, "session_ids", [])
    if args.all_users and (args.user is not None or session_ids):
        raise UsageError("--all-users goes over every session of every user: give no --user and no SESSION_ID")
    return await targets(store, session_ids, args.user, all_users=args.all_users)


def label(target: Target, *, all_users: bool) -> str:
    """How a line names a session: its id, with its user when the command goes over every user's."""
    user, session_id = target
    return f"{session_id} (user {user!r})" if all_users else session_id
