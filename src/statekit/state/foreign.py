"""Foreign state modules: objects that offer AgentScope's StateModule protocol without subclassing statekit's.

AgentScope 1.x's ``agentscope.module.StateModule`` (its agents, memories,
toolkits, plan notebooks) and any class written in its style has a
``state_dict() -> dict`` and a ``load_state_dict(state, strict=...)``. statekit
takes such an object wherever it takes a module (a session's keyword argument,
an attribute of a statekit module), without importing AgentScope: it is dumped
and loaded through those two methods, as a statekit module that overrides them
is (:mod:`statekit.state.overrides`: its data checked as JSON data on save, loaded
at the commit, restored if the load fails).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeGuard


class SupportsState(Protocol):
    """What statekit takes as a module: a :class:`~statekit.StateModule`, or any
    object with AgentScope's two methods (``agentscope.module.StateModule``'s)."""

    def state_dict(self) -> Any:
        """The module's state, JSON data (AgentScope's json rule: see docs/agentscope.md)."""

    def load_state_dict(self, state_dict: dict[str, Any], /, strict: bool = True) -> object:
        """Load what :meth:`state_dict` returned."""


def speaks_protocol(value: object) -> TypeGuard[SupportsState]:
    """Whether ``value`` is an instance whose class has ``state_dict`` and ``load_state_dict`` methods.

    A class itself does not count (``agent=ReActAgent`` is a mistake, not a module).
    """
    cls = type(value)
    return cls not in PLAIN_TYPES and cls is not type and protocol_class(cls) and not isinstance(value, type)


PLAIN_TYPES = frozenset((str, int, float, bool, type(None), list, dict, tuple))
"""What most attributes (and a session method's options) hold: never a module (tested first, for speed)."""


def protocol_class(cls: type) -> bool:
    """Whether instances of ``cls`` offer the protocol (its class has both methods)."""
    return callable(getattr(cls, "state_dict", None)) and callable(getattr(cls, "load_state_dict", None))


__all__ = ["PLAIN_TYPES", "SupportsState", "protocol_class", "speaks_protocol"]
