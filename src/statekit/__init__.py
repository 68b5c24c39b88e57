"""statekit: typed, declarative state for AI agents, saved and loaded across runs."""

from __future__ import annotations

import logging
from importlib import metadata
from typing import TYPE_CHECKING, Any

from statekit.state.config import from_config, seed
from statekit.values.converter import make_converter
from statekit.state.foreign import SupportsState
from statekit.values.fields import state_field
from statekit.state.module import LoadResult, StateModule, stateful
from statekit.values.secrets import generate_secret_key
from statekit.values.versions import Migration
from statekit.state.schema import json_schema, session_schema
from statekit.errors import (
    SecretError,
    BackendAuthError,
    BackendUnavailableError,
    ConflictError,
    LeaseError,
    LeaseHeldError,
    LeaseLostError,
    DocumentError,
    InvalidSessionIdError,
    MissingExtraError,
    Problem,
    SessionError,
    SessionNotFoundError,
    StateAttributeError,
    StateDefinitionError,
    StateDumpError,
    StatekitError,
    StateLoadError,
    StateModuleNameError,
    StateVersionError,
    WriteOutcomeUnknownError,
)
from statekit.session import (
    MISSING_REVISION,
    JSONSession,
    Lease,
    Revision,
    SessionBase,
    StoredDocument,
    YAMLSession,
    open_session,
)

# A library's logger is silent until the application configures logging (no "last resort" to stderr).
logging.getLogger("statekit").addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from statekit.session.postgres import PostgresSession
    from statekit.session.redis import RedisSession
    from statekit.session.sqlite import SQLiteSession

try:
    __version__: str = metadata.version("statekit")
except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "__version__",
    "SecretError",
    "generate_secret_key",
    "MISSING_REVISION",
    "BackendAuthError",
    "BackendUnavailableError",
    "ConflictError",
    "DocumentError",
    "InvalidSessionIdError",
    "JSONSession",
    "Lease",
    "LeaseError",
    "LeaseHeldError",
    "LeaseLostError",
    "LoadResult",
    "Migration",
    "MissingExtraError",
    "PostgresSession",
    "Problem",
    "RedisSession",
    "Revision",
    "SQLiteSession",
    "SessionBase",
    "SessionError",
    "SessionNotFoundError",
    "StateAttributeError",
    "StateDefinitionError",
    "StateDumpError",
    "StateLoadError",
    "StateModule",
    "StateModuleNameError",
    "StateVersionError",
    "StoredDocument",
    "SupportsState",
    "WriteOutcomeUnknownError",
    "StatekitError",
    "YAMLSession",
    "from_config",
    "json_schema",
    "make_converter",
    "open_session",
    "seed",
    "session_schema",
    "state_field",
    "stateful",
]


def __getattr__(name: str) -> Any:
    """Import ``RedisSession``, ``PostgresSession`` and ``SQLiteSession`` on first use: the first two need
    the ``redis`` / ``postgres`` extras, and ``import statekit`` does not load sqlite3."""
    if name == "RedisSession":
        from statekit.session.redis import RedisSession

        return RedisSession
    if name == "PostgresSession":
        from statekit.session.postgres import PostgresSession

        return PostgresSession
    if name == "SQLiteSession":
        from statekit.session.sqlite import SQLiteSession

        return SQLiteSession
    raise AttributeError(f"module 'statekit' has no attribute {name!r}")
