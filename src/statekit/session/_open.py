"""One URL to open any session store: a folder, ``file://``, Redis, SQLite or PostgreSQL (``statekit.session.open``).

The optional backends are imported only when their URL is opened, so a
folder or Redis works without the SQL modules or their drivers. No message
quotes the URL: a store URL may carry a password.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import urllib.parse
from pathlib import Path
from typing import Any, Final

from statekit.errors import SessionError
from statekit.session._base import SessionBase
from statekit.session.json import JSONSession
from statekit.session.yaml import YAMLSession

FILE_SCHEMES: Final = ("file",)
REDIS_SCHEMES: Final = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")
"""The URL schemes :func:`open_session` opens as a :class:`~statekit.session.RedisSession` (lower-case, as :func:`scheme_of` gives)."""
SQLITE_SCHEMES: Final = ("sqlite",)
POSTGRES_SCHEMES: Final = ("postgresql", "postgres")

ACCEPTED: Final = (
    "a folder path, file:///abs/dir (?format=yaml for YAML files), redis://, rediss://, unix://, "
    "redis+cluster://, sqlite:///relative.db, sqlite:////abs.db, postgresql:// or postgres://"
)
"""What :func:`open_session` accepts, as its errors say it."""

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")
"""A URL's scheme: two characters or more (``C:`` is a drive, not a scheme)."""

_FORMATS: Final[dict[str, type[JSONSession] | type[YAMLSession]]] = {"json": JSONSession, "yaml": YAMLSession}


def open_session(url: str | os.PathLike[str], **options: Any) -> SessionBase:
    """Open the session store a URL (or a folder path) names.

    ============================================  =====================================
    ``sessions``, ``/abs/dir``, a ``Path``        :class:`JSONSession` on that folder
    ``file:///abs/dir``                           :class:`JSONSession`
    ``file:///abs/dir?format=yaml``               :class:`YAMLSession`
    ``redis://``, ``rediss://``, ``unix://``,     ``RedisSession.from_url(url, **options)``
    ``redis+cluster://``, ``rediss+cluster://``
    ``sqlite:///relative.db``, ``sqlite:////abs.db``  ``SQLiteSession(path, **options)``
    ``postgresql://``, ``postgres://``            ``PostgresSession.from_url(url, **options)``
    ============================================  =====================================

    A path is a URL when it starts with a scheme of two characters or more and
    a colon (``name:``); write ``./name:x`` for a folder whose name looks like one.

    Args:
        url: The store.
        **options: Passed to the backend (``secret_key``, ``omit_secrets``,
            ``key_prefix``, ``timeout``...).

    Raises:
        SessionError: The URL is not one of these, or names no folder or file,
            or an option is not one the backend takes. The message never
            quotes the URL, which may hold a password.
        MissingExtraError: The backend needs an extra that is not installed.
    """
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str):
        raise SessionError(f"a store URL is a string or a path, got {type(url).__name__}; accepted: {ACCEPTED}")
    if not url:
        raise SessionError(f"the store URL is empty; accepted: {ACCEPTED}")
    scheme = scheme_of(url)
    if scheme is None:
        return _construct(JSONSession, url, options)
    if scheme in FILE_SCHEMES:
        folder, kind = _file_url(url)
        return _construct(kind, folder, options)
    if scheme in REDIS_SCHEMES:
        from statekit.session.redis import RedisSession  # noqa: PLC0415 - the optional extra

        session: SessionBase = RedisSession.from_url(url, **options)
        return session
    if scheme in SQLITE_SCHEMES:
        path = _sqlite_path(url)
        return _construct(_backend("statekit.session.sqlite", scheme).SQLiteSession, path, options)
    if scheme in POSTGRES_SCHEMES:
        backend = _backend("statekit.session.postgres", scheme)
        opened: SessionBase = backend.PostgresSession.from_url(url, **options)
        return opened
    raise SessionError(f"a store URL of scheme {scheme!r} is not one statekit opens; accepted: {ACCEPTED}")


def scheme_of(url: str) -> str | None:
    """The scheme of a store URL, lower-cased; ``None`` for a folder path."""
    found = _SCHEME.match(url)
    return None if found is None else found.group(1).lower()


def local_path(url: str | os.PathLike[str]) -> Path | None:
    """The folder or database file a store URL names on this machine (``None``: a server, or not a store URL)."""
    url = os.fspath(url)
    scheme = scheme_of(url)
    try:
        if scheme is None:
            return Path(url)
        if scheme in FILE_SCHEMES:
            return Path(_file_url(url)[0])
        if scheme in SQLITE_SCHEMES:
            return Path(_sqlite_path(url))
    except SessionError:
        return None
    return None


def _file_url(url: str) -> tuple[str, type[JSONSession] | type[YAMLSession]]:
    """The folder of a ``file:`` URL and the session class its ``format`` asks for."""
    parts = urllib.parse.urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise SessionError("a file: store URL names a folder on this machine, with no host: file:///abs/dir")
    if parts.fragment or url.endswith("#"):
        raise SessionError("a file: store URL has no #fragment (write %23 for a # in a folder name)")
    folder = urllib.parse.unquote(parts.path)
    if not folder.startswith("/"):
        raise SessionError("a file: store URL names an absolute folder: file:///abs/dir")
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if any(name != "format" for name, _ in query) or len(query) > 1:
        raise SessionError("a file: store URL takes one query option, format=json or format=yaml")
    kind = _FORMATS.get(query[0][1].lower() if query else "json")
    if kind is None:
        raise SessionError("a file: store URL's format is json or yaml: file:///abs/dir?format=yaml")
    return folder, kind


def _sqlite_path(url: str) -> str:
    """The database file of a ``sqlite:`` URL: ``sqlite:///relative.db``, ``sqlite:////abs.db``."""
    parts = urllib.parse.urlsplit(url)
    if not url[len(parts.scheme) :].startswith(":///") or parts.netloc:
        raise SessionError("a sqlite: store URL is sqlite:///relative.db or sqlite:////abs.db (three or four slashes, no host)")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise SessionError(
            "a sqlite: store URL takes no ?query or #fragment: give options in Python "
            "(open(url, table=...)), and write %3F and %23 for ? and # in a file name"
        )
    path = urllib.parse.unquote(parts.path[1:])
    if not path or path.endswith("/"):
        raise SessionError("a sqlite: store URL names a database file: sqlite:///relative.db or sqlite:////abs.db")
    return path


def _backend(module: str, scheme: str) -> Any:
    """The backend module an SQL URL needs, imported now."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        raise SessionError(f"{scheme}: stores need the module {module}, which this installation of statekit lacks") from None


def _construct(cls: Any, where: str, options: dict[str, Any]) -> SessionBase:
    """``cls(where, **options)``, an option it does not take told as a SessionError."""
    try:
        inspect.signature(cls).bind(where, **options)
    except TypeError:
        kinds = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        parameters = list(inspect.signature(cls).parameters.values())[1:]  # the first is the folder or file
        takes = [parameter.name for parameter in parameters if parameter.kind not in kinds]
        unknown = sorted(name for name in options if name not in takes)
        raise SessionError(
            f"{cls.__name__} takes no option {', '.join(map(repr, unknown))} (it takes: {', '.join(takes)})"
        ) from None
    session: SessionBase = cls(where, **options)
    return session
