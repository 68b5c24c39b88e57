"""Typed session loads: JSON bytes straight into records, checked in one C pass.

For the modules a load asks for, statekit describes the document it expects
as msgspec types: a Struct per module with exactly its state keys (and its
``__version__``), the mirrors of its fields (:mod:`statekit.values.mirror`), and a
document Struct with the requested module names. msgspec decodes and checks
the whole document in C; generated code builds the records; the usual
:class:`~statekit.state.load.Loader` collects the assignments, and commits them
all or nothing.

This is the fast path for well-formed data only, and it never reports: on any
surprise (a wrong type, a missing or unknown key, an older version, a value
nested too deep, a validator's refusal) :func:`load_typed` returns ``None``
and the caller runs the full load, which handles or reports it with paths.
A key without a mirror (a secret, an overriding module, a ``datetime``) is
decoded as plain JSON and goes through the Loader's own per-key planning.
Shapes where a user's hook or codec would run are left to the full path
entirely, so that user code never runs twice.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs
import msgspec
import orjson

from statekit.values.bounded import bounded, levels
from statekit.values.class_cache import MISSING, TypeCache
from statekit.state.dump import check_modules, converter_of
from statekit.state.foreign import PLAIN_TYPES, SupportsState
from statekit._limits import MAX_DEPTH, ORJSON_PAD
from statekit.state.commit import commit_all
from statekit.state.load import Loader
from statekit.values.mirror import value_mirror
from statekit.values.seam import SEAM
from statekit.state.base import LoadResult, StateBase, is_module, plan_of, state_extras, state_keys, walks_load
from statekit.state.plan import DEFAULT_CONVERTER, FieldPlan
from statekit.state.typed_plan import ChildKey, PlainKey, Planner, Step, TypedKey, compile_planner
from statekit.values.versions import VERSION_KEY, tag

Shape = tuple[Any, ...]


class _Surprise(Exception):
    """The data or the modules are not the common case: take the full path."""


class _NoMirror(Exception):
    """A module of this shape has a key only the full path may load."""


@attrs.define
class TypedDocument:
    """The decoders and planners for one shape of requested modules.

    Attributes:
        decoder: Decodes the whole document into mirrors (what it decodes
            needs the depth pass).
        planners: One per requested module, in the order of the document's fields.
        document: The mirror type ``decoder`` decodes.
        bounded: The same with every ``Any`` bounded, whose types prove the depth
            limit (``None`` when they cannot), once ``bounded_made``.
        deep: A document only ``decoder`` took was loaded: go straight to it.
    """

    decoder: msgspec.json.Decoder[Any]
    planners: tuple[Planner, ...]
    document: type
    bounded: msgspec.json.Decoder[Any] | None = None
    bounded_made: bool = False
    deep: bool = False

    def bounded_decoder(self) -> msgspec.json.Decoder[Any] | None:
        """The bounded decoder, made at its first use (two threads may both make it: the same)."""
        if not self.bounded_made:
            self.bounded = _bounded_decoder(self.document)
            self.bounded_made = True
        return self.bounded


class _Meta(msgspec.Struct, forbid_unknown_fields=True):
    """The metadata :func:`typed_document` accepts unless given another type: a plain session document's."""

    format: Literal[1]


# Held on the class of the first module (a shape dropped with it); at most 256 shapes per
# class (module names are part of a shape, and callers may make many).
_documents = TypeCache("typed documents", keep=256)
_LOCK = threading.Lock()


def typed_document(modules: Mapping[str, SupportsState], meta_key: str) -> TypedDocument | None:
    """The typed decoder for these modules as they are now, or ``None`` when the full path must load them."""
    check_modules(modules)
    found = _shape_of(modules)
    if found is None:
        return None
    shape = (meta_key, found)
    owner = found[0][1][0] if found else None
    cached: TypedDocument | None = _documents.get(shape, owner)
    if cached is not MISSING:
        return cached
    with _LOCK:  # threads of several sessions may meet here
        try:
            made: TypedDocument | None = _make_document(modules, meta_key)
        except _NoMirror:
            made = None
        if _shape_of(modules) != found:
            return None  # the modules changed while their mirror was made: not cached, not used
        _documents.put(shape, owner, made)
    return made


def _shape_of(modules: Mapping[str, SupportsState]) -> Shape | None:
    try:
        return tuple([(name, _shape(module, 1)) for name, module in modules.items()])
    except _Surprise:
        return None


