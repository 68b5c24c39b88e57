"""``statekit list`` and ``statekit delete``: a store's sessions, by id."""

from __future__ import annotations

import argparse

from statekit.cli._batch import targets_of
from statekit.cli._shared import INVALID, OK, Commands, command, fail
from statekit.cli._store import add_store_options, with_store
from statekit.errors import StatekitError
from statekit.session import SessionBase


def add_list(commands: Commands) -> None:
    """Add ``statekit list`` to ``commands``."""
    sub = command(
        commands,
        "list",
        "List the session ids of a user, one per line.",
        _run_list,
        "examples:\n  statekit list --dir sessions\n  statekit list --redis-url redis://localhost:6379/0 --user alice\n"
        "  statekit list --dir sessions --all-users   (USER_ID<tab>SESSION_ID per line)",
    )
    add_store_options(sub, all_users=True)


def _run_list(args: argparse.Namespace) -> int:
    async def work(store: SessionBase) -> int:
        for user, session_id in await targets_of(store, args):
            print(f"{user}\t{session_id}" if args.all_users else session_id)
        return OK

    return with_store(args, work)


def add_delete(commands: Commands) -> None:
    """Add ``statekit delete`` to ``commands``."""
    sub = command(
        commands,
        "delete",
        "Delete sessions of a user; exit status 1 if one of them did not exist.",
        _run_delete,
        "examples:\n  statekit delete --dir sessions chat-1 chat-2\n  statekit delete --host localhost --user alice chat-1",
    )
    sub.add_argument("session_ids", nargs="+", metavar="SESSION_ID", help="the sessions to delete")
    add_store_options(sub)


def _run_delete(args: argparse.Namespace) -> int:
    async def work(store: SessionBase) -> int:
        status = OK
        for session_id in args.session_ids:
            try:
                deleted = await store.adelete(session_id, args.user)
            except StatekitError as exc:  # reported; the other sessions are still deleted
                status = fail(f"statekit delete: {exc}", INVALID)
                continue
            if deleted:
                print(f"deleted {session_id}")
            else:
                user = store.key(session_id, args.user).user_id
                status = fail(f"statekit delete: no session {session_id!r} of user {user!r}", INVALID)
        return status

    return with_store(args, work)
