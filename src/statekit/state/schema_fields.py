"""What a class's JSON Schema reads of it: its fields, their defaults as JSON, and its docstring's descriptions."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import math
import re
import typing
from typing import Any

import attrs

from statekit.errors import StateDefinitionError
from statekit.state.module import StateModule
from statekit.state.plan import module_class
from statekit.values.fields import field_codec

SCHEMA_KEY = "json_schema"
"""Field metadata key holding a user-given schema for that field's value.

``state_field(from_json=parse_color, metadata={"json_schema": {"type": "string"}})``
"""

Schema = dict[str, Any]

NOTHING = object()
"""A field without a default the schema can show."""


def is_module_class(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, StateModule)


@attrs.define
class SchemaField:
    """One property of an object schema, whatever kind of class it came from."""

    name: str
    type: Any
    required: bool
    default: Any = NOTHING
    schema: Schema | None = None
    secret: bool = False


def class_fields(cls: type[Any]) -> list[SchemaField]:
    if dataclasses.is_dataclass(cls):
        return _dataclassclass_fields(cls)
    attributes = _resolved_attrsclass_fields(cls)
    if is_module_class(cls):
        attributes = [f for f in attributes if field_codec(f) is not None or module_class(f.type, StateModule)]
    else:  # value records are (un)structured by cattrs, which skips init=False
        attributes = [f for f in attributes if f.init]
    return [_attrs_field(f) for f in attributes]


def _resolved_attrsclass_fields(cls: type[Any]) -> list[attrs.Attribute[Any]]:
    try:
        attrs.resolve_types(cls)
    except (NameError, TypeError) as exc:
        raise StateDefinitionError(f"cannot resolve the field types of {cls.__qualname__}: {exc}") from exc
    return list(attrs.fields(cls))


def _attrs_field(field: attrs.Attribute[Any]) -> SchemaField:
    custom = field.metadata.get(SCHEMA_KEY)
    codec = field_codec(field)
    coded = codec is not None and (codec.from_json is not None or codec.to_json is not None)
    if custom is None and codec is not None and codec.from_json is not None:
        custom = {}  # a custom decoder: any JSON value may be what it wants
    required = field.default is attrs.NOTHING
    if codec is not None and codec.secret:
        return SchemaField(field.name, field.type, required, NOTHING, custom, secret=True)  # its default is not shown
    default = NOTHING if required or coded else _json_default(field.default)
    return SchemaField(field.name, field.type, required, default, custom)


def _dataclassclass_fields(cls: type[Any]) -> list[SchemaField]:
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError) as exc:
        raise StateDefinitionError(f"cannot resolve the field types of {cls.__qualname__}: {exc}") from exc
    out = []
    for field in (f for f in dataclasses.fields(cls) if f.init):
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        default = _json_default(field.default) if field.default is not dataclasses.MISSING else NOTHING
        out.append(SchemaField(field.name, hints[field.name], required, default, field.metadata.get(SCHEMA_KEY)))
    return out


def _json_default(value: Any) -> Any:
    """The default as JSON when it is a plain scalar (factories are not called)."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, float) and not math.isfinite(value):
        return NOTHING
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return NOTHING


def _own_doc(cls: type[Any]) -> str:
    """The class's own docstring (``inspect.getdoc`` would inherit the parent's)."""
    doc = cls.__dict__.get("__doc__")
    return inspect.cleandoc(doc) if isinstance(doc, str) else ""


def _summary(cls: type[Any]) -> str | None:
    doc = _own_doc(cls)
    if not doc or (dataclasses.is_dataclass(cls) and doc.startswith(f"{cls.__name__}(")):
        return None
    return doc.split("\n\n", 1)[0].replace("\n", " ")


def described(cls: type[Any]) -> Schema:
    summary = _summary(cls)
    return {"description": summary} if summary else {}


_ENTRY = re.compile(r"(?P<name>\w+)(?:\s*\([^)]*\))?:\s*(?P<text>.*)")


def attribute_docs(cls: type[Any]) -> dict[str, str]:
    """Field descriptions from the ``Attributes:`` section of a Google docstring."""
    lines = _own_doc(cls).splitlines()
    if "Attributes:" not in lines:
        return {}
    docs: dict[str, str] = {}
    name = None
    for line in lines[lines.index("Attributes:") + 1 :]:
        if line and not line.startswith(" "):
            break  # the next section
        entry = _ENTRY.fullmatch(line.strip())
        if _indent(line) <= 4 and entry:
            name = entry["name"]
            docs[name] = entry["text"]
        elif name and line.strip():
            docs[name] = f"{docs[name]} {line.strip()}".strip()
    return docs


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))
