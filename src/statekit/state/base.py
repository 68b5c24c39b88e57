"""What every walker of state knows of a statekit module: its class's marks, its plan, its state keys."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeGuard

import attrs

from statekit.state.foreign import PLAIN_TYPES, SupportsState, speaks_protocol
from statekit.state.plan import ClassPlan, make_plan
from statekit.errors import PathSegment

Path = tuple[PathSegment, ...]

REGISTERED = "__statekit_registered__"
"""The instance attribute holding what ``register_state`` registered."""
_EMPTY_PLAN = ClassPlan(fields=(), by_name={})


@attrs.frozen
class LoadResult:
    """What a non-strict load left alone (always empty after a strict one).

    Attributes:
        missing_keys: Declared state absent from the data (kept its value),
            as dotted paths such as ``memory.content``.
        unexpected_keys: Keys in the data that are not state (ignored),
            such as ``memory.content[3].extra``.
    """

    missing_keys: list[str] = attrs.field(factory=list)
    unexpected_keys: list[str] = attrs.field(factory=list)


class StateBase:
    """What the walkers see of :class:`~statekit.StateModule` (its only subclass): the class's plan,
    and whether statekit walks its state itself or its own ``state_dict``/``load_state_dict`` does
    (noted by ``StateModule.__init_subclass__`` when the class is made)."""

    __slots__ = ()
    __statekit_plan__: ClassVar[ClassPlan | None] = _EMPTY_PLAN
    __statekit_walks_dump__: ClassVar[bool] = True
    __statekit_walks_load__: ClassVar[bool] = True

    if TYPE_CHECKING:  # what StateModule defines, for the walkers' types

        def state_dict(self) -> dict[str, Any]: ...
        def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> LoadResult: ...


def plan_of(obj: object) -> ClassPlan:
    plan: ClassPlan | None = type(obj).__statekit_plan__  # type: ignore[attr-defined]
    return plan if plan is not None else late_plan(type(obj))


def class_plan(cls: type) -> ClassPlan:
    """The plan of a module class (made now if its annotations named classes defined after it)."""
    plan: ClassPlan | None = cls.__statekit_plan__  # type: ignore[attr-defined]
    return plan if plan is not None else late_plan(cls)


def late_plan(cls: type) -> ClassPlan:
    """Plan a class whose annotations named classes defined after it."""
    plan = make_plan(cls, cls.__statekit_converter__, StateBase)  # type: ignore[attr-defined]
    cls.__statekit_plan__ = plan  # type: ignore[attr-defined]
    return plan


def is_module(value: object) -> TypeGuard[SupportsState]:
    """Whether ``value`` is nested state: a statekit module, or a foreign one (:mod:`statekit.state.foreign`)."""
    return isinstance(value, StateBase) or (type(value) not in PLAIN_TYPES and speaks_protocol(value))  # no call for plain values


def walks_dump(module: object) -> TypeGuard[StateBase]:
    """Whether statekit walks the module's state itself (else its own ``state_dict()`` gives it)."""
    return isinstance(module, StateBase) and type(module).__statekit_walks_dump__


def walks_load(module: object) -> TypeGuard[StateBase]:
    """Whether statekit plans the module's load itself (else its own ``load_state_dict()`` runs at the commit)."""
    return isinstance(module, StateBase) and type(module).__statekit_walks_load__


def state_extras(obj: StateBase) -> dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]] | None]:
    """Undeclared state in AgentScope's order: attributes holding a module (in the
    order they were first set), then registered attributes (in the order they were registered)."""
    attrs_dict = getattr(obj, "__dict__", None)
    if not attrs_dict:
        return {}
    registry = attrs_dict.get(REGISTERED, {})
    out: dict[str, Any] = {name: None for name, value in attrs_dict.items() if name not in registry and is_module(value)}
    out.update(registry)  # registered attributes and slots (declared attrs fields)
    return out


def state_keys(module: SupportsState) -> dict[str, Any]:
    """Every state key of ``module`` with what loads it, in dump order; of a foreign
    module, the attributes holding modules (all statekit sees of it)."""
    if not isinstance(module, StateBase):
        return {name: None for name, value in getattr(module, "__dict__", {}).items() if is_module(value)}
    keys: dict[str, Any] = {}
    for plan in plan_of(module).fields:
        if plan.is_state or plan.module_type is not None or is_module(getattr(module, plan.name, None)):
            keys[plan.name] = plan
    keys.update(state_extras(module))
    return keys


def modules_below(roots: Iterable[SupportsState]) -> list[SupportsState]:
    """``roots`` and every module reachable from them through state, each once."""
    found: dict[int, SupportsState] = {}
    stack = list(roots)
    while stack:
        module = stack.pop()
        if id(module) not in found:
            found[id(module)] = module
            values = (getattr(module, name, None) for name in state_keys(module))
            stack.extend(value for value in values if is_module(value))
    return list(found.values())


def overrides_load(cls: object) -> bool:
    """Whether ``cls`` is a module class with its own ``load_state_dict()`` (built and loaded through it)."""
    return isinstance(cls, type) and issubclass(cls, StateBase) and not cls.__statekit_walks_load__
