"""``statekit rekey``: re-encrypt the secret fields of stored sessions with a new key.

It works on the stored documents as plain data and needs no class: every
encrypted value (``{"__secret__": "v1:..."}``) is opened with whichever of the
keys sealed it and sealed again with the new one; a session whose secrets are
all on the new key already, or that holds none, is left byte for byte as it
is. Each rewrite is a compare-and-set on the revision read: a session that a
writer changes meanwhile is read again and redone, a few times, then reported
and left as that writer left it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from statekit.cli._batch import FAILED, Tally, reason, where
from statekit.cli._shared import INVALID, OK, Commands, UsageError, command
from statekit.cli._store import add_store_options, with_store
from statekit.values.secrets import SecretBox, is_sealed
from statekit.errors import ConflictError, LeaseError, PathSegment, SecretError, SessionNotFoundError, StatekitError, format_path
from statekit.session import SessionBase

ATTEMPTS = 5
"""Reads and compare-and-set writes of one session before a concurrent writer wins and it is reported."""

REKEYED, CURRENT, UNKEYED = "rekeyed", "current", "unkeyed"

REKEY_SUMMARY = "Re-encrypt the secret fields of stored sessions with a new secret_key (docs/key-rotation.md)."

REKEY_EPILOG = f"""\
examples:
  statekit rekey --dir sessions --new-key-env NEW_KEY --old-key-env OLD_KEY --dry-run
  statekit rekey --redis-url redis://localhost:6379/0 --user alice --new-key-env NEW_KEY --old-key-env OLD_KEY