def _shape(module: SupportsState, level: int) -> Shape:
    """What decides a module's mirror: its class, and which of its keys hold modules now."""
    if level >= MAX_DEPTH:
        raise _Surprise  # a cycle of modules: the full path names it
    if not isinstance(module, StateBase):
        raise _Surprise  # a foreign module (AgentScope's): its own load_state_dict() runs, on the full path
    # (an empty __dict__, the usual, holds no extras: no call)
    extras = state_extras(module) if getattr(module, "__dict__", None) else None
    if extras and any(hooks is not None for hooks in extras.values()):
        raise _Surprise  # registered attributes: their hooks are the user's
    held = []
    for plan in plan_of(module).fields:
        value = getattr(module, plan.field.name, None)  # None: a slot no one set yet (init=False)
        # (a plain value, the usual, is told by its type alone: no call)
        held.append(None if type(value) in PLAIN_TYPES or not is_module(value) else _shape(value, level + 1))
    if extras:
        held.extend((name, _shape(getattr(module, name), level + 1)) for name in extras)
    return (type(module), tuple(held))


def _make_document(modules: Mapping[str, SupportsState], meta_key: str) -> TypedDocument:
    spec: list[tuple[str, Any, Any]] = []
    planners: list[Planner] = []
    for index, (name, module) in enumerate(modules.items()):
        struct, planner = _module_mirror(module)
        spec.append((f"m{index}", struct, msgspec.field(name=name)))
        planners.append(planner)
    # Absent (older files), or kept as bytes for decode() to check against the metadata type it is given.
    spec.append(("meta", msgspec.Raw | msgspec.UnsetType, msgspec.field(name=meta_key, default=msgspec.UNSET)))
    # Other keys (modules not asked for) would be skipped unchecked: such documents take the full path.
    document = msgspec.defstruct("Document", spec, forbid_unknown_fields=True)
    return TypedDocument(msgspec.json.Decoder(document), tuple(planners), document)


def _bounded_decoder(document: type) -> msgspec.json.Decoder[Any] | None:
    """A decoder that refuses what nests past ``MAX_DEPTH`` (a value typed ``Any``
    past ``ANY_LEVELS``, too), or ``None`` when the document's types allow deeper."""
    try:
        tp = bounded(document, {})
        return msgspec.json.Decoder(tp) if levels(tp) <= MAX_DEPTH else None
    except RecursionError:  # modules nested near MAX_DEPTH: this walk is deeper than the one that made them
        return None


def _module_mirror(module: SupportsState) -> tuple[Any, Planner]:
    """A module's Struct, and the planner that loads it from one."""
    if not walks_load(module):
        raise _NoMirror  # an overriding (or foreign) module at the top: its own method loads it
    spec: list[tuple[str, Any, Any]] = []
    steps: list[Step] = []
    for index, (name, spec_of_key) in enumerate(state_keys(module).items()):
        attr = f"k{index}"
        tp, how = _key(module, name, spec_of_key)
        spec.append((attr, tp, msgspec.field(name=name)))
        steps.append((name, attr, how))
    version = tag(type(module))
    if version is not None:
        spec.append(("version", Literal[version], msgspec.field(name=VERSION_KEY)))
    struct = msgspec.defstruct(f"{type(module).__name__}State", spec, forbid_unknown_fields=True)
    return struct, compile_planner(tuple(steps), type(module).__qualname__)


def _key(module: StateBase, name: str, spec: Any) -> tuple[Any, TypedKey | ChildKey | PlainKey]:
    """``(msgspec type, how it is planned)`` for one state key."""
    current = getattr(module, name, None)
    if isinstance(current, StateBase):
        if not type(current).__statekit_walks_load__:
            return Any, PlainKey(spec)  # its own load_state_dict() runs at the commit
        struct, planner = _module_mirror(current)
        nullable = isinstance(spec, FieldPlan) and spec.nullable
        return struct | None if nullable else struct, ChildKey(planner, nullable)
    if not isinstance(spec, FieldPlan) or spec.module_type is not None or spec.load_fresh is spec.load_strict:
        raise _NoMirror  # a new module to build, or a user's hook or codec
    conv = converter_of(type(module))
    mirror = None if spec.secret or conv is not DEFAULT_CONVERTER else value_mirror(spec.tp, conv)
    if mirror is None:
        return Any, PlainKey(spec)  # plain JSON, loaded by the Loader's own hooks
    return mirror.tp, TypedKey(mirror, spec.field)


