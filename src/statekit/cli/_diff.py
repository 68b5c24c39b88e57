"""``statekit diff``: the field paths whose values differ between two revisions of a session; exit status as diff(1)'s."""

from __future__ import annotations

import argparse
import sys

from statekit.cli._changes import changes
from statekit.cli._revision_names import history_of, pick
from statekit.cli._shared import OK, USAGE, Commands, command
from statekit.cli._show import modules_of
from statekit.cli._store import add_store_options, read_session, with_store
from statekit.session import SessionBase

DIFFERENT = 1
"""The exit status when the revisions differ (as diff(1)); a failure is 2."""


def add_diff(commands: Commands) -> None:
    """Add ``statekit diff`` to ``commands``."""
    sub = command(
        commands,
        "diff",
        "Print the field paths whose values differ between two revisions of a session.",
        _run,
        "examples:\n  statekit diff --dir sessions chat-1 3f2a9c1e0b7d          (that revision against the head)\n"
        "  statekit diff --dir sessions chat-1 head~1                (what the last save changed)\n"
        "  statekit diff --dir sessions chat-1 3f2a9c1e0b7d 9c1e0b7d3f2a\n\n"
        "One line per difference, in document order:\n"
        "  agent.turns: 3 -> 4\n"
        '  agent.memory.content[41]: added {"role": "user", "text": "Hi"}\n'
        '  agent.memory.content[3]: removed {"role": "assistant", ...}\n'
        "  notes: module added\n"
        "Values are compact JSON, cut when long; encrypted secrets are <secret>, never\n"
        "decrypted. Indices of removed items are their places in REV_A, of the others\n"
        "their places in REV_B.\n\n"
        "exit status (as diff(1)): 0 the revisions are equal (nothing printed),\n"
        "1 they differ, 2 trouble (no such session or revision, a usage error).",
        failed=USAGE,
    )
    sub.add_argument("session_id", metavar="SESSION_ID", help="the session")
    sub.add_argument("old", metavar="REV_A", help="the revision to compare from: a unique prefix, head or head~N")
    sub.add_argument("new", metavar="REV_B", nargs="?", default="head", help="the revision to compare to (default: head)")
    add_store_options(sub)


def _run(args: argparse.Namespace) -> int:
    async def work(store: SessionBase) -> int:
        revisions = await history_of(store, args.session_id, args.user)
        old, new = (pick(revisions, name, args.session_id).revision for name in (args.old, args.new))
        before, after = [(await read_session(store, args.session_id, args.user, at=revision)).data for revision in (old, new)]
        lines = list(changes(modules_of(before), modules_of(after)))
        sys.stdout.writelines(f"{line}\n" for line in lines)
        return DIFFERENT if lines else OK

    return with_store(args, work)
