"""Where a module class keeps secret fields: their paths, and whether a new instance holds any."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from statekit.errors import PathSegment
from statekit.state.base import StateBase, class_plan, plan_of

Path = tuple[PathSegment, ...]


def secret_paths(cls: type, path: Path = (), seen: frozenset[type] = frozenset()) -> set[Path]:
    """The paths of the secret fields of module class ``cls`` and of the module classes
    its module fields name (a document may leave any of them out)."""
    if cls in seen or not issubclass(cls, StateBase):  # StateBase itself: an empty plan
        return set()
    found: set[Path] = set()
    for plan in class_plan(cls).fields:
        if plan.secret:
            found.add((*path, plan.name))
        elif plan.module_type is not None:
            found |= secret_paths(plan.module_type, (*path, plan.name), seen | {cls})
    return found


def holds_secrets(cls: type, values: Iterable[Any], seen: frozenset[int] = frozenset()) -> bool:
    """Whether module class ``cls`` has secret fields, or one of ``values`` (its new
    fields) is a module that does, at any depth (``seen``: the ids on the way, against cycles)."""
    if any(p.secret for p in class_plan(cls).fields):
        return True
    return any(
        isinstance(v, StateBase) and id(v) not in seen and holds_secrets(type(v), _field_values(v), seen | {id(v)})
        for v in values
    )


def _field_values(module: StateBase) -> list[Any]:
    return [getattr(module, p.name, None) for p in plan_of(module).fields]