def load_typed(
    typed: TypedDocument, modules: Mapping[str, SupportsState], document: Any, strict: bool
) -> dict[str, LoadResult] | None:
    """Plan and commit a decoded document; ``None`` (nothing changed) when the full path must load it.

    Its metadata must be statekit's plain metadata, or what the caller accepted with :func:`meta_as`.

    Raises:
        StateLoadError: An overriding module's own ``load_state_dict()`` refused
            its state at the commit (as the full path would).
    """
    if isinstance(document.meta, msgspec.Raw) and not meta_as(document, _Meta):
        return None
    loaders = {name: Loader(strict, fresh=True) for name in modules}
    try:
        for index, (name, module) in enumerate(modules.items()):
            assert isinstance(module, StateBase)  # a foreign one takes the full path (see _shape)
            typed.planners[index](loaders[name], module, getattr(document, f"m{index}"), (name,))
    except Exception:  # noqa: BLE001 - a validator or constructor refused: the full path reports it
        return None
    if any(loader.problems for loader in loaders.values()):
        return None
    results = dict(zip(loaders, commit_all(list(loaders.values())), strict=True))
    with _LOCK:
        SEAM.typed_loads += 1
    return results


def typed_loads() -> int:
    """How many loads the typed path committed in this process (``SEAM.typed_loads``): how
    tests see which path a load took."""
    return SEAM.typed_loads


def meta_as(document: Any, meta: type) -> bool:
    """Whether a decoded document's metadata is absent or of the msgspec type ``meta``
    (null is not metadata); if so :func:`load_typed` takes it, and :func:`meta_of` reads it.

    Unless a caller says which metadata it accepts, :func:`load_typed` takes
    statekit's plain metadata only.
    """
    if not isinstance(document.meta, msgspec.Raw):
        return document.meta is msgspec.UNSET or isinstance(document.meta, meta)
    try:
        document.meta = _meta_decoder(meta).decode(document.meta)
    except msgspec.MsgspecError:
        return False
    return True


def meta_of(document: Any) -> Any:
    """A decoded document's metadata, as :func:`meta_as` took it (``None``: absent)."""
    meta = document.meta
    return None if meta is msgspec.UNSET else meta


@functools.lru_cache(maxsize=16)
def _meta_decoder(meta: type) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(meta)


def decode(typed: TypedDocument, raw: bytes, checked: bool | Callable[[], bool] = False) -> Any:
    """The document's mirrors (its metadata as bytes, for :func:`meta_as`), or
    ``None`` when msgspec refuses it or it nests too deep (the full path says why).

    Args:
        typed: The decoders for the requested modules.
        raw: The document's bytes.
        checked: These exact bytes passed an exact depth check before (a
            session wrote or loaded them with a built-in codec): skip it, and
            the fallback to the full path for data orjson cannot write. A
            callable is asked only when the bounded decoder did not take the
            document (a large document's compare with the bytes last seen costs
            more than nothing).
    """
    SEAM.typed_decodes += 1
    bounded = None if checked is True or typed.deep or len(raw) < SEAM.bounded_from else typed.bounded_decoder()
    if bounded is not None:
        with contextlib.suppress(msgspec.MsgspecError, RecursionError, UnicodeDecodeError):
            return bounded.decode(raw)  # its types prove the depth limit: no pass
    try:
        document = typed.decoder.decode(raw)
    except (msgspec.MsgspecError, RecursionError, UnicodeDecodeError):
        return None
    if not (checked if isinstance(checked, bool) else checked()):
        states = [getattr(document, f"m{index}") for index in range(len(typed.planners))]
        if _too_deep(states):
            return None
    if bounded is not None:
        typed.deep = True  # an Any nested past ANY_LEVELS, within the limit: likely again
    return document


def _too_deep(states: list[Any]) -> bool:
    """Whether the module states, one level below the document's root, nest past
    ``MAX_DEPTH`` (one C pass; unsure means yes).

    Only values typed ``Any`` can nest without bound; orjson walks them all,
    each mirror Struct written as the list of its fields (one level, as its object).
    """
    SEAM.depth_passes += 1
    padded: Any = states  # in place of the document: its states sit one level below
    for _ in range(ORJSON_PAD):
        padded = [padded]
    try:
        orjson.dumps(padded, default=_fields_list)
    except orjson.JSONEncodeError:
        return True  # too deep, or data orjson cannot write (a huge integer): the full path decides
    return False


def _fields_list(struct: Any) -> list[Any]:
    """A mirror Struct's fields, as a list: orjson counts a tuple that ``default``
    returns one level short when nothing nests inside it (a record of scalars at
    the bottom of a document one level too deep would pass)."""
    return list(msgspec.structs.astuple(struct))


__all__ = ["TypedDocument", "decode", "load_typed", "meta_as", "meta_of", "typed_document", "typed_loads"]
