"""``statekit migrate``: upgrade stored sessions in place, one document at a time.

Each session is read as plain data through the public raw-document API, the
named modules are built by a strict load (which runs every migration at every
depth) and dumped again at the current version, and the document is written
back atomically, only if nobody changed it meanwhile. A session that fails is
reported and left byte for byte as it was; the others go on.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import attrs

from statekit.cli._batch import FAILED, Tally, Target, reason, targets_of, where
from statekit.cli._classes import named_classes
from statekit.cli._sealed import NEEDS_KEY, is_current, only_sealed
from statekit.cli._shared import INVALID, OK, Commands, UsageError, command
from statekit.cli._store import add_store_options, with_store
from statekit.cli._validate import under
from statekit._config import Document
from statekit._dump import dump_many
from statekit._load import build, secret_paths
from statekit._module import StateModule
from statekit._secrets import SecretBox, secrets_with
from statekit._versions import VERSION_KEY, versions_of
from statekit.errors import PathSegment, Problem, SecretError, StatekitError, StateLoadError, StateVersionError
from statekit.session import SessionBase


def add_migrate(commands: Commands) -> None:
    """Add ``statekit migrate`` to ``commands``."""
    sub = command(
        commands,
        "migrate",
        "Upgrade stored sessions to the current version of their classes, in place (docs/versions.md).",
        _run,
        "examples:\n  statekit migrate --dir sessions --module agent=myapp.agents:Agent --dry-run\n"
        "  statekit migrate --redis-url redis://localhost:6379/0 --user alice --module agent=myapp.agents:Agent\n\n"
        "Each session is loaded strictly (running the migrations) and written back atomically;\n"
        "a session that fails is reported and left as it was. Exit status 1 if any failed.",
    )
    sub.add_argument("session_ids", nargs="*", metavar="SESSION_ID", help="the sessions (default: all of the user's)")
    sub.add_argument(
        "--module", action="append", required=True, metavar="NAME=MODULE:CLASS", help="a module to migrate (repeatable)"
    )
    sub.add_argument("--dry-run", action="store_true", help="print a unified diff per session; write nothing")
    sub.add_argument(
        "--secret-key-env",
        metavar="VAR",
        help="the environment variable holding the sessions' secret_key (needed for encrypted secret fields)",
    )
    add_store_options(sub, all_users=True)


def _run(args: argparse.Namespace) -> int:
    classes = named_classes(args.module)
    for spec, cls in zip(args.module, classes.values(), strict=True):
        if not issubclass(cls, StateModule):
            raise UsageError(f"{spec}: sessions hold StateModule classes; {cls.__qualname__} is a value record")

    secrets = _secret_box(args.secret_key_env)

    async def work(store: SessionBase) -> int:
        todo = await targets_of(store, args)
        done = await migrate_sessions(
            store, todo, classes, dry_run=args.dry_run, out=sys.stdout, err=sys.stderr, secrets=secrets
        )
        return OK if done else INVALID

    return with_store(args, work)


def _secret_box(variable: str | None) -> SecretBox | None:
    if variable is None:
        return None
    key = os.environ.get(variable)
    if not key:
        raise UsageError(f"--secret-key-env {variable}: the environment variable is not set")
    try:
        return SecretBox(key)
    except SecretError as exc:
        raise UsageError(f"--secret-key-env {variable}: {exc}") from None


@attrs.frozen
class Outcome:
    """What became of one session.

    Attributes:
        source: Where it is stored (a file, a Redis key).
        status: ``"migrated"``, ``"unchanged"`` or ``"failed"``.
        detail: The versions moved (``agent 1 -> 3``) or why it failed.
    """

    source: str
    status: str
    detail: str


async def migrate_sessions(
    store: SessionBase,
    sessions: Sequence[Target],
    classes: Mapping[str, type[Any]],
    *,
    dry_run: bool,
    out: TextIO,
    err: TextIO,
    secrets: SecretBox | None = None,
) -> bool:
    """Migrate each session's named modules; print a diff instead of writing when ``dry_run``.

    Each session is reported as soon as it is done (a failure on ``err``, with
    why) and the others go on; the last line on ``out`` counts them.
    ``secrets`` opens the encrypted secret fields and seals them again (without
    it, a session holding one fails and is left as it was).

    Returns:
        Whether none failed.
    """
    tally = Tally({"migrated": "would migrate" if dry_run else "migrated", "unchanged": "unchanged", FAILED: FAILED}, out, err)
    for user_id, session_id in sessions:
        try:
            with secrets_with(secrets):
                outcome = await _migrate_one(store, session_id, user_id, classes, dry_run, out, keyless=secrets is None)
        except (StatekitError, OSError) as exc:
            outcome = Outcome(where(store, session_id, user_id), FAILED, reason(exc))
        tally.report(outcome.status, f"{tally.labels[outcome.status]} {outcome.source}: {outcome.detail}")
    return tally.summary()


async def _migrate_one(
    store: SessionBase,
    session_id: str,
    user_id: str | None,
    classes: Mapping[str, type[Any]],
    dry_run: bool,
    out: TextIO,
    *,
    keyless: bool,
) -> Outcome:
    stored = await store.aread_document(session_id, user_id)
    if stored is None:
        return Outcome(store.location(session_id, user_id), FAILED, "no such session")
    document = Document(stored.data, stored.source, stored.raw, store.codec)
    try:
        new = upgraded(document, classes)
    except StateLoadError as exc:
        if not keyless or not only_sealed(exc, stored.data, classes):
            raise
        if is_current(stored.data, classes):  # nothing to migrate: the key is not needed
            return Outcome(stored.source, "unchanged", "already at the current version")
        raise StateLoadError([attrs.evolve(p, message=NEEDS_KEY) for p in exc.problems]) from None
    if new == stored.data:
        return Outcome(stored.source, "unchanged", "already at the current version")
    moves = ", ".join(_move(name, stored.data[name], cls) for name, cls in classes.items())
    if dry_run:
        out.writelines(_diff(stored.source, stored.raw, store.codec.dumps(new)))
    else:
        await store.awrite_document(session_id, new, user_id, expected_revision=stored.revision)
    return Outcome(stored.source, "migrated", moves)


def upgraded(document: Document, classes: Mapping[str, type[Any]]) -> dict[str, Any]:
    """The document with each named module loaded strictly and saved at its current version.

    Raises:
        StateLoadError: Every problem of every module, positioned in the stored bytes.
        StateVersionError: A module's data is newer than its class, or a migration failed.
    """
    data: dict[str, Any] = dict(document.data)
    problems = []
    for name, cls in classes.items():
        if name not in data:
            problems.append(Problem((name,), "module is missing from the session"))
            continue
        try:
            data[name] = _current_state(cls, data[name], name)
        except StateLoadError as exc:
            problems.extend(under(name, p) for p in exc.problems)
    if problems:
        raise document.positioned(StateLoadError(problems))
    return data


def _current_state(cls: type[Any], state: Any, name: str) -> dict[str, Any]:
    """Load strictly into a new module (every migration runs), then dump it as a save would
    (an overriding ``state_dict()``'s result checked and copied, its tuples as lists)."""
    try:
        module: StateModule = build(cls, state, strict=True, fill_defaults=False)
    except StateVersionError as exc:
        raise exc.under((name,)) from exc.__cause__
    current: dict[str, Any] = dump_many({name: module})[name]
    for path in secret_paths(cls):
        _drop_unsaved_secret(module, state, current, path)
    return current


def _drop_unsaved_secret(module: StateModule, stored: Any, current: dict[str, Any], path: tuple[PathSegment, ...]) -> None:
    """Leave out a secret that the stored state did not hold (it was saved without a
    key) and that no migration set: sealing its default would make the next load
    replace the value the application set with that default."""
    owner: Any = module
    for key in path[:-1]:
        stored = stored.get(key) if isinstance(stored, Mapping) else None
        owner, current = getattr(owner, str(key), None), current.get(str(key))  # type: ignore[assignment]
        if not isinstance(owner, StateModule) or not isinstance(current, dict):
            return
    name = str(path[-1])
    if isinstance(stored, Mapping) and name in stored:
        return
    field = attrs.fields_dict(type(owner)).get(name)
    if field is not None and getattr(owner, name) == _default(field, owner):
        current.pop(name, None)


def _default(field: Any, owner: object) -> Any:
    default = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]  # attrs types Factory as a function
        return default.factory(owner) if default.takes_self else default.factory()
    return default


def _move(name: str, old: Any, cls: type[Any]) -> str:
    found = old.get(VERSION_KEY, 1) if isinstance(old, Mapping) else "?"
    return f"{name} {found} -> {versions_of(cls).current}"


def _diff(source: str, old: bytes, new: bytes) -> list[str]:
    lines = difflib.unified_diff(
        old.decode("utf-8").splitlines(keepends=True),
        new.decode("utf-8").splitlines(keepends=True),
        fromfile=source,
        tofile=f"{source} (migrated)",
    )
    return [line if line.endswith("\n") else f"{line}\n" for line in lines]
