"""Session backends: where named sets of state modules are saved and loaded.

- :class:`JSONSession`, :class:`YAMLSession`: one file per session under a folder.
- :class:`RedisSession`: one Redis key per session (needs ``statekit[redis]``;
  imported on first use, so the rest works without it).
- :class:`PostgresSession`: one row per session in a PostgreSQL table (needs
  ``statekit[postgres]``; imported on first use too).
- :class:`SQLiteSession`: one SQLite file for many processes (standard library
  ``sqlite3``; imported on first use too).
- :class:`SessionBase`: the base class of every backend, and of your own.
- :func:`open`: any of them from a URL (``redis://...``, ``file:///dir``, ``sqlite:///x.db``...);
  :func:`scheme_of`, :func:`local_path` and :data:`REDIS_SCHEMES` read such a URL.
- :class:`Lease`: a session's lease, from ``session.lease()`` (docs/leases.md); :class:`LeaseGrant`,
  :class:`LeaseBusy`, :func:`fence_verdict` and :func:`check_fence` for backends that keep leases.
- :class:`Revision`: one revision of a session, as ``session.history()`` lists it (docs/history.md);
  :class:`Archive` for backends that keep history.
- :func:`backoff`: the pause before a retry after a conflict (jittered, capped).
- :mod:`statekit.session.files`: session files read by path, for tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from statekit.session._base import SessionBase
from statekit.session._fence import FENCE_HELD, FENCE_LOST, FENCE_OK, LeaseBusy, LeaseGrant, check_fence, fence_verdict
from statekit.session._ids import SessionKey
from statekit.session._archive import Archive
from statekit.session._history_records import Revision
from statekit.session._lease import Lease
from statekit.session._revisions import MISSING_REVISION, Expected, StoredDocument, backoff, revision_of
from statekit.session.document import FORMAT_VERSION, META_KEY
from statekit.session.json import JSONSession
from statekit.session.yaml import YAMLSession
from statekit.session._open import REDIS_SCHEMES, local_path, open_session, scheme_of

open = open_session  # statekit.session.open(url), as the issue names it; statekit.open_session at the top

if TYPE_CHECKING:
    from statekit.session.postgres import PostgresSession
    from statekit.session.redis import RedisSession
    from statekit.session.sqlite import SQLiteSession

__all__ = [
    "FENCE_HELD",
    "FENCE_LOST",
    "FENCE_OK",
    "FORMAT_VERSION",
    "META_KEY",
    "MISSING_REVISION",
    "REDIS_SCHEMES",
    "Archive",
    "Expected",
    "JSONSession",
    "Lease",
    "LeaseBusy",
    "LeaseGrant",
    "PostgresSession",
    "RedisSession",
    "Revision",
    "SQLiteSession",
    "SessionBase",
    "SessionKey",
    "StoredDocument",
    "YAMLSession",
    "backoff",
    "check_fence",
    "fence_verdict",
    "local_path",
    "open",
    "open_session",
    "revision_of",
    "scheme_of",
]


def __getattr__(name: str) -> Any:
    if name == "RedisSession":
        from statekit.session.redis import RedisSession  # noqa: PLC0415 - the optional extra

        return RedisSession
    if name == "PostgresSession":
        from statekit.session.postgres import PostgresSession  # noqa: PLC0415 - the optional extra

        return PostgresSession
    if name == "SQLiteSession":
        from statekit.session.sqlite import SQLiteSession  # noqa: PLC0415 - sqlite3 loaded only when used

        return SQLiteSession
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
