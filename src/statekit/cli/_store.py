"""Where a command's sessions are: the store options, opening the store, and reading one stored session."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import attrs

from statekit.state.config import Document
from statekit.cli._shared import UsageError
from statekit.errors import SessionError, SessionNotFoundError, StatekitError
from statekit.session import REDIS_SCHEMES, JSONSession, SessionBase, YAMLSession, local_path, open_session, scheme_of


def add_store_options(sub: argparse.ArgumentParser, *, all_users: bool = False) -> None:
    """The options that say where the sessions are (``--store``, ``--dir``, ``--redis-url``, ...) and whose (``--user``)."""
    where = sub.add_argument_group("where the sessions are (a store URL, a folder, or Redis)")
    where.add_argument(
        "--store",
        metavar="URL",
        help="any store, as statekit.session.open takes it: a folder, file:///abs/dir[?format=yaml], "
        "redis://..., sqlite:///relative.db, postgresql://... (docs/cli.md)",
    )
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
    """Where sessions are: a folder of files, a Redis server, or any store URL.

    Attributes:
        folder: The folder of a file store (``None`` for the others).
        yaml: The folder holds YAML sessions (else JSON).
        redis_url: The Redis server, as a ``redis://`` URL.
        key_prefix: The Redis key prefix the application uses.
        url: Any other store, as a URL (``--store``): ``file://``, Redis, SQLite, PostgreSQL.
        option: The option that named the folder (for its errors).
    """

    folder: str | None
    yaml: bool
    redis_url: str | None
    key_prefix: str = ""
    url: str | None = None
    option: str = "--dir"

    @property
    def named(self) -> bool:
        """Whether the options name a store at all."""
        return self.folder is not None or self.redis_url is not None or self.url is not None


def store_options(args: argparse.Namespace) -> StoreOptions:
    """The store the options of :func:`add_store_options` name.

    Raises:
        UsageError: Two stores were named (a folder, a Redis server, ``--store``),
            or ``--yaml`` with a store URL that is not a folder.
    """
    url = args.redis_url
    if url is None and (args.host is not None or args.port is not None):
        url = f"redis://{args.host or 'localhost'}:{args.port or 6379}/{args.db}"
    if args.store is not None:
        if args.dir is not None or url is not None:
            raise UsageError("give one store: --store URL, --dir DIR or a Redis server (--redis-url, --host, --port)")
        if scheme_of(args.store) is None:  # a folder path: --dir's checks and --yaml apply
            return StoreOptions(folder=args.store, yaml=args.yaml, redis_url=None, key_prefix=args.key_prefix, option="--store")
        if args.yaml:
            raise UsageError("--yaml goes with a folder; a file: URL says it as file:///abs/dir?format=yaml")
        return StoreOptions(folder=None, yaml=False, redis_url=None, key_prefix=args.key_prefix, url=args.store)
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
        UsageError: No store was named, or its URL is bad.
        StatekitError: The folder (or database file) is not there (rather than listing nothing).
        MissingExtraError: Redis (or another optional backend) was named but its package is missing.
    """
    if options.folder is not None:
        if not Path(options.folder).is_dir():
            raise StatekitError(f"{options.option} {options.folder!r}: there is no such folder")
        return YAMLSession(options.folder) if options.yaml else JSONSession(options.folder)
    if options.url is not None:
        return open_url(options.url, option="--store", must_exist=True, key_prefix=options.key_prefix)
    if options.redis_url is None:
        raise UsageError("say where the sessions are: --dir DIR, or --redis-url URL / --host / --port")
    from statekit.session.redis import RedisSession

    try:
        return RedisSession.from_url(options.redis_url, key_prefix=options.key_prefix, keep_ttl=True)
    except SessionError as exc:
        raise UsageError(str(exc)) from None


def open_url(url: str, *, option: str, must_exist: bool, key_prefix: str = "") -> SessionBase:
    """Open the store a URL given as ``option`` names (see :func:`statekit.session.open`).

    Args:
        url: The store.
        option: How the command line named it (``--store``, ``SRC_URL``), for errors.
        must_exist: Refuse a folder or database file that is not there (a
            store to read), rather than opening an empty one.
        key_prefix: The key prefix of a Redis store (``""``: none).

    Raises:
        UsageError: The URL is not one the backends take, or a key prefix is
            given for a store that is not Redis.
        StatekitError: ``must_exist`` and the folder or file is not there.
    """
    redis = scheme_of(url) in REDIS_SCHEMES
    if key_prefix and not redis:
        raise UsageError(f"--key-prefix goes with a Redis store, not with this {option}")
    path = local_path(url)
    if must_exist and path is not None and not path.exists():
        what = "folder" if scheme_of(url) in (None, "file") else "database file"
        raise StatekitError(f"{option} {str(path)!r}: there is no such {what}")
    options: dict[str, Any] = {"key_prefix": key_prefix} if key_prefix else {}
    if redis:
        options["keep_ttl"] = True  # compact and migrate rewrite keys the app may let expire
    try:
        return open_session(url, **options)
    except SessionError as exc:
        raise UsageError(f"{option}: {exc}") from None


async def read_session(store: SessionBase, session_id: str, user_id: str | None, *, at: str | None = None) -> Document:
    """Read a stored session's document, whatever modules it holds (its head, or the revision ``at``).

    Raises:
        SessionNotFoundError: There is no such session (or revision).
        DocumentError: The stored bytes are not a session document.
        BackendUnavailableError: Redis cannot be reached.
    """
    stored = await store.aread_document(session_id, user_id, at=at)
    if stored is None:
        raise no_session(store, session_id, user_id)
    return Document(stored.data, stored.source, stored.raw, store.codec)


def no_session(store: SessionBase, session_id: str, user_id: str | None) -> SessionNotFoundError:
    """The error for a session the store does not hold, naming its user and where it was looked for."""
    user = store.key(session_id, user_id).user_id
    where = store.location(session_id, user_id)
    return SessionNotFoundError(f"no session {session_id!r} of user {user!r} in {where}")
