"""Session backends: where named sets of state modules are saved and loaded.

- :class:`JSONSession`, :class:`YAMLSession`: one file per session under a folder.
- :class:`RedisSession`: one Redis key per session (needs ``statekit[redis]``;
  imported on first use, so the rest works without it).
- :class:`SQLiteSession`: one SQLite file for many processes (standard library
  ``sqlite3``; imported on first use too).
- :class:`SessionBase`: the base class of every backend, and of your own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from statekit.session._base import SessionBase
from statekit.session._ids import SessionKey
from statekit.session._delta_save import FORMAT_VERSION, META_KEY
from statekit.session._revisions import MISSING_REVISION, Expected, StoredDocument, revision_of
from statekit.session.json import JSONSession
from statekit.session.yaml import YAMLSession

if TYPE_CHECKING:
    from statekit.session.redis import RedisSession
    from statekit.session.sqlite import SQLiteSession

__all__ = [
    "FORMAT_VERSION",
    "META_KEY",
    "MISSING_REVISION",
    "Expected",
    "JSONSession",
    "RedisSession",
    "SQLiteSession",
    "SessionBase",
    "SessionKey",
    "StoredDocument",
    "YAMLSession",
    "revision_of",
]


def __getattr__(name: str) -> Any:
    if name == "RedisSession":
        from statekit.session.redis import RedisSession  # noqa: PLC0415 - the optional extra

        return RedisSession
    if name == "SQLiteSession":
        from statekit.session.sqlite import SQLiteSession  # noqa: PLC0415 - sqlite3 loaded only when used

        return SQLiteSession
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
