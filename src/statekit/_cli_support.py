"""What the ``statekit`` command needs besides argument parsing.

Importing ``package.module:Class`` specs, opening the session stores (a folder
of JSON or YAML files, or Redis) and reading a stored session's raw document
through their public API only.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs

from statekit._config import Document, codec_for, read_document
from statekit._hints import MISSING
from statekit._load import build, overrides_load, secret_paths
from statekit._secrets import is_sealed
from statekit._schema import require_stateful_class
from statekit.codecs import JSON, Codec
from statekit.errors import (
    DocumentError,
    PathSegment,
    Problem,
    SessionError,
    SessionNotFoundError,
    StatekitError,
    StateLoadError,
    StateVersionError,
)
from statekit.session import META_KEY, JSONSession, SessionBase, YAMLSession
from statekit.session._appends import merge
from statekit.session._loading import misplaced
from statekit.session._companion import companion, split
from statekit.session._companion import read_session as read_stored
from statekit.session._delta_save import check_token, is_joined, positioned
from statekit.session.document import as_session, check_meta, token_of, without_token

class UsageError(StatekitError):
    """The command line asks for something impossible (exit status 2)."""


def load_class(spec: str) -> type[Any]:
    """Import the class named by ``package.module:Class`` or ``path/file.py:Class``.

    The current directory is importable, as with ``python -m``.

    Raises:
        UsageError: The spec is malformed, the module cannot be imported, it has
            no such attribute, or the attribute is not a ``@stateful`` class.
    """
    module_name, sep, qualname = spec.partition(":")
    if not sep or not module_name or not qualname:
        raise UsageError(f"{spec!r} is not a class spec: write package.module:Class (or file.py:Class)")
    target: Any = _import(module_name)
    for part in qualname.split("."):
        if not hasattr(target, part):
            raise UsageError(f"{module_name} has no attribute {qualname!r}")
        target = getattr(target, part)
    if overrides_load(target):
        return target  # type: ignore[no-any-return]  # built with no arguments, loaded through its override
    try:
        return require_stateful_class(target, module_hint="the command needs a @stateful class")
    except StatekitError as exc:
        raise UsageError(f"{spec}: {exc}") from None


def _import(name: str) -> ModuleType:
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if name.endswith(".py"):
            return _import_file(Path(name))
        return importlib.import_module(name)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of user code is reported, not raised
        raise UsageError(f"cannot import {name!r}: {type(exc).__name__}: {exc}") from None


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise UsageError(f"cannot import {str(path)!r}: no such file")
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # as ``python file.py`` does: the file imports its neighbours
    name = f"_statekit_cli_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and attrs look their module up
    spec.loader.exec_module(module)
    return module


def file_codec(path: str) -> Codec:
    """The codec of a file named on the command line.

    Raises:
        UsageError: The suffix is not one statekit reads.
    """
    try:
        return codec_for(path)
    except DocumentError as exc:
        raise UsageError(str(exc)) from None


def modules_of(document: Mapping[str, Any]) -> dict[str, Any]:
    """A session document without statekit's own metadata key."""
    return {name: state for name, state in document.items() if name != META_KEY}


def check_config(document: Document, cls: type[Any], *, strict: bool) -> None:
    """Build ``cls`` from a config document, as ``from_config`` would.

    Raises:
        UsageError: The document is a session (use :func:`check_session`).
        StateLoadError: Every problem, positioned.
        StateVersionError: The data is newer than the class, or a migration
            failed (naming the file).
    """
    if isinstance(document.data, Mapping) and META_KEY in document.data:
        raise UsageError(
            f"{document.source} is a session file (it has {META_KEY!r}): "
            "check its modules with --module NAME=MODULE:CLASS"
        )
    try:
        build(cls, document.data, strict=strict)
    except StateLoadError as exc:
        raise document.positioned(exc) from None
    except StateVersionError as exc:  # named by its file, as a load from_config() names it
        raise exc.located(document.source) from exc.__cause__




def check_session(document: Document, classes: Mapping[str, type[Any]], *, strict: bool) -> None:
    """Build every named module of a session document, reporting every problem.

    Raises:
        DocumentError: The document is not a mapping of module names to states.
        StateLoadError: Every problem, each path starting at its module name.
        StateVersionError: A module's data is newer than its class, or a
            migration failed (naming the file and the module).
    """
    data = as_session(document.data, document.source or "the session")
    if META_KEY in data:
        check_meta(data[META_KEY], document.source or "the session")
    problems: list[Problem] = []
    for name, cls in classes.items():
        if name not in data:
            problems.append(Problem((name,), "module is missing from the session"))
            continue
        secret = secret_paths(cls)  # encrypted (not checkable here) or saved without a key: left out either way
        try:  # as a session load builds it: a module's keys are required when strict
            build(cls, without_sealed(data[name], secret), strict=strict, fill_defaults=False)
        except StateLoadError as exc:
            problems.extend(_under(name, p) for p in exc.problems if not (p.path in secret and p.message == MISSING))
        except StateVersionError as exc:  # named by its file and module, as a session load names it
            raise exc.under((name,)).located(document.source) from exc.__cause__
    if problems:
        raise document.positioned(StateLoadError(problems))


