"""pydantic (v2) models as state values: built-in hooks, without importing pydantic.

A field typed with a ``BaseModel`` subclass (alone, in a list, a dict, an
optional, a record) is saved with ``model_dump(mode="json")`` and loaded with
``model_validate``, the way a field with ``to_json`` / ``from_json`` is: the
hooks sit in statekit's converters, the fast paths leave such types to them
(``Shape.from_json`` in :mod:`statekit.values.types`), and pydantic's validation
errors become problems with their full paths (the field's, then pydantic's
``loc``). pydantic is never imported here: a class can only be a model once
its program imported pydantic, so ``sys.modules`` is asked.
"""

from __future__ import annotations

import gc
import math
import operator
import sys
import types
import typing
from collections.abc import Callable, Iterator
from itertools import compress, repeat
from typing import Any

import cattrs
from cattrs.errors import StructureHandlerNotFoundError

from statekit.values.census import all_json
from statekit.values.plain import JSONValueError, copy_any, describe, with_article
from statekit._limits import MAX_DEPTH
from statekit.errors import PathSegment

Hook = Callable[[Any], Any]
SHook = Callable[[Any, Any], Any]


def is_model(tp: Any) -> bool:
    """Whether ``tp`` is a pydantic v2 ``BaseModel`` subclass (``False`` while pydantic is not imported)."""
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(tp, type):
        return False
    base = getattr(pydantic, "BaseModel", None)
    return isinstance(base, type) and issubclass(tp, base) and tp is not base


def is_frozen_model(tp: Any) -> bool:
    """Whether ``tp`` is a pydantic model whose instances refuse assignment (``frozen=True``)."""
    return is_model(tp) and tp.model_config.get("frozen") is True


def register_models(conv: cattrs.Converter) -> None:
    """Dump pydantic models with ``model_dump(mode="json")``, load them with ``model_validate``."""
    conv.register_unstructure_hook_factory(is_model, model_dump_hook)
    conv.register_structure_hook_factory(is_model, model_load_hook)
    conv.register_unstructure_hook_factory(_is_model_union, _refuse_union)
    conv.register_structure_hook_factory(_is_model_union, _refuse_union)


def model_dump_hook(tp: Any) -> Hook:
    """Dump exactly a ``tp`` (a subclass would load back as a ``tp``) to checked JSON data.

    ``by_alias`` and ``round_trip`` make what ``model_validate`` reads back;
    ``warnings="error"`` refuses a value that does not match its field's type
    (pydantic would write it with a warning, and the next load would refuse it).
    """
    masked = _masked_fields(tp, {tp})
    if masked:
        raise StructureHandlerNotFoundError(
            f"pydantic writes {', '.join(masked)} as '**********' in JSON, so the secret would be lost; "
            "give the field a @field_serializer returning its get_secret_value(), or keep the secret "
            "in a state_field(secret=True) of the module",
            tp,
        )
    expected = with_article(tp.__qualname__)
    nulls_nan = tp.model_config.get("ser_json_inf_nan", "null") == "null"

    def dump(value: Any) -> Any:
        if type(value) is not tp:
            raise JSONValueError([((), f"expected {expected}, got {describe(value)}")])
        try:
            data = value.model_dump(mode="json", by_alias=True, round_trip=True, warnings="error")
            if nulls_nan:
                _refuse_nulled_floats(value)
        except JSONValueError:
            raise
        except Exception as exc:  # noqa: BLE001 - pydantic's serialization errors, a serializer's own
            raise JSONValueError([((), f"model_dump raised {type(exc).__name__}: {_one_line(exc)}")]) from exc
        # model_dump's result is new and no one else's: checked in C, copied only to name a problem
        return data if all_json([data]) else copy_any(data)

    return dump


def model_load_hook(tp: Any) -> SHook:
    """Load a ``tp`` with ``model_validate`` (on a private copy of the data); its
    validation errors become problems at ``loc``, below the caller's path."""
    invalid = sys.modules["pydantic"].ValidationError

    def load(data: Any, _: Any) -> Any:
        data = copy_any(data)
        try:
            return tp.model_validate(data)
        except invalid as exc:
            raise JSONValueError([_problem(data, e) for e in exc.errors(include_url=False)]) from None

    return load


