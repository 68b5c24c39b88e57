"""Mistakes in a ``@stateful`` class body refused when the class is defined (issue 23, items 4 and 5)."""

from __future__ import annotations

from typing import Any

import attrs

from statekit.errors import StateDefinitionError

_FIELD = type(attrs.field())
"""What ``attrs.field()`` / ``state_field()`` put in a class body before ``attrs.define`` runs."""

_MUTABLE = (list, dict, set)


def plain_annotations(cls: type) -> list[str]:
    """The attributes the class body annotates without ``state_field()`` or ``attrs.field()``.

    Read before ``attrs.define`` turns the body into fields (afterwards both look alike).
    """
    return [
        name
        for name, annotation in cls.__dict__.get("__annotations__", {}).items()
        if not _is_class_var(annotation) and not isinstance(cls.__dict__.get(name), _FIELD)
    ]


def refuse_shared_defaults(cls: type) -> None:
    """Refuse a list, dict or set default of the class's own fields, as dataclasses do.

    Raises:
        StateDefinitionError: Naming the field and ``factory=``.
    """
    for field in attrs.fields(cls):
        if not field.inherited and isinstance(field.default, _MUTABLE):
            kind = type(field.default).__name__
            raise StateDefinitionError(
                f"{cls.__qualname__}.{field.name}: a {kind} default would be one object shared by every "
                f"instance; use factory={kind} (state_field(factory={kind})) to give each instance its own"
            )


def refuse_plain(cls: type, names: list[str], module_base: type) -> None:
    """Refuse a module's annotated attributes that are neither ``state_field()`` nor ``attrs.field()``.

    An attribute whose type is a module is nested state anyway, and one whose type
    is not resolved yet (a forward reference) is let be.

    Raises:
        StateDefinitionError: Naming the attribute and both ways to declare it.
    """
    for field in attrs.fields(cls):
        if field.name not in names or isinstance(field.type, str) or _holds_module(field.type, module_base):
            continue
        raise StateDefinitionError(
            f"{cls.__qualname__}.{field.name} is annotated but not declared: it would not be saved. "
            f"Use {field.name}: ... = state_field(...) to make it state, "
            f"or {field.name}: ... = attrs.field(...) for a plain attribute that is not saved"
        )


def _holds_module(tp: Any, module_base: type) -> bool:
    candidates = [a for a in getattr(tp, "__args__", ()) if a is not type(None)] or [tp]
    return all(isinstance(c, type) and issubclass(c, module_base) for c in candidates)


def _is_class_var(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.removeprefix("typing.").removeprefix("t.").startswith("ClassVar")
