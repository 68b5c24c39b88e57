"""statekit: typed, declarative state for AI agents, saved and loaded across runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from statekit._convert import make_converter
from statekit._fields import state_field
from statekit._module import LoadResult, StateModule, stateful
from statekit.errors import (
    SessionNotFoundError,
    StatekitError,
    StateLoadError,
)
from statekit.session import JSONSession, SessionBase, YAMLSession

if TYPE_CHECKING:
    from statekit.session.redis import RedisSession

__all__ = [
    "JSONSession",
    "LoadResult",
    "RedisSession",
    "SessionBase",
    "SessionNotFoundError",
    "StateLoadError",
    "StateModule",
    "StatekitError",
    "YAMLSession",
    "make_converter",
    "state_field",
    "stateful",
]


def __getattr__(name: str) -> Any:
    """Import ``RedisSession`` on first use: it needs the ``statekit[redis]`` extra."""
    if name == "RedisSession":
        from statekit.session.redis import RedisSession

        return RedisSession
    raise AttributeError(f"module 'statekit' has no attribute {name!r}")