def model_schema(tp: Any, name: str, defs: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of ``tp``'s data (``model_json_schema``, validation mode: what a load
    takes), to sit in ``defs`` as ``name``; the models it holds go there as ``name.Inner``."""
    try:
        schema: dict[str, Any] = tp.model_json_schema(ref_template=f"#/$defs/{name}.{{model}}")
    except Exception as exc:  # noqa: BLE001 - a type pydantic has no schema for: any JSON then
        return {"description": f"any JSON value: pydantic has no schema for {tp.__qualname__} ({_one_line(exc)})"}
    for inner, body in schema.pop("$defs", {}).items():
        defs[f"{name}.{inner}"] = body
    return schema


_CONTAINERS = frozenset((dict, list, tuple, set, frozenset))


def _refuse_nulled_floats(value: Any) -> None:
    """Refuse NaN and infinities under ``Any`` (and untyped containers), which
    ``model_dump(mode="json")`` writes as ``null`` without a word (in a ``float``
    field it keeps them, and the JSON check refuses them)."""
    data = value.model_dump(mode="python", by_alias=True, round_trip=True, warnings=False)
    level = [data]
    for _ in range(MAX_DEPTH + 2):  # level by level, in C: the common case finds nothing
        if not level:
            return
        kinds = list(map(type, level))
        if not all(map(math.isfinite, compress(level, map(operator.is_, kinds, repeat(float))))):
            break
        level = gc.get_referents(*compress(level, map(_CONTAINERS.__contains__, kinds)))
    found = _non_finite(data, ())
    if found is not None:
        path, number = found
        raise JSONValueError([(path, f"{describe(number)}: JSON has no form for it (pydantic would write null)")])


def _non_finite(data: Any, path: tuple[PathSegment, ...]) -> tuple[tuple[PathSegment, ...], float] | None:
    if type(data) is float and not math.isfinite(data):
        return path, data
    if len(path) > MAX_DEPTH or type(data) not in _CONTAINERS:
        return None
    items = data.items() if type(data) is dict else enumerate(data)
    for key, item in items:
        found = _non_finite(item, (*path, key if isinstance(key, (str, int)) else str(key)))
        if found is not None:
            return found
    return None


def _is_model_union(tp: Any) -> bool:
    """A union holding a model, other than ``Model | None`` (which cattrs handles with the model's hooks)."""
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return False
    members = [m for m in typing.get_args(tp) if m is not type(None)]
    return len(members) > 1 and any(is_model(m) for m in members)


def _refuse_union(tp: Any) -> Any:
    raise StructureHandlerNotFoundError(
        "statekit cannot tell the members of a union holding a pydantic model apart in JSON; let pydantic "
        "do it: hold the union in a model (a field of a BaseModel, or RootModel[A | B], with a "
        "discriminator if you have one)",
        tp,
    )


def _masked_fields(tp: Any, seen: set[Any]) -> list[str]:
    """The fields (at any depth) that pydantic writes masked: secret types without a serializer."""
    pydantic = sys.modules["pydantic"]
    masks = tuple(c for n in ("SecretStr", "SecretBytes", "Secret") if isinstance(c := getattr(pydantic, n, None), type))
    decorators = getattr(tp, "__pydantic_decorators__", None)
    if decorators is None or decorators.model_serializers:
        return []  # the model writes itself
    served = {name for d in decorators.field_serializers.values() for name in d.info.fields}
    out: list[str] = []
    for name, info in tp.model_fields.items():
        if name in served or "*" in served:
            continue
        for inner in _nested(info.annotation):
            origin = typing.get_origin(inner) or inner
            if isinstance(origin, type) and issubclass(origin, masks):
                out.append(f"{tp.__name__}.{name}")
            elif is_model(inner) and inner not in seen:
                seen.add(inner)
                out.extend(_masked_fields(inner, seen))
    return out


def _nested(tp: Any) -> Iterator[Any]:
    yield tp
    for arg in typing.get_args(tp):
        yield from _nested(arg)


def _problem(data: Any, error: Any) -> tuple[tuple[PathSegment, ...], str]:
    """pydantic's error as a problem: the steps of its ``loc`` that are in the data make
    the path (a missing key too); the rest (a union member's tag, ``[key]``) goes into the message."""
    loc, node = tuple(error["loc"]), data
    for index, step in enumerate(loc):
        if type(node) is dict and type(step) is str and step in node:
            node = node[step]
        elif type(node) is list and type(step) is int and 0 <= step < len(node):
            node = node[step]
        elif type(node) is dict and type(step) is str and index == len(loc) - 1 and error["type"] == "missing":
            break
        else:
            rest = ".".join(str(s) for s in loc[index:])
            return loc[:index], f"{error['msg']} (in {rest})"
    return loc, error["msg"]


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


__all__ = ["is_frozen_model", "is_model", "model_schema", "register_models"]
