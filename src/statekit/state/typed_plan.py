"""The planner of a module's mirror, generated: one function per module class that plans every key of its decoded Struct.

A typed load (:mod:`statekit.state.typed`) decodes a module's state into its
mirror Struct, then plans each key as the :class:`~statekit.state.load.Loader`
would: a typed value built by its mirror's expression (the record
constructors, :mod:`statekit.values.mirror`), checked by its field's validator
and assigned; a child module planned by its own planner; any other key through
``Loader.plan_key``. The steps are written out in one compiled function, the
mirrors' expressions inlined: no loop over the steps and no call per key at
each load (a small load's planning was a tenth of its bytecodes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from statekit.state.base import StateBase
from statekit.state.load import Loader
from statekit.values.codegen import compile_function
from statekit.values.mirror import HOLE, Mirror

Planner = Callable[[Loader, StateBase, Any, tuple[str, ...]], None]


@attrs.frozen
class TypedKey:
    """A key whose value its mirror builds: ``mirror``'s expression, then the ``field``'s validator."""

    mirror: Mirror
    field: attrs.Attribute[Any]


@attrs.frozen
class ChildKey:
    """A key holding a child module, planned by ``planner`` (``nullable``: its state may be ``null``)."""

    planner: Planner
    nullable: bool


@attrs.frozen
class PlainKey:
    """A key the Loader plans itself (plain JSON, an overriding module), by ``spec``."""

    spec: Any


Step = tuple[str, str, TypedKey | ChildKey | PlainKey]
"""One key: its name, the Struct attribute it was decoded into, and how it is planned."""


def compile_planner(steps: tuple[Step, ...], where: str) -> Planner:
    """The planner of a module whose mirror Struct holds the keys ``steps`` (``where``: its class, for tracebacks)."""
    names: dict[str, Any] = {}
    body = ["    loader.paths[id(module)] = path", "    append = loader.assignments.append"]
    for index, (name, attr, how) in enumerate(steps):
        key = f"_name{index}"
        names[key] = name
        body.append(f"    value = state.{attr}")
        if isinstance(how, TypedKey):
            if how.mirror.code is not None:
                body.append(f"    value = {how.mirror.code.replace(HOLE, 'value')}")
                names.update(how.mirror.names)
            if how.field.validator is not None:
                names[f"_valid{index}"], names[f"_field{index}"] = how.field.validator, how.field
                body.append(f"    _valid{index}(module, _field{index}, value)")
            body.append(f"    append((module, {key}, value))")
        elif isinstance(how, ChildKey):
            names[f"_child{index}"] = how.planner
            call = f"_child{index}(loader, getattr(module, {key}), value, (*path, {key}))"
            if how.nullable:
                body.append(f"    if value is None:\n        append((module, {key}, None))\n    else:\n        {call}")
            else:
                body.append(f"    {call}")
        else:
            names[f"_spec{index}"] = how.spec
            body.append(f"    loader.plan_key(module, {key}, _spec{index}, value, (*path, {key}))")
    planner: Planner = compile_function("plan(loader, module, state, path)", body, names, f"mirror plan {where}")
    return planner


__all__ = ["ChildKey", "PlainKey", "Planner", "Step", "TypedKey", "compile_planner"]
