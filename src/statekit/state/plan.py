"""Per-class plans: which attributes are state, and the hooks that move them.

A plan is made once per ``@stateful`` class (when it is defined, so that a type
statekit cannot handle fails there, naming the field) and reused by every
``state_dict()`` and ``load_state_dict()`` of its instances.
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Callable
from typing import Any

import attrs
import cattrs
from cattrs.errors import StructureHandlerNotFoundError

from statekit.values.encode import make_encode_converter
from statekit.values.annotations import is_frozen_record, iter_types, type_hints
from statekit.values.compile import load_hook
from statekit.values.hooks import prepare
from statekit.values.types import shape_of
from statekit.values.converter import UnsupportedTypeError, lenient, make_converter
from statekit.values.records import dump_with, load_with, refuse_secret_values_in
from statekit.values.fields import FieldCodec, field_codec
from statekit.state.foreign import protocol_class
from statekit.values.pydantic import is_frozen_model
from statekit.values.plain import copy_any, copy_loose, type_name
from statekit.errors import StateDefinitionError

Dump = Callable[[Any], Any]
Load = Callable[[Any], Any]

DEFAULT_CONVERTER = make_converter()
ENCODE_CONVERTER = make_encode_converter()


@attrs.frozen
class FieldPlan:
    """How one declared attribute takes part in the state.

    Attributes:
        field: The attrs field.
        is_state: Declared with ``state_field()`` (else only a held module is state).
        module_type: The ``StateModule`` subclass the annotation names, if any.
        nullable: The annotation admits ``None``.
        tp: The annotation (to locate a failed dump).
        dump: Value to JSON data (``None`` when not a value field).
        load_strict: JSON data to a new value, unknown record keys rejected.
        load_lenient: The same, unknown record keys ignored.
        encode: Like ``dump``, for data encoded at once (a session save):
            JSON-typed values are validated, not copied.
        load_fresh: Like ``load_strict``, for data fresh from the JSON codec
            that nobody else holds (a session load): nothing is copied.
        secret: Declared ``state_field(secret=True)``: sealed or left out.
        append_only: Declared ``state_field(append_only=True)``: a list of
            immutable items that sessions save as deltas.
    """

    field: attrs.Attribute[Any]
    is_state: bool
    module_type: type | None
    nullable: bool = False
    tp: Any = Any
    dump: Dump | None = None
    load_strict: Load | None = None
    load_lenient: Load | None = None
    encode: Dump | None = None
    load_fresh: Load | None = None
    secret: bool = False
    append_only: bool = False

    @property
    def name(self) -> str:
        """The attribute name, which is also the state key."""
        return self.field.name


@attrs.frozen
class ClassPlan:
    """The plan of one class: its declared attributes, in declaration order."""

    fields: tuple[FieldPlan, ...]
    by_name: dict[str, FieldPlan]
    has_secrets: bool = False
    """Whether a field is ``state_field(secret=True)`` (decided once, for the check of every save without a key)."""


def make_plan(cls: type, converter: cattrs.Converter | None, module_base: type) -> ClassPlan:
    """Build the plan of an attrs class, resolving its annotations.

    Raises:
        StateDefinitionError: A state field's type cannot be saved or loaded.
    """
    conv = converter or DEFAULT_CONVERTER
    hints = type_hints(cls)
    plans = [_field_plan(cls, f, hints.get(f.name, Any), conv, module_base) for f in attrs.fields(cls)]
    fields = tuple(p for p in plans if p is not None)
    return ClassPlan(fields=fields, by_name={p.name: p for p in fields}, has_secrets=any(p.secret for p in fields))


def _field_plan(
    cls: type, field: attrs.Attribute[Any], tp: Any, conv: cattrs.Converter, module_base: type
) -> FieldPlan | None:
    codec = field_codec(field)
    module_type = module_class(tp, module_base)
    if codec is not None and codec.secret and module_type is not None:
        raise StateDefinitionError(f"{cls.__qualname__}.{field.name}: secret=True is for values, not for a nested module")
    if codec is None or module_type is not None:
        # Not declared as state: only a StateModule it holds at run time is state.
        nullable = type(None) in typing.get_args(tp)
        return FieldPlan(field=field, is_state=codec is not None, module_type=module_type, nullable=nullable)
    if codec.append_only:
        check_append_only(cls, field.name, tp, codec)
    dump, strict, loose = value_hooks(cls, field.name, tp, codec, conv)
    encode, fresh = _session_hooks(tp, codec, conv, dump, strict)
    return FieldPlan(
        field, True, None, False, tp, dump, strict, loose, encode, fresh, secret=codec.secret, append_only=codec.append_only
    )


def _session_hooks(tp: Any, codec: FieldCodec, conv: cattrs.Converter, dump: Dump, strict: Load) -> tuple[Dump, Load]:
    """The no-copy hooks a session save and load use; the copying ones where a
    user's converter or codec is involved (their hooks may keep what they get),
    or where loading runs the user's code deeper down (a pydantic model's
    validators, a ``from_json`` of a record it holds): the typed session load
    then leaves the field to the full path, so that this code runs once."""
    if conv is not DEFAULT_CONVERTER or codec.to_json is not None or codec.from_json is not None or shape_of(tp, conv).from_json:
        return dump, strict
    prepare(ENCODE_CONVERTER, tp)
    fresh = load_hook(tp, conv, fresh=True)
    return _dump_hook(tp, codec, ENCODE_CONVERTER), fresh


_IMMUTABLE_ITEMS = (str, int, float, bool)


def check_append_only(cls: type, name: str, tp: Any, codec: FieldCodec) -> None:
    """Refuse ``append_only=True`` unless the field is a ``list`` of immutable items.

    An item changed in place after it was saved would never be saved again, so
    only frozen records and immutable scalars may be items.

    Raises:
        StateDefinitionError: Naming the field and what is wrong.
    """
    where = f"{cls.__qualname__}.{name}"
    args = typing.get_args(tp)
    if typing.get_origin(tp) is not list or len(args) != 1:
        raise StateDefinitionError(f"{where}: append_only=True needs a list[...] field, not {type_name(tp)}")
    if codec.to_json is not None or codec.from_json is not None or codec.secret:
        raise StateDefinitionError(f"{where}: append_only=True cannot be combined with to_json=, from_json= or secret=")
    item = args[0]
    if item in _IMMUTABLE_ITEMS or is_frozen_record(item) or is_frozen_model(item):
        return
    raise StateDefinitionError(
        f"{where}: the items of an append_only list must be frozen records (@stateful(frozen=True)), "
        "frozen pydantic models (model_config = ConfigDict(frozen=True)) or "
        f"str, int, float or bool, so that no saved item can change in place; {type_name(item)} is not"
    )


def check_record(cls: type, converter: cattrs.Converter | None) -> None:
    """Make the hooks of every field of a value record now, so bad types fail here."""
    conv = converter or DEFAULT_CONVERTER
    for field in attrs.fields(cls):
        if (field_codec(field) or FieldCodec()).secret:
            raise StateDefinitionError(
                f"{cls.__qualname__}.{field.name}: secret=True is for fields of a StateModule, not of a value record"
            )
    try:
        hints = type_hints(cls)
    except NameError:
        return  # forward references: checked when first used
    for field in attrs.fields(cls):
        codec = field_codec(field) or FieldCodec()
        value_hooks(cls, field.name, hints.get(field.name, Any), codec, conv)


def module_class(tp: Any, module_base: type) -> type | None:
    """The ``StateModule`` subclass named by ``tp`` (``Memory`` or ``Memory | None``), or
    a foreign module class (AgentScope's ``ReActAgent``: see :mod:`statekit.state.foreign`)."""
    candidates = [tp]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        candidates = [a for a in typing.get_args(tp) if a is not type(None)]
    if len(candidates) == 1 and isinstance(candidates[0], type):
        if issubclass(candidates[0], module_base) or protocol_class(candidates[0]):
            return candidates[0]
    return None


def value_hooks(
    cls: type, name: str, tp: Any, codec: FieldCodec, conv: cattrs.Converter
) -> tuple[Dump, Load, Load]:
    """Make the dump and the two load hooks of a value field, failing early."""
    try:
        if codec.to_json is None or codec.from_json is None:
            refuse_secret_values_in(tp)
            prepare(conv, tp)
            prepare(lenient(conv), tp)
        dump = _dump_hook(tp, codec, conv)
        strict = _load_hook(tp, codec, conv)
        loose = _load_hook(tp, codec, lenient(conv))
    except (StructureHandlerNotFoundError, TypeError, ValueError) as exc:
        where = f"{cls.__qualname__}.{name}"
        unsupported = exc if isinstance(exc, UnsupportedTypeError) else None  # its advice is the one below: said once
        why = "" if unsupported else f" ({exc})"
        first = _stateful_first(unsupported.type_) if unsupported else ""
        raise StateDefinitionError(
            f"{where}: statekit cannot save or load values of type {type_name(tp)}{why}; {first}"
            "give the field to_json= and from_json=, or register cattrs hooks on a "
            "converter passed as @stateful(converter=...)"
        ) from exc
    return dump, strict, loose


def _stateful_first(tp: Any) -> str:
    """Advice for a plain class of the user's own (a record that forgot ``@stateful``), else nothing."""
    if not isinstance(tp, type) or tp.__module__ == "builtins" or tp.__module__.split(".")[0] in sys.stdlib_module_names:
        return ""
    return f"if {tp.__qualname__} holds data, decorate it with @stateful (a value record: every field is data); else "


def _dump_hook(tp: Any, codec: FieldCodec, conv: cattrs.Converter) -> Dump:
    if codec.to_json is not None:
        return dump_with(codec.to_json)
    for inner in iter_types(tp):
        conv.get_unstructure_hook(inner)
    return conv.get_unstructure_hook(tp)


def _load_hook(tp: Any, codec: FieldCodec, conv: cattrs.Converter) -> Load:
    if codec.from_json is not None:
        return load_with(codec.from_json)
    for inner in iter_types(tp):  # cattrs makes the hooks of union members lazily: fail here, not in a load
        conv.get_structure_hook(inner)
    return load_hook(tp, conv)


def any_hooks(codec: FieldCodec) -> tuple[Dump, Load]:
    """Hooks of an attribute registered imperatively (no type: JSON data)."""
    dump: Dump = copy_loose if codec.to_json is None else dump_with(codec.to_json)
    load: Load = copy_any if codec.from_json is None else load_with(codec.from_json)
    return dump, load
