"""statekit: typed, declarative state for AI agents, saved and loaded across runs."""

from statekit._fields import state_field
from statekit._convert import make_converter
from statekit._module import LoadResult, StateModule, stateful
from statekit.errors import (
    SessionNotFoundError,
    StatekitError,
    StateLoadError,
)

__all__ = [
    "LoadResult",
    "SessionNotFoundError",
    "StateLoadError",
    "StateModule",
    "StatekitError",
    "make_converter",
    "state_field",
    "stateful",
]
