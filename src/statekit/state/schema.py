"""JSON Schema (draft 2020-12) of the state of ``@stateful`` classes.

The schema describes the JSON data ``state_dict()`` writes and
``load_state_dict()`` / ``from_config()`` read, so that editors (the YAML
language server, VS Code) validate and complete hand-written config and
session files. Named classes (records, dataclasses, nested modules, enums) go
to ``$defs`` and are referenced with ``$ref``, which also handles recursion.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import re
import types
import typing
import uuid
import collections.abc as abc
from collections.abc import Iterable
from pathlib import PurePath
from typing import Any

import attrs

from statekit.values.annotations import is_record
from statekit.values.secrets import SECRET_KEY
from statekit.values.iso_patterns import DATETIME_PATTERN, TIME_PATTERN
from statekit.state.module import StateModule
from statekit.state.schema_fields import NOTHING, Schema, SchemaField, attribute_docs, class_fields, described, is_module_class
from statekit.values.pydantic import is_model, model_schema
from statekit.values.versions import VERSION_KEY, tag
from statekit.errors import StateDefinitionError

DRAFT = "https://json-schema.org/draft/2020-12/schema"
"""The ``$schema`` of every schema statekit makes."""

_SCALARS: dict[type, Schema] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    type(None): {"type": "null"},
    # Not "format": "date-time"/"time": those are RFC 3339 and need a UTC offset,
    # which isoformat() leaves out for naive values (editors would flag them).
    datetime.datetime: {
        "type": "string",
        "pattern": DATETIME_PATTERN,
        "description": "ISO 8601 date and time, such as 2025-08-15T09:50:59.264+00:00",
    },
    datetime.date: {"type": "string", "format": "date"},
    datetime.time: {
        "type": "string",
        "pattern": TIME_PATTERN,
        "description": "ISO 8601 time of day, such as 09:50:59",
    },
    uuid.UUID: {"type": "string", "format": "uuid"},
}
_ARRAYS: set[Any] = {list, abc.Sequence, abc.MutableSequence}
_SETS: set[Any] = {set, frozenset, abc.Set, abc.MutableSet}
_MAPPINGS: set[Any] = {dict, abc.Mapping, abc.MutableMapping}
_UNIONS = {typing.Union, types.UnionType}


def json_schema(cls: type[Any], *, title: str | None = None) -> Schema:
    """Return the JSON Schema (draft 2020-12) of a ``@stateful`` class's state.

    Args:
        cls: A ``@stateful`` class (a state module or a value record), an attrs
            class or a dataclass.
        title: The schema's title; the class name when omitted.

    Returns:
        A new JSON-ready ``dict``: the class's own schema at the root (state
        fields as ``properties``, fields without a default as ``required``, no
        other key allowed) and every other named class under ``$defs``.

    Raises:
        StateDefinitionError: ``cls`` is not such a class, or one of its field
            types cannot be resolved.
    """
    builder = _Builder(root=require_stateful_class(cls))
    return builder.document({"title": title or cls.__name__, **builder.object_schema(cls)})


def session_schema(**modules: type[Any] | StateModule) -> Schema:
    """Return the JSON Schema of a session document holding the given modules.

    A session file maps each module name to that module's state, as
    ``save_session_state(session_id, agent=agent, toolkit=toolkit)`` writes it.

    Args:
        **modules: Module name to ``@stateful`` class (or an instance of one).

    Returns:
        A schema whose properties are the module names, all required; other
        top-level keys are allowed, since a session may hold more modules.

    Raises:
        StateDefinitionError: A value is not a ``@stateful`` class.
    """
    builder = _Builder(root=None, sealed_secrets=True)
    properties = {}
    for name, cls in modules.items():
        properties[name] = builder.ref(require_stateful_class(_as_class(cls)))
    body: Schema = {"title": "statekit session", "type": "object", "properties": properties}
    body["required"] = list(properties)
    return builder.document(body)


def _as_class(obj: Any) -> type[Any]:
    return obj if isinstance(obj, type) else type(obj)


def require_stateful_class(cls: Any, *, module_hint: str = "it has no static schema") -> type[Any]:
    """Return ``cls`` when it is a ``@stateful``, attrs or dataclass class.

    Args:
        cls: What the caller was given.
        module_hint: Said of a ``StateModule`` subclass that is not ``@stateful``.

    Raises:
        StateDefinitionError: ``cls`` is anything else.
    """
    if isinstance(cls, type) and is_record(cls):
        return cls
    hint = ""
    if isinstance(cls, type) and issubclass(cls, StateModule):
        hint = f" (its state is registered at run time: {module_hint})"
    raise StateDefinitionError(f"{cls!r} is not a @stateful class, attrs class or dataclass{hint}")


class _Builder:
    """Walks types into schemas, collecting named classes in ``$defs``.

    Args:
        root: The class at the root (``#``), if any.
        sealed_secrets: Describe secret fields as a session holds them: in
            clear or sealed, and never required (saved without a key, they are
            left out). Otherwise as a config holds them: in clear.
    """

    def __init__(self, root: type[Any] | None, *, sealed_secrets: bool = False) -> None:
        self.root = root
        self.sealed_secrets = sealed_secrets
        self.defs: dict[str, Schema] = {}
        self.names: dict[type[Any], str] = {}

    def document(self, body: Schema) -> Schema:
        """Wrap the root body with ``$schema`` and the collected ``$defs``."""
        doc: Schema = {"$schema": DRAFT, **body}
        if self.defs:
            doc["$defs"] = self.defs
        return doc

    def ref(self, cls: type[Any]) -> Schema:
        """Return a ``$ref`` to ``cls``, defining it on first use."""
        if cls is self.root:
            return {"$ref": "#"}
        if cls not in self.names:
            name = self._new_name(cls)
            self.names[cls] = name
            self.defs[name] = {}  # reserved first, so a recursive field finds it
            self.defs[name] = self._define(cls)
        return {"$ref": f"#/$defs/{self.names[cls]}"}

    def _new_name(self, cls: type[Any]) -> str:
        """A free ``$defs`` name: the class name, else its qualified name, else that numbered."""
        short, qualified = (_def_name(n) for n in (cls.__name__, f"{cls.__module__}.{cls.__qualname__}"))
        for name in (short, qualified):
            if name not in self.defs:
                return name
        number = 2
        while f"{qualified}-{number}" in self.defs:  # classes made by one factory share their qualified name
            number += 1
        return f"{qualified}-{number}"

    def _define(self, cls: type[Any]) -> Schema:
        if is_model(cls):
            return model_schema(cls, self.names[cls], self.defs)
        if issubclass(cls, enum.Enum):
            return {"title": cls.__name__, **described(cls), **_literal(list(cls))}
        body = self.object_schema(cls)
        return {"title": cls.__name__, **body}

    def object_schema(self, cls: type[Any]) -> Schema:
        """The object schema of a record, dataclass or module class."""
        docs = attribute_docs(cls)
        properties, required = _version_property(cls)
        for field in class_fields(cls):
            properties[field.name] = self._property(field, docs.get(field.name))
            if field.required and not (field.secret and self.sealed_secrets):
                required.append(field.name)
        body: Schema = {**described(cls), "type": "object", "properties": properties}
        if required:
            body["required"] = required
        body["additionalProperties"] = False
        return body

    def _property(self, field: SchemaField, doc: str | None) -> Schema:
        schema = dict(field.schema) if field.schema is not None else self.type_schema(field.type)
        if field.secret:
            schema = {"anyOf": [schema, _SEALED]} if self.sealed_secrets else schema
            doc = doc or _SECRET_DOC
        if doc:
            schema["description"] = doc
        if field.default is not NOTHING:
            schema["default"] = field.default
        return schema

    def type_schema(self, tp: Any) -> Schema:
        """The schema of the JSON form of a value of type ``tp``."""
        tp = _unwrap(tp)
        if tp is Any or tp is object:
            return {}
        if isinstance(tp, type) and (scalar := _scalar(tp)) is not None:
            return dict(scalar)
        origin = typing.get_origin(tp)
        if origin is typing.Literal:
            return _literal(typing.get_args(tp))
        if origin in _UNIONS:
            return _union([self.type_schema(arg) for arg in typing.get_args(tp)])
        if (isinstance(tp, type) and issubclass(tp, enum.Enum)) or is_record(tp) or is_model(tp):
            return self.ref(tp)
        return self._container(origin or tp, typing.get_args(tp))

    def _container(self, kind: Any, args: tuple[Any, ...]) -> Schema:
        if kind in _ARRAYS or kind in _SETS:
            schema: Schema = {"type": "array", "items": self._arg(args, 0)}
            return {**schema, "uniqueItems": True} if kind in _SETS else schema
        if kind is tuple:
            return self._tuple(args)
        if kind in _MAPPINGS:
            return self._mapping(args)
        if is_module_class(kind):
            return {"description": f"the state of {kind.__name__}, registered at run time"}
        return {"description": f"any JSON value: no schema is known for {kind!r}"}

    def _arg(self, args: tuple[Any, ...], index: int) -> Schema:
        return self.type_schema(args[index]) if len(args) > index else {}

    def _tuple(self, args: tuple[Any, ...]) -> Schema:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            return {"type": "array", "items": self._arg(args, 0)}
        items = [] if args == ((),) else [self.type_schema(arg) for arg in args]
        schema: Schema = {"type": "array", "minItems": len(items), "maxItems": len(items)}
        return {**schema, "prefixItems": items} if items else schema

    def _mapping(self, args: tuple[Any, ...]) -> Schema:
        schema: Schema = {"type": "object", "additionalProperties": self._arg(args, 1)}
        if args and _is_string_choice(args[0]):
            schema["propertyNames"] = self.type_schema(args[0])
        return schema


def _def_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _version_property(cls: type[Any]) -> tuple[dict[str, Schema], list[str]]:
    """A versioned class's data must say its version: without it, it is version 1."""
    version = tag(cls)
    if version is None:
        return {}, []
    description = f"the version of {cls.__name__}'s state; older data is migrated when loaded"
    return {VERSION_KEY: {"const": version, "description": description}}, [VERSION_KEY]


_SECRET_DOC = "a secret field: written in clear in a config, stored encrypted by a session with a key (see docs/secrets.md)"

_SEALED: Schema = {
    "description": "an encrypted secret",
    "type": "object",
    "properties": {SECRET_KEY: {"type": "string"}},
    "required": [SECRET_KEY],
    "additionalProperties": False,
}


def _unwrap(tp: Any) -> Any:
    """Strip ``Annotated``, ``NewType`` and ``type X = ...`` aliases."""
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif isinstance(tp, typing.NewType):
            tp = tp.__supertype__
        elif type(tp).__name__ == "TypeAliasType":
            tp = tp.__value__
        else:
            return tp


def _scalar(tp: type) -> Schema | None:
    if issubclass(tp, PurePath):
        return {"type": "string"}
    if issubclass(tp, enum.Enum):
        return None
    for base in tp.__mro__:  # datetime before date, bool before int
        if base in _SCALARS:
            return _SCALARS[base]
    return None


def _literal(values: Iterable[Any]) -> Schema:
    plain = [v.value if isinstance(v, enum.Enum) else v for v in values]
    return {"const": plain[0]} if len(plain) == 1 else {"enum": plain}


def _union(options: list[Schema]) -> Schema:
    """``anyOf`` the options, or one ``type`` list when they are all bare types."""
    if all(set(o) == {"type"} and isinstance(o["type"], str) for o in options):
        names = list(dict.fromkeys(o["type"] for o in options))
        return {"type": names[0] if len(names) == 1 else names}
    unique = [o for i, o in enumerate(options) if o not in options[:i]]
    return unique[0] if len(unique) == 1 else {"anyOf": unique}


def _is_string_choice(tp: Any) -> bool:
    if typing.get_origin(tp) is typing.Literal:
        return all(isinstance(v, str) for v in typing.get_args(tp))
    return isinstance(tp, type) and issubclass(tp, enum.Enum) and all(isinstance(m.value, str) for m in tp)