def without_sealed(state: Any, secret: set[tuple[PathSegment, ...]], path: tuple[PathSegment, ...] = ()) -> Any:
    """``state`` without the encrypted values of its secret fields (found elsewhere, they are problems)."""
    if type(state) is not dict:
        return state
    kept = {}
    for key, value in state.items():
        here = (*path, key)
        if here in secret and is_sealed(value):
            continue
        kept[key] = without_sealed(value, secret, here)
    return kept


def _under(name: str, problem: Problem) -> Problem:
    path: tuple[PathSegment, ...] = (name, *problem.path)
    return attrs.evolve(problem, path=path)


@attrs.frozen
class StoreOptions:
    """Where sessions are: a folder of files, or a Redis server.

    Attributes:
        folder: The folder of a file store (``None`` for Redis).
        yaml: The folder holds YAML sessions (else JSON).
        redis_url: The Redis server, as a ``redis://`` URL.
        key_prefix: The Redis key prefix the application uses.
    """

    folder: str | None
    yaml: bool
    redis_url: str | None
    key_prefix: str = ""


def open_store(options: StoreOptions) -> SessionBase:
    """Open the session store the options name.

    Raises:
        UsageError: Neither a folder nor Redis was named, or the Redis URL is bad.
        MissingExtraError: Redis was named but the redis package is missing.
    """
    if options.folder is not None:
        return YAMLSession(options.folder) if options.yaml else JSONSession(options.folder)
    if options.redis_url is None:
        raise UsageError("say where the sessions are: --dir DIR, or --redis-url URL / --host / --port")
    from statekit.session.redis import RedisSession

    try:
        store = RedisSession.from_url(options.redis_url, key_prefix=options.key_prefix)
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    store._keep_ttl = True  # noqa: SLF001 - compact and migrate rewrite keys the app may let expire
    return store


async def close_store(store: SessionBase) -> None:
    """Close a store (and the Redis client it opened)."""
    await store.aclose()


async def read_session(store: SessionBase, session_id: str, user_id: str | None) -> Document:
    """Read a stored session's document, whatever modules it holds.

    Raises:
        SessionNotFoundError: There is no such session.
        DocumentError: The stored bytes are not a session document.
        BackendUnavailableError: Redis cannot be reached.
    """
    stored = await store.aread_document(session_id, user_id)
    if stored is None:
        user = store.key(session_id, user_id).user_id
        where = store.location(session_id, user_id)
        raise SessionNotFoundError(f"no session {session_id!r} of user {user!r} in {where}")
    return Document(stored.data, stored.source, stored.raw, store.codec)


def read_file(name: str) -> Document:
    """A file named on the command line; a JSON session file reads merged with its appended items.

    The document keeps its metadata as stored, and the bytes of the file itself
    (not of the merged data), so that problems are placed in the file on disk.

    Raises:
        DocumentError: As :func:`~statekit._config.read_document`, or a
            companion that belongs to another document.
    """
    document = read_document(name)
    if not name.endswith(JSON.suffix) or not isinstance(document.data, dict):
        return document
    path = Path(name)
    if path.is_symlink():  # followed, as read_document() did: the rule against links is a session folder's
        path = path.resolve()
    raw = read_stored(path)
    if raw is None or not is_joined(raw):
        return document
    data = dict(document.data)
    _, log, token = split(raw)
    log_source = str(companion(path))
    if not log and token_of(data) is not None:  # a companion beside a document whose token is not at its top
        raise DocumentError(misplaced(data, deltas=True), source=name)
    check_token(data, token, name, log_source)
    merge(data, log, token or "", log_source)
    place = functools.partial(positioned, raw=raw, codec=JSON, source=name, log_source=log_source)
    return Document(data, name, raw, JSON, place)  # problems placed as a session load places them


def read_whole(name: str) -> Any:
    """The data of a file to write elsewhere as one whole document.

    A JSON session loses the token that ties it to its companion of appended
    items (they are merged in): a copy has no companion, and a YAML session
    refuses the token.

    Raises:
        DocumentError: As :func:`read_file`.
    """
    data = read_file(name).data
    return without_token(data) if isinstance(data, dict) else data
