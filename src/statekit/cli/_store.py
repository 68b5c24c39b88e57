"""Where a command's sessions are: the store options, opening the store, and reading one stored session."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import attrs

from statekit._config import Document
from statekit.cli._shared import UsageError
from statekit.errors import SessionError, SessionNotFoundError, StatekitError
from statekit.session import JSONSession, SessionBase, YAMLSession


def add_store_options(sub: argparse.ArgumentParser, *, all_users: bool = False) -> None:
    """The options that say where the sessions are (``--dir``, ``--redis-url``, ...) and whose (``--user``)."""
    where = sub.add_argument_group("where the sessions are (a folder, or Redis)")
    where.add_argument("--dir", metavar="DIR", help="a folder of session files (JSONSession/YAMLSession)")
    where.add_argument("--yaml", action="store_true", help="the folder holds YAML sessions (default: JSON)")
    where.add_argument(
        "--redis-url", metavar="URL", help="a Redis server (redis://localhost:6379/0) or cluster (redis+cluster://host:port)"
    )
    where.add_argument("--host", help="Redis host (default: localhost when --port is given)")
    where.add_argument("--port", type=int, help="Redis port (default: 6379 when --host is given)")
    where.add_argument("--db", type=int, default=0, help="Redis database index (default: 0)")
    where.add_argument("--key-prefix", default="", metavar="PREFIX", help="the key_prefix the application gives RedisSession")
    sub.add_argument(
        "--user", metavar="USER_ID", help="the sessions' user_id (default: none for files, default_user for Redis)"
    )
    if all_users:
        sub.add_argument("--all-users", action="store_true", help="every session of every user (not with --user or SESSION_IDs)")


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


def store_options(args: argparse.Namespace) -> StoreOptions:
    """The store the options of :func:`add_store_options` name.

    Raises:
        UsageError: Both a folder and a Redis server were named.
    """
    url = args.redis_url
    if url is None and (args.host is not None or args.port is not None):
        url = f"redis://{args.host or 'localhost'}:{args.port or 6379}/{args.db}"
    if args.dir is not None and url is not None:
        raise UsageError("give either --dir or a Redis server, not both")
    return StoreOptions(folder=args.dir, yaml=args.yaml, redis_url=url, key_prefix=args.key_prefix)


def with_store(args: argparse.Namespace, work: Callable[[SessionBase], Coroutine[Any, Any, int]]) -> int:
    """Run ``work`` on the store the options name, closing it after; its exit status."""
    store = open_store(store_options(args))

    async def run() -> int:
        try:
            return await work(store)
        finally:
            await store.aclose()

    return asyncio.run(run())


def open_store(options: StoreOptions) -> SessionBase:
    """Open the session store the options name.

    Raises:
        UsageError: Neither a folder nor Redis was named, or the Redis URL is bad.
        StatekitError: The folder is not there (rather than listing nothing).
        MissingExtraError: Redis was named but the redis package is missing.
    """
    if options.folder is not None:
        if not Path(options.folder).is_dir():
            raise StatekitError(f"--dir {options.folder!r}: there is no such folder")
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
