"""``statekit copy``: sessions from one store into another (any backend to any), each copy read back and verified.

It goes through the stores' public document API: a session is read as its
plain document (its append-only items included) and written whole, so secrets
travel sealed, exactly as stored, and no key is needed. It is also the backup
and restore command (docs/backup.md).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import attrs
import orjson

from statekit.cli._batch import FAILED, Tally, Target, label, reason, targets_of, where
from statekit.cli._shared import INVALID, OK, Commands, command
from statekit.cli._store import open_url
from statekit.errors import ConflictError, LeaseError, StatekitError
from statekit.session import META_KEY, MISSING_REVISION, SessionBase

COPIED, IDENTICAL = "copied", "identical"
LABELS = {COPIED: "copied", IDENTICAL: "identical", FAILED: "refused"}
DRY_LABELS = {COPIED: "would copy", IDENTICAL: "identical", FAILED: "refused"}

_EPILOG = """\
examples:
  statekit copy sessions sqlite:///backup.db --all-users          (a backup)
  statekit copy sqlite:///backup.db sessions --all-users          (its restore)
  statekit copy file:///srv/sessions?format=yaml redis://localhost:6379/0 --user alice --dry-run

Each session is read back from the destination and compared with the source
(a digest of the whole document). A session already there and identical is
left as it is, so a rerun copies only what is missing; a different session
there is refused (exit status 1) unless --overwrite.
"""


def add_copy(commands: Commands) -> None:
    """Add ``statekit copy`` to ``commands``."""
    sub = command(
        commands,
        "copy",
        "Copy sessions from one store to another (any backend to any), verifying each copy: backup and restore.",
        _run,
        _EPILOG,
    )
    sub.add_argument(
        "source",
        metavar="SRC_URL",
        help="the store to copy from: a folder, file:///abs/dir[?format=yaml], redis://..., sqlite:///x.db, postgresql://...",
    )
    sub.add_argument("destination", metavar="DST_URL", help="the store to copy into (a new folder or database file is created)")
    sub.add_argument("--user", metavar="USER_ID", help="copy this user's sessions (default: the default user's, into the destination's default user)")
    sub.add_argument("--all-users", action="store_true", help="copy every session of every user (not with --user)")
    sub.add_argument("--dry-run", action="store_true", help="say what would be copied; write nothing")
    sub.add_argument("--overwrite", action="store_true", help="replace a different session of the same id at the destination")


def _run(args: argparse.Namespace) -> int:
    source = open_url(args.source, option="SRC_URL", must_exist=True)

    async def work() -> int:
        try:
            destination = open_url(args.destination, option="DST_URL", must_exist=False)
        except StatekitError:
            await source.aclose()
            raise
        try:
            todo = await targets_of(source, args)
            done = await copy_sessions(
                source,
                destination,
                todo,
                dry_run=args.dry_run,
                overwrite=args.overwrite,
                all_users=args.all_users,
                out=sys.stdout,
                err=sys.stderr,
            )
        finally:
            await source.aclose()
            await destination.aclose()
        return OK if done else INVALID

    return asyncio.run(work())


async def copy_sessions(
    source: SessionBase,
    destination: SessionBase,
    sessions: Sequence[Target],
    *,
    dry_run: bool,
    overwrite: bool,
    out: TextIO,
    err: TextIO,
    all_users: bool = False,
) -> bool:
    """Copy each session, reporting each on ``out`` (``err`` when refused), then the counts.

    A progress bar is drawn on ``err`` when it is a terminal. A session that
    fails is reported and the others go on.

    Args:
        source: Where the sessions are.
        destination: Where they go: each under the same user and id.
        sessions: The sessions (see :func:`~statekit.cli._batch.targets`).
        dry_run: Say what would be done; write nothing.
        overwrite: Replace a different session at the destination.
        out: Where copied and identical sessions, and the counts, are printed.
        err: Where refused sessions are printed, with why.
        all_users: The lines name each session's user.

    Returns:
        Whether none was refused.
    """
    tally = Tally(DRY_LABELS if dry_run else LABELS, out, err)
    bar = ProgressBar(len(sessions), err) if err.isatty() else None
    if bar is not None:
        bar.advance(0)
    for target in sessions:
        name = label(target, all_users=all_users)
        try:
            status, line = await _copy_one(source, destination, target, dry_run=dry_run, overwrite=overwrite)
        except (StatekitError, OSError) as exc:
            status, line = FAILED, f"{name}: not copied: {reason(exc)}"
        if bar is not None and (status == FAILED or out.isatty()):
            bar.clear()  # the line goes to the terminal: below the bar, not through it
        tally.report(status, f"{name}: {line}" if status != FAILED else line)
        if bar is not None:
            bar.advance()
    if bar is not None:
        bar.clear()
    return tally.summary()


async def _copy_one(
    source: SessionBase, destination: SessionBase, target: Target, *, dry_run: bool, overwrite: bool
) -> tuple[str, str]:
    """Copy one session: its status and the line that reports it."""
    user, session_id = target
    there = where(destination, session_id, user)
    stored = await source.aread_document(session_id, user)
    if stored is None:
        return FAILED, f"{where(source, session_id, user)}: not copied: it was deleted while the copy ran"
    digest = document_digest(stored.data)
    existing = await destination.aread_document(session_id, user)
    if existing is not None and document_digest(existing.data) == digest:
        return IDENTICAL, f"identical at {there}, left as it is"
    if existing is not None and not overwrite:
        return FAILED, (
            f"{there}: not copied: it holds a different session (revision {existing.revision[:12]}); "
            "give --overwrite to replace it"
        )
    done = f"copied to {there}" if existing is None else f"replaced {there}"
    if dry_run:
        return COPIED, f"would be copied to {there}" if existing is None else f"would replace {there}"
    expected = MISSING_REVISION if existing is None else existing.revision
    try:
        await destination.awrite_document(session_id, stored.data, user, expected_revision=expected)
    except LeaseError as exc:
        return FAILED, f"{there}: not copied: {exc}"
    except ConflictError:
        return FAILED, f"{there}: not copied: another writer wrote it while the copy ran; run the copy again"
    back = await destination.aread_document(session_id, user)
    if back is None or document_digest(back.data) != digest:
        return FAILED, (
            f"{there}: written, but it does not read back as the source session (its digest differs): "
            "check it before using it"
        )
    return COPIED, f"{done}, verified"


def document_digest(data: Mapping[str, Any]) -> str:
    """The SHA-256 of a session document as canonical JSON: equal documents, equal digests, whatever stored them.

    Keys are sorted, and the format number of statekit's metadata is left out
    (each store writes its own; a document without metadata, as older and
    AgentScope's files are, is the same document with it).
    """
    meta = data.get(META_KEY)
    if isinstance(meta, Mapping):
        rest = {name: value for name, value in meta.items() if name != "format"}
        data = {name: value for name, value in data.items() if name != META_KEY} | ({META_KEY: rest} if rest else {})
    try:
        canonical = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # an integer past 64 bits (a YAML store holds them): the slower encoder takes it
        canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    return hashlib.sha256(canonical).hexdigest()


@attrs.define
class ProgressBar:
    """A one-line progress bar on a terminal, redrawn in place (at most every :attr:`EVERY` seconds).

    Attributes:
        total: Sessions to go over.
        stream: The terminal.
        done: Sessions gone over so far.
    """

    total: int
    stream: TextIO
    done: int = 0
    _drawn: str = ""
    _when: float = 0.0

    WIDTH = 30
    EVERY = 0.1

    def advance(self, sessions: int = 1) -> None:
        """Count more sessions gone over, and redraw (unless it was drawn a moment ago)."""
        self.done += sessions
        now = time.monotonic()
        if self._drawn and self.done < self.total and now - self._when < self.EVERY:
            return
        self._when = now
        filled = self.WIDTH * self.done // self.total if self.total else self.WIDTH
        self._drawn = f"copying [{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total}"
        self.stream.write(f"\r{self._drawn}")
        self.stream.flush()

    def clear(self) -> None:
        """Erase the bar (before a line is printed, and at the end); the next :meth:`advance` draws it again."""
        if self._drawn:
            self.stream.write("\r" + " " * len(self._drawn) + "\r")
            self.stream.flush()
            self._drawn = ""
