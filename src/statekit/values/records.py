"""Records (attrs classes, dataclasses): how statekit's converters dump and load them.

Generated code per class (cattrs' for loads and for records with codecs,
:mod:`statekit.values.compile`'s dump mode for plain attrs records), the version key, and
the per-field ``to_json`` / ``from_json`` codecs with their error wrapping.
"""

from __future__ import annotations

import types
import typing
import weakref
from typing import Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from statekit.values.containers import Hook, SHook, exact_container, guarded
from statekit.values.annotations import fields_of, is_module_class, is_record, iter_types, type_hints
from statekit.values.compile import Mode, generate
from statekit.values.fields import field_codec
from statekit.values.plain import copy_any, copy_loose, with_article
from statekit.values.refusals import exactly, refusal
from statekit.values.types import Dump, Role, dump_of, made, record_shape
from statekit.values.versions import versioned_structure, versioned_unstructure
from statekit.errors import StateDefinitionError


def register_records(conv: cattrs.Converter) -> None:
    """attrs classes and dataclasses: generated code, with per-field codecs."""

    def unstructure(tp: Any, conv: cattrs.Converter) -> Hook:
        refuse_secret_values(tp)
        if tp in _generating:
            return _late_unstructure(conv, tp)
        _generating.add(tp)
        try:
            return versioned_unstructure(tp, _record_unstructure(tp, conv))
        finally:
            _generating.discard(tp)

    def structure(tp: Any, conv: cattrs.Converter) -> SHook:
        refuse_secret_values(tp)
        overrides = {**_untyped_loads(tp, conv), **_overrides(tp, dump=False)}
        hook = versioned_structure(tp, make_dict_structure_fn(tp, conv, **overrides))
        return guarded(hook, dict, f"an object ({tp.__name__})")

    conv.register_unstructure_hook_factory(is_record, unstructure)
    conv.register_structure_hook_factory(is_record, structure)
    conv.register_unstructure_hook_factory(_is_record_list, _record_list_unstructure)
    conv.register_unstructure_hook_factory(_is_record_union, _record_union_unstructure)


def refuse_secret_values(tp: Any) -> None:
    """Refuse a module class with secret fields where it would be converted as a value.

    A module held in a list, a dict, a union or a value record is dumped and
    loaded as plain data, field by field, without the sealing a module field
    gets: its secrets would be written in clear.

    Raises:
        StateDefinitionError: ``tp`` is such a class.
    """
    if not is_module_class(tp) or not attrs.has(tp):
        return
    secret = [f.name for f in attrs.fields(tp) if getattr(field_codec(f), "secret", False)]
    if secret:
        raise StateDefinitionError(
            f"{tp.__qualname__} has secret fields ({', '.join(secret)}), so it cannot be held in a list, "
            "a dict, a union or a value record, where a module is saved as plain data and its secrets "
            "would be written in clear; hold it in a module field (state_field()) of another module"
        )


def refuse_secret_values_in(tp: Any, seen: set[Any] | None = None) -> None:
    """:func:`refuse_secret_values` for every type nested in ``tp``, record fields included
    (so that any converter, not only statekit's hooks, meets the refusal)."""
    seen = set() if seen is None else seen
    for inner in iter_types(tp):
        if not isinstance(inner, type) or inner in seen:
            continue
        seen.add(inner)
        refuse_secret_values(inner)
        if is_record(inner):  # a module in here is dumped field by field too: its module fields as well
            try:
                hints = type_hints(inner)
            except NameError:
                continue  # forward references: the hooks refuse it when they are made
            for field in fields_of(inner):
                refuse_secret_values_in(hints.get(field.name, Any), seen)


def _is_record_list(tp: Any) -> bool:
    args = typing.get_args(tp)
    return typing.get_origin(tp) is list and len(args) == 1 and is_record(args[0])


def _record_list_unstructure(tp: Any, conv: cattrs.Converter) -> Hook:
    """The items' generated dump in one loop (:data:`~statekit.values.compile.Mode.DUMP_LIST`) when
    statekit generates it; else a list comprehension over their hook (cattrs builds a list from a
    generator: slower per item)."""
    cls = typing.get_args(tp)[0]
    item = conv.get_unstructure_hook(cls)  # (refuses a module with secrets; a recursive one is late-bound)
    if cls not in _generating and dump_of(cls, conv)[0] is Dump.RECORD:  # (not a user's hook, nor versioned)
        _generating.add(cls)  # its fields' hooks are looked up again: a list of it among them is not looped
        try:
            return exact_container(tp, generate(cls, conv, Mode.DUMP_LIST))
        finally:
            _generating.discard(cls)
    return exact_container(tp, lambda value: [item(v) for v in value])


