"""``statekit import-agentscope``: copy an AgentScope 1.x session folder into statekit's layout.

AgentScope names files ``{user_id}_{session_id}.json``, so a name with ``_``
does not say where the user ends: ``a_b_c.json`` may be user ``a``, ``a_b`` or
no user at all. A name without ``_`` is a session of no user; any other name is
split only by the ``--user-id`` values given (``--user-id ""``: "a name no other
--user-id fits is a session of no user"), and a name that matches none, or more
than one, is reported and left alone. So one run with every user and ``''``
imports a mixed folder, each file once. Old files are only read; a session
already in the new folder with the same data is reported as there (a rerun
succeeds), with other data kept unless ``--overwrite``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any, TextIO

import attrs

from statekit.cli._shared import INVALID, OK, Commands, UsageError, command
from statekit.codecs import repaired
from statekit.errors import ConflictError, DocumentError, LeaseError, StatekitError, format_path
from statekit.session import META_KEY, MISSING_REVISION, JSONSession
from statekit.session.files import read_regular_file, session_stems

SUFFIX = ".json"


def add_import_agentscope(commands: Commands) -> None:
    """Add ``statekit import-agentscope`` to ``commands``."""
    sub = command(
        commands,
        "import-agentscope",
        "Copy an AgentScope 1.x JSONSession folder into statekit's layout (docs/agentscope.md).",
        _run,
        "examples:\n  statekit import-agentscope old_sessions sessions\n"
        "  statekit import-agentscope old_sessions sessions --user-id alice --user-id bob --user-id ''\n\n"
        "AgentScope names files {user_id}_{session_id}.json: a name with '_' is copied only when\n"
        "exactly one --user-id fits it (--user-id '': a name no other --user-id fits has no user).\n"
        "Every file copied and every name that cannot be split is reported; old files are only read;\n"
        "a session already there with the same data is left as it is (a rerun succeeds).\n"
        "Exit status 1 if any file was neither copied nor already there.",
    )
    sub.add_argument("old_dir", metavar="OLD_DIR", help="the folder AgentScope's JSONSession saved into")
    sub.add_argument("new_dir", metavar="NEW_DIR", help="the folder of statekit's JSONSession")
    sub.add_argument("--user-id", action="append", default=[], metavar="USER", help="a user whose files to split off (repeatable)")
    sub.add_argument("--overwrite", action="store_true", help="replace sessions already in NEW_DIR")
    sub.add_argument(
        "--replace-invalid",
        action="store_true",
        help="copy files holding NaN, Infinity or lone surrogates (JSON holds none) with null and U+FFFD instead, reporting each",
    )


def _run(args: argparse.Namespace) -> int:
    old_dir, new_dir = Path(args.old_dir), Path(args.new_dir)
    if not old_dir.is_dir():  # as --dir of the other commands: a failed operation, not a usage error
        raise StatekitError(f"{old_dir}: there is no such folder")
    if new_dir.exists() and not new_dir.is_dir():  # else every copy fails with "File exists"
        raise UsageError(f"{new_dir} is not a folder")
    done = asyncio.run(
        import_folder(
            old_dir, new_dir, args.user_id, overwrite=args.overwrite, out=sys.stdout, err=sys.stderr, replace_invalid=args.replace_invalid
        )
    )
    return OK if done else INVALID


@attrs.frozen
class Split:
    """One old file and every ``(user_id, session_id)`` its name can stand for."""

    name: str
    pairs: list[tuple[str, str]]


def split_stem(stem: str, users: list[str]) -> list[tuple[str, str]]:
    """Every ``(user_id, session_id)`` a file stem can stand for, among ``users``.

    ``""`` in ``users`` means "when no other user fits, a session of no user"
    (the whole stem); a stem without ``_`` can only be that. More than one
    answer: the name is ambiguous.
    """
    if "_" not in stem:
        return [("", stem)]
    found = [(user, stem[len(user) + 1 :]) for user in users if user and stem.startswith(f"{user}_")]
    found = [pair for pair in found if pair[1]]
    if "" in users and not found:
        found.append(("", stem))
    return found


def plan_import(old_dir: Path, users: list[str]) -> list[Split]:
    """Every session file of ``old_dir`` with the ids its name splits into."""
    return [Split(stem + SUFFIX, split_stem(stem, users)) for stem in session_stems(old_dir, SUFFIX)]


async def import_folder(
    old_dir: Path, new_dir: Path, users: list[str], *, overwrite: bool, out: TextIO, err: TextIO, replace_invalid: bool = False
) -> bool:
    """Copy every file whose name splits one way; report each one.

    ``replace_invalid`` copies a file holding NaN, Infinity or lone surrogates
    (what Python's ``json`` writes and JSON cannot hold) with ``null`` and U+FFFD
    in their place, reporting each.

    Returns:
        Whether every file was copied (or was there already).
    """
    old, new = JSONSession(old_dir, layout="agentscope"), JSONSession(new_dir)
    ok = True
    splits = plan_import(old_dir, users)
    for split in splits:
        if len(split.pairs) != 1:
            print(_ambiguous(split, users), file=err)
            ok = False
        elif not await _copy(old, new, old_dir / split.name, *split.pairs[0], (overwrite, replace_invalid), out=out, err=err):
            ok = False
    copied = sum(1 for split in splits if len(split.pairs) == 1)
    print(f"{len(splits)} session file(s) in {old_dir}; {copied} with one reading of their name", file=out)
    return ok


async def _copy(
    old: JSONSession, new: JSONSession, source: Path, user_id: str, session_id: str, flags: tuple[bool, bool], *, out: TextIO, err: TextIO
) -> bool:
    overwrite, replace_invalid = flags
    data: Any = None
    try:
        data = await _read(old, source, user_id, session_id, replace_invalid, out)
        expected = None if overwrite else MISSING_REVISION
        await new.awrite_document(session_id, data, user_id, expected_revision=expected, overwrite=overwrite)
    except LeaseError as exc:
        print(f"failed {source}: {exc}", file=err)
        return False
    except ConflictError:
        return await _already_there(new, data, user_id, session_id, out=out, err=err)
    except StatekitError as exc:
        print(f"failed {source}: {exc}", file=err)
        return False
    print(f"copied {source} -> {new.session_path(session_id, user_id)} (user_id {user_id!r}, session_id {session_id!r})", file=out)
    return True


async def _read(old: JSONSession, source: Path, user_id: str, session_id: str, replace_invalid: bool, out: TextIO) -> Any:
    """The old file's document; with ``replace_invalid``, repaired when Python's ``json`` wrote what JSON cannot hold.

    Raises:
        StatekitError: It cannot be read (or is gone).
    """
    try:
        document = await old.aread_document(session_id, user_id)
    except DocumentError:
        try:
            raw = read_regular_file(source) if replace_invalid else None
        except OSError as exc:
            raise StatekitError(f"cannot read {source}: {exc}") from exc
        fixed = None if raw is None else repaired(raw)
        if fixed is None:
            raise
        for path, what in fixed[1]:
            where = f"at {format_path(path) or 'the top level'} in {source}"
            if what.startswith("a surrogate pair"):
                print(f"joined {what} {where}", file=out)
            else:
                print(f"replaced {what} {where} with {'U+FFFD' if what.startswith('a lone') else 'null'}", file=out)
        return fixed[0]
    if document is None:
        raise StatekitError(f"{source} disappeared")
    return document.data


async def _already_there(new: JSONSession, data: Any, user_id: str, session_id: str, *, out: TextIO, err: TextIO) -> bool:
    """Whether the session in the new folder holds the old file's data (a rerun: nothing to do); report it."""
    path = new.session_path(session_id, user_id)
    try:
        stored = await new.aread_document(session_id, user_id)
    except StatekitError as exc:
        print(f"kept {path}: it exists and cannot be read ({exc}); --overwrite replaces it", file=err)
        return False
    if stored is not None and _states(stored.data) == _states(data):
        print(f"already there: {path} (user_id {user_id!r}, session_id {session_id!r})", file=out)
        return True
    print(f"kept {path}: it exists (--overwrite replaces it)", file=err)
    return False


def _states(document: Any) -> dict[str, Any]:
    return {name: state for name, state in document.items() if name != META_KEY}


def _ambiguous(split: Split, users: list[str]) -> str:
    stem = split.name[: -len(SUFFIX)]
    readings = split.pairs or _every_reading(stem)
    shown = ", ".join(f"({user!r}, {session!r})" for user, session in readings)
    if stem.endswith("_") and (stem[:-1] in users or not users):
        hint = (
            f"as user {stem[:-1]!r}, its session id is empty, which statekit cannot hold; "
            f"--user-id '' imports it as session {stem!r} of no user (the same file name in AgentScope's layout)"
        )
    elif not users:
        hint = "name its user with --user-id USER (or --user-id '' if it has none)"
    else:
        hint = "no --user-id given fits it" if not split.pairs else "more than one --user-id fits it"
    return f"cannot split {split.name}: it may be {shown}; {hint}"


def _every_reading(stem: str) -> list[tuple[str, str]]:
    cuts = [i for i, char in enumerate(stem) if char == "_" and 0 < i < len(stem) - 1]
    return [("", stem)] + [(stem[:i], stem[i + 1 :]) for i in cuts]
