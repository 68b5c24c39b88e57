"""``statekit history`` (a session's revisions, or ``--keep N`` to set how many it keeps) and ``statekit rollback``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from statekit.cli._revision_names import history_of, resolve, short
from statekit.cli._shared import OK, Commands, UsageError, command
from statekit.cli._store import add_store_options, no_session, with_store
from statekit.codecs import JSON
from statekit.errors import StatekitError
from statekit.session import Revision, SessionBase

_NO_TIME = "-"


def add_history(commands: Commands) -> None:
    """Add ``statekit history`` to ``commands``."""
    sub = command(
        commands,
        "history",
        "List a session's revisions, newest first (the head first); --keep N sets how many past revisions it keeps.",
        _run_history,
        "examples:\n  statekit history --dir sessions chat-1\n  statekit history --dir sessions --user alice chat-1 --limit 5 --json\n"
        "  statekit history --dir sessions chat-1 --keep 20     (keep the 20 most recent past revisions)\n"
        "  statekit history --dir sessions chat-1 --keep all    (keep every one; --keep 0: none)\n\n"
        "Each line: revision (its first 12 characters; show --at, diff and rollback take\n"
        "any unique prefix, head or head~N), when it was saved (UTC; - when the session\n"
        "kept no history then), its size in bytes, its parent, its modules, and where a\n"
        "fork came from. --json prints every field, revisions whole.",
    )
    sub.add_argument("session_id", metavar="SESSION_ID", help="the session")
    sub.add_argument("--limit", type=_count, metavar="N", help="list only the N newest revisions")
    sub.add_argument("--json", action="store_true", help="print a JSON list of the revisions, every field whole")
    sub.add_argument(
        "--keep",
        type=_retention,
        metavar="N",
        default=argparse.SUPPRESS,
        help="instead of listing: set how many past revisions the session keeps (N, or all), "
        "lowering it too (the oldest ones are dropped now)",
    )
    add_store_options(sub)


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (an integer >= 0)")
    return int(text)


def _retention(text: str) -> int | None:
    if text.lower() == "all":
        return None
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: give how many past revisions to keep (an integer >= 0), or all")
    return int(text)


def _run_history(args: argparse.Namespace) -> int:
    if "keep" in args:
        if args.limit is not None or args.json:
            raise UsageError("--keep sets how many revisions the session keeps; list them without it (--limit, --json)")
        return with_store(args, lambda store: _set_keep(store, args))

    async def work(store: SessionBase) -> int:
        revisions = await history_of(store, args.session_id, args.user)
        if args.limit is not None:
            revisions = revisions[: args.limit]
        if args.json:
            sys.stdout.write(JSON.dumps([revision_data(revision) for revision in revisions]).decode("utf-8"))
        else:
            sys.stdout.writelines(f"{line}\n" for line in table(revisions))
            if revisions and revisions[0].saved_at is None:
                print(
                    f"statekit history: session {args.session_id!r} keeps no history (its head alone): "
                    "keep it with statekit history --keep N, or keep_history=N in the application",
                    file=sys.stderr,
                )
        return OK

    return with_store(args, work)


async def _set_keep(store: SessionBase, args: argparse.Namespace) -> int:
    keep: int | None = args.keep
    if keep != 0 and not store.supports_history:
        raise StatekitError(
            f"--keep {'all' if keep is None else keep}: {type(store).__name__} stores keep no history "
            "(supports_history is false); nothing was changed"
        )
    head = await store.aprune_history(args.session_id, args.user, keep=keep)
    if head is None:
        raise no_session(store, args.session_id, args.user)
    kept = "every past revision" if keep is None else "no history" if keep == 0 else f"at most {keep} past revision(s)"
    print(f"{args.session_id}: keeps {kept} now (head {short(head)})")
    return OK


def table(revisions: list[Revision]) -> list[str]:
    """``statekit history``'s lines: a header, then one line per revision, in columns."""
    rows = [("revision", "saved at (UTC)", "size", "parent", "modules")]
    rows += [
        (
            short(revision.revision),
            _NO_TIME if revision.saved_at is None else revision.saved_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            str(revision.size),
            _NO_TIME if revision.parent is None else short(revision.parent),
            ",".join(revision.modules) or _NO_TIME,
        )
        for revision in revisions
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    lines = []
    for row, revision in zip(rows, (None, *revisions)):
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2].rjust(widths[2]), row[3].ljust(widths[3]), row[4]]
        forked = None if revision is None else revision.forked_from
        if forked is not None:
            user, session_id, at = forked
            cells.append(f"forked from {user}/{session_id}@{short(at)}" if user else f"forked from {session_id}@{short(at)}")
        lines.append("  ".join(cells))
    return lines


def revision_data(revision: Revision) -> dict[str, Any]:
    """A revision as ``history --json`` prints it: every field whole, the time as ISO 8601 with its offset."""
    forked = revision.forked_from
    return {
        "revision": revision.revision,
        "parent": revision.parent,
        "saved_at": None if revision.saved_at is None else revision.saved_at.isoformat(),
        "size": revision.size,
        "modules": list(revision.modules),
        "forked_from": None if forked is None else {"user_id": forked[0], "session_id": forked[1], "revision": forked[2]},
    }


def add_rollback(commands: Commands) -> None:
    """Add ``statekit rollback`` to ``commands``."""
    sub = command(
        commands,
        "rollback",
        "Make a new head whose modules equal an earlier revision's; print the new revision.",
        _run_rollback,
        "examples:\n  statekit rollback --dir sessions chat-1 3f2a9c1e0b7d\n  statekit rollback --dir sessions chat-1 head~1\n\n"
        "Nothing is destroyed: the revisions rolled back stay in the history. A session\n"
        "written meanwhile is not rolled back (status 1): run it again. Applications\n"
        "holding the session must load it again (their next save conflicts).",
    )
    sub.add_argument("session_id", metavar="SESSION_ID", help="the session")
    sub.add_argument("revision", metavar="REV", help="the revision to go back to: a unique prefix, head~N")
    add_store_options(sub)


def _run_rollback(args: argparse.Namespace) -> int:
    async def work(store: SessionBase) -> int:
        revision = await resolve(store, args.session_id, args.user, args.revision)
        print(await store.arollback(args.session_id, revision, user_id=args.user))
        return OK

    return with_store(args, work)