def _is_record_union(tp: Any) -> bool:
    args = typing.get_args(tp)
    records = [a for a in args if is_record(a)]
    union = typing.get_origin(tp) in (typing.Union, types.UnionType)
    return union and len(records) >= 2 and len(records) + (type(None) in args) == len(args)


def _record_union_unstructure(tp: Any, conv: cattrs.Converter) -> Hook:
    """Dump a member by its own hook, and refuse any other class (cattrs would dump it by
    its own fields: a subclass of a member, or a look-alike, then loads as another value)."""
    hooks = {member: conv.get_unstructure_hook(member) for member in typing.get_args(tp)}
    refuse = refusal(" or ".join("null" if m is type(None) else with_article(m.__qualname__) for m in hooks))

    def dump(value: Any) -> Any:
        hook = hooks.get(type(value))
        return refuse(value) if hook is None else hook(value)

    return dump


_generating: set[Any] = set()


def _record_unstructure(tp: type, conv: cattrs.Converter) -> Hook:
    """statekit's generated code for a plain attrs record; cattrs' for the rest (codecs, dataclasses).

    Both refuse a value of another class, a subclass too: its fields would be
    written as the record's, and it would load back as another value."""
    overrides = _overrides(tp, dump=True)
    if overrides or not attrs.has(tp):
        return exactly(tp, make_dict_unstructure_fn(tp, conv, **overrides))
    hints = record_shape(tp).hints
    if hints is None or any(field.name not in hints for field in attrs.fields(tp)):
        # a name not defined yet, or an untyped attr.ib(): cattrs dumps it by the class of its value
        return exactly(tp, make_dict_unstructure_fn(tp, conv))
    return made(generate(tp, conv, Mode.DUMP), Role.DUMPS, weakref.ref(tp))  # checks the class itself


def _late_unstructure(conv: cattrs.Converter, tp: Any) -> Hook:
    """A recursive record (``Rec`` holding ``list[Rec]``): look its hook up when called.

    cattrs would fall back to dispatching on the runtime class, which sees a bare
    ``list`` and loses the element type.
    """
    return lambda value: conv.get_unstructure_hook(tp)(value)


def _overrides(tp: type, *, dump: bool) -> dict[str, Any]:
    if not attrs.has(tp):
        return {}
    out: dict[str, Any] = {}
    for field in attrs.fields(tp):
        codec = field_codec(field)
        if codec is None:
            continue
        if dump and codec.to_json is not None:
            out[field.name] = override(unstruct_hook=dump_with(codec.to_json))
        elif not dump and codec.from_json is not None:
            out[field.name] = override(struct_hook=_two_argument(load_with(codec.from_json)))
    return out


def _untyped_loads(tp: type, conv: cattrs.Converter) -> dict[str, Any]:
    """Overrides loading each attribute without a type (a bare ``attr.ib()``) as any JSON
    data, as the fast path and the typed session load do (cattrs would ask for ``None``)."""
    if not attrs.has(tp):
        return {}
    untyped = [field.name for field in attrs.fields(tp) if field.type is None]
    return {name: override(struct_hook=conv.get_structure_hook(Any)) for name in untyped}


class CodecError(ValueError):
    """A user's ``to_json`` / ``from_json`` raised; the message says what."""


def dump_with(to_json: Hook) -> Hook:
    """Wrap a ``to_json`` codec: copy its result, name its failures."""

    def dump(value: Any) -> Any:
        try:
            data = to_json(value)
        except Exception as exc:
            raise CodecError(f"to_json raised {type(exc).__name__}: {exc}") from exc
        return copy_loose(data)

    return dump


def load_with(from_json: Hook) -> Hook:
    """Wrap a ``from_json`` codec: give it a private copy, name its failures."""

    def load(data: Any) -> Any:
        try:
            return from_json(copy_any(data))
        except Exception as exc:
            raise CodecError(f"from_json raised {type(exc).__name__}: {exc}") from exc

    return load


def _two_argument(load: Hook) -> SHook:
    return lambda value, _: load(value)


__all__ = ["CodecError", "dump_with", "load_with", "refuse_secret_values", "refuse_secret_values_in", "register_records"]