Keys are read from environment variables, never from the command line. Each session is
rewritten only if nobody changed it meanwhile (else read again, up to {ATTEMPTS} times); sessions
already on the new key, or without encrypted secrets, are left as they are.
Exit status 1 if any failed."""


def add_rekey(commands: Commands) -> None:
    """Add ``statekit rekey`` to ``commands``."""
    sub = command(commands, "rekey", REKEY_SUMMARY, _run, REKEY_EPILOG)
    _add_arguments(sub)
    add_store_options(sub)


def _run(args: argparse.Namespace) -> int:
    box = rekey_box(args.new_key_env, args.old_key_env)

    async def work(store: SessionBase) -> int:
        return OK if await rekey_sessions(store, args.session_ids, args.user, box, dry_run=args.dry_run) else INVALID

    return with_store(args, work)


def _add_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("session_ids", nargs="*", metavar="SESSION_ID", help="the sessions (default: all of the user's)")
    sub.add_argument("--new-key-env", required=True, metavar="VAR", help="the environment variable holding the new key")
    sub.add_argument(
        "--old-key-env", action="append", default=[], metavar="VAR", help="one holding a key to replace (repeatable)"
    )
    sub.add_argument("--dry-run", action="store_true", help="say what would be re-encrypted; write nothing")


def rekey_box(new_key_env: str, old_key_envs: Sequence[str]) -> SecretBox:
    """The keys named by ``--new-key-env`` and ``--old-key-env``: the new one seals, each one opens.

    Raises:
        UsageError: A variable is not set, or holds no valid key (the message never shows it).
    """
    keys = [_key_from(option, variable) for option, variable in _options(new_key_env, old_key_envs)]
    return SecretBox(keys)


def _options(new_key_env: str, old_key_envs: Sequence[str]) -> list[tuple[str, str]]:
    return [("--new-key-env", new_key_env), *(("--old-key-env", variable) for variable in old_key_envs)]


def _key_from(option: str, variable: str) -> str:
    key = os.environ.get(variable)
    if not key:
        raise UsageError(f"{option} {variable}: the environment variable is not set")
    try:
        SecretBox(key)
    except SecretError as exc:
        raise UsageError(f"{option} {variable}: {exc}") from None
    return key


async def rekey_sessions(
    store: SessionBase,
    session_ids: Sequence[str],
    user_id: str | None,
    box: SecretBox,
    *,
    dry_run: bool,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> bool:
    """Re-encrypt each session's secrets with the first key of ``box``, reporting each session.

    A session that fails (a secret none of the keys opens, a writer that kept
    changing it) is reported on ``err`` and left as it was; the others go on.
    The last line on ``out`` counts them.

    Args:
        store: Where the sessions are.
        session_ids: The sessions; empty: every session of the user.
        user_id: Their owner (``None``: the store's default user).
        box: The new key first, then the old ones.
        dry_run: Say what would be done; write nothing.
        out: Where the sessions done or left alone, and the counts, are printed (standard output).
        err: Where the sessions that failed are printed, with why (standard error).

    Returns:
        Whether none failed.
    """
    labels = {REKEYED: "would rekey" if dry_run else "rekeyed", CURRENT: "already on the new key"}
    tally = Tally({**labels, UNKEYED: "without encrypted secrets", FAILED: FAILED}, out or sys.stdout, err or sys.stderr)
    for session_id in session_ids or await store.alist_sessions(user_id):
        try:
            status, line = await _rekey_one(store, session_id, user_id, box, dry_run)
        except (StatekitError, OSError) as exc:
            status, line = FAILED, f"{where(store, session_id, user_id)}: not rekeyed: {reason(exc)}"
        tally.report(status, line)
    return tally.summary()


async def _rekey_one(store: SessionBase, session_id: str, user_id: str | None, box: SecretBox, dry_run: bool) -> tuple[str, str]:
    """Rekey one session: its status and the line that reports it."""
    source = where(store, session_id, user_id)
    for _ in range(ATTEMPTS):
        stored = await store.aread_document(session_id, user_id)
        if stored is None:
            user = store.key(session_id, user_id).user_id
            raise SessionNotFoundError(f"no session {session_id!r} of user {user!r}")
        resealed = Resealed(box)
        data = resealed.document(stored.data)
        total = resealed.moved + resealed.current
        if not total:
            return UNKEYED, f"{stored.source}: no encrypted secret; left as it is"
        if not resealed.moved:
            return CURRENT, f"{stored.source}: {_secrets(total)} already on the new key; left as it is"
        if dry_run:
            return REKEYED, f"{stored.source}: would re-encrypt {resealed.moved} of {_secrets(total)} with the new key"
        try:
            await store.awrite_document(session_id, data, user_id, expected_revision=stored.revision)
        except LeaseError:
            raise  # leased by a worker: no retry wins
        except ConflictError:
            continue  # another writer saved meanwhile: read its version and redo
        return REKEYED, f"{stored.source}: re-encrypted {resealed.moved} of {_secrets(total)} with the new key"
    raise ConflictError(
        f"{source} was changed by another writer during each of {ATTEMPTS} attempts; "
        "it was left as that writer saved it: run statekit rekey again",
        source=source,
    )


def _secrets(count: int) -> str:
    return f"{count} secret" if count == 1 else f"{count} secrets"


class Resealed:
    """A document's encrypted secrets, opened and sealed again with the box's first key.

    Attributes:
        moved: Secrets sealed with an older key (sealed again).
        current: Secrets already sealed with the first key (kept as stored).
    """

    def __init__(self, box: SecretBox) -> None:
        self._box = box
        self.moved = 0
        self.current = 0

    def document(self, data: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``data`` with every secret on the new key.

        Raises:
            SecretError: A secret none of the keys opens, named by its path.
        """
        return {name: self._walk(value, (name,)) for name, value in data.items()}

    def _walk(self, data: Any, path: tuple[PathSegment, ...]) -> Any:
        if is_sealed(data):
            return self._reseal(data, path)
        if type(data) is dict:
            return {key: self._walk(value, (*path, key)) for key, value in data.items()}
        if type(data) is list:
            return [self._walk(value, (*path, index)) for index, value in enumerate(data)]
        return data

    def _reseal(self, sealed: dict[str, str], path: tuple[PathSegment, ...]) -> dict[str, str]:
        try:
            value, key = self._box.opened(sealed)
        except SecretError as exc:
            hint = "if it was sealed with a key not given here, add that key with --old-key-env VAR"
            raise SecretError(f"{format_path(path)}: {exc} ({hint})") from None
        if key == 0:
            self.current += 1
            return sealed
        self.moved += 1
        return self._box.seal(value)
