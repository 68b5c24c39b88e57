"""``StateModule`` and ``@stateful``: declaring state, dumping it, loading it back.

Loading runs in two phases so that it is all or nothing: the *plan* phase walks
the whole tree, builds every new value and collects every problem; only when
there is none does the *commit* phase assign the new values. A failed load
leaves every object exactly as it was.
"""

from __future__ import annotations

import dis
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Self, TypeVar, dataclass_transform, overload

import attr
import attrs
import cattrs

from statekit._convert import lenient
from statekit._problems import dump_problems, only_extra_keys, problems_of, unknown_key
from statekit._cycles import TooDeep, module_problem, value_problem
from statekit._gc import paused_gc
from statekit._fields import METADATA_KEY, FieldCodec, state_field
from statekit._overrides import Deferred, defer, dump_override, join_paths, run_overrides
from statekit._plan import (
    DEFAULT_CONVERTER,
    ClassPlan,
    FieldPlan,
    any_hooks,
    check_record,
    make_plan,
    module_class,
)
from statekit._json import JSONValueError, copy_loose, describe, with_article
from statekit._secrets import hidden, open_secret, seal_into
from statekit._limits import MAX_DEPTH, depth_message, path_too_deep, too_deep
from statekit._versions import VERSION_KEY, Migration, define_versions, tag, upgrade
from statekit.errors import (
    PathSegment,
    SecretError,
    Problem,
    StateAttributeError,
    StateDefinitionError,
    StatekitError,
    StateDumpError,
    StateLoadError,
    format_path,
)

T = TypeVar("T")
Path = tuple[PathSegment, ...]

_LOG = logging.getLogger("statekit")


@attrs.frozen
class HeldList:
    """An append-only list met by a dump: whose it is, how it encodes, where it goes.

    Attributes:
        owner: The module holding it.
        plan: The field's plan.
        value: The live list.
        path: The state keys from the document's root to the list.
        out: The dumped state dict where its encoding belongs (under ``plan.name``).
    """

    owner: object
    plan: FieldPlan
    value: list[Any]
    path: Path
    out: dict[str, Any]


Held = list[HeldList]
_REGISTERED = "__statekit_registered__"
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


class StateModule:
    """Base class of objects whose state can be saved and loaded.

    State is: the fields declared with :func:`~statekit.state_field` in a
    ``@stateful`` subclass, every attribute that holds a ``StateModule``
    (nested state, found automatically), and attributes registered with
    :meth:`register_state`.
    """

    __statekit_plan__: ClassVar[ClassPlan | None] = _EMPTY_PLAN
    __statekit_undecorated__: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse ``state_field()`` in a subclass that ``@stateful`` will not process."""
        super().__init_subclass__(**kwargs)
        if _STATEFUL.active or not _declares_state_fields(cls):
            return
        cls.__statekit_undecorated__ = True  # checked again by __new__, for @dataclass
        if "__attrs_attrs__" in cls.__dict__ or _no_decorator_follows():
            raise StateDefinitionError(_undecorated_message(cls))

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        if cls.__statekit_undecorated__:
            raise StateDefinitionError(_undecorated_message(cls))
        return super().__new__(cls)

    def register_state(
        self,
        attr_name: str,
        custom_to_json: Callable[[Any], Any] | None = None,
        custom_from_json: Callable[[Any], Any] | None = None,
    ) -> None:
        """Make an existing attribute part of the state, imperatively.

        Args:
            attr_name: The attribute, which must already be set.
            custom_to_json: Turns the value into JSON data.
            custom_from_json: Builds the value back from JSON data.

        Raises:
            StateAttributeError: The attribute does not exist (also an ``AttributeError``).
            StateDefinitionError: Without ``custom_to_json``, its value is not
                JSON data (also a ``TypeError``, as in AgentScope).
        """
        if not hasattr(self, attr_name):
            raise StateAttributeError(f"{type(self).__qualname__} has no attribute {attr_name!r} to register")
        if custom_to_json is None:
            _check_registered(self, attr_name)
        registry = self.__dict__.setdefault(_REGISTERED, {})
        registry[attr_name] = any_hooks(FieldCodec(custom_to_json, custom_from_json))

    def __delattr__(self, name: str) -> None:
        """Delete an attribute; a registered one leaves the state with it."""
        super().__delattr__(name)
        registry = getattr(self, "__dict__", {}).get(_REGISTERED)
        if registry is not None:
            registry.pop(name, None)

    def state_dict(self) -> dict[str, Any]:
        """Return the state as plain JSON data: a snapshot sharing nothing with ``self``.

        Called through ``super()`` by a subclass that overrides it, a registered
        attribute that is not JSON data is returned as it is: the override may
        replace it, and statekit checks the override's result.

        Raises:
            StateDumpError: A value is not JSON data, a ``to_json`` failed, or
                the state holds itself or nests deeper than ``MAX_DEPTH``.
        """
        with paused_gc():  # building many containers would run the collector for nothing
            state = _dump_root(self, (), lax=type(self).state_dict is not StateModule.state_dict)
        if too_deep(state):
            raise StateDumpError([Problem(path_too_deep(state) or (), depth_message())])
        return state

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> LoadResult:
        """Load state produced by :meth:`state_dict`, all or nothing.

        Args:
            state: The data to load.
            strict: Require every declared key and reject unknown ones, at every
                depth. When false, missing keys keep their values and unknown
                keys are ignored; both are reported in the result.

        Returns:
            What was missing or ignored (empty lists after a strict load).

        Raises:
            StateLoadError: Every problem found; nothing was changed.
        """
        refuse_too_deep(state)
        loader = _Loader(strict)
        with paused_gc():
            loader.plan(self, state, ())
            return loader.commit()


class _StatefulFlag(threading.local):
    active = False


_STATEFUL = _StatefulFlag()
"""Set while ``@stateful`` builds a class, so that ``__init_subclass__`` lets it be."""


def _declares_state_fields(cls: type) -> bool:
    """Whether the class body (or the attrs class made from it) holds ``state_field()``s."""
    values = list(cls.__dict__.values()) + list(cls.__dict__.get("__attrs_attrs__", ()))
    return any(METADATA_KEY in (getattr(v, "metadata", None) or {}) for v in values)


def _no_decorator_follows() -> bool:
    """Whether the ``class`` statement that is creating the class applies no decorator.

    ``__init_subclass__`` runs inside the statement (its frame is two up); with no
    decorator, the next instruction stores the class under its name.
    """
    frame = sys._getframe(2)  # noqa: SLF001 - the frame of the class statement
    following = (i for i in dis.get_instructions(frame.f_code) if i.offset > frame.f_lasti and i.opname != "CACHE")
    step = next(following, None)
    return step is not None and step.opname.startswith("STORE_")


def _undecorated_message(cls: type) -> str:
    return (
        f"{cls.__qualname__} declares state_field() attributes but is not @stateful: "
        "add @stateful above the class (not @attrs.define or @dataclass), or nothing is saved"
    )


def _check_registered(module: StateModule, name: str) -> None:
    value = getattr(module, name)
    if isinstance(value, StateModule):
        return
    try:
        copy_loose(value)
    except JSONValueError as exc:
        raise StateDefinitionError(
            f"{type(module).__qualname__}.{name} is not JSON data ({exc}); "
            "register it with custom_to_json and custom_from_json"
        ) from None


def _plan_of(obj: object) -> ClassPlan:
    plan: ClassPlan | None = type(obj).__statekit_plan__  # type: ignore[attr-defined]
    return plan if plan is not None else _late_plan(type(obj))


def _late_plan(cls: type) -> ClassPlan:
    """Plan a class whose annotations named classes defined after it."""
    plan = make_plan(cls, cls.__statekit_converter__, StateModule)  # type: ignore[attr-defined]
    cls.__statekit_plan__ = plan  # type: ignore[attr-defined]
    return plan


def _extras(obj: StateModule) -> dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]] | None]:
    """Undeclared state: registered attributes and attributes holding a module."""
    attrs_dict = getattr(obj, "__dict__", None)
    if not attrs_dict:
        return {}
    registry = attrs_dict.get(_REGISTERED, {})
    out: dict[str, Any] = {}
    for name, value in attrs_dict.items():
        if name in registry:
            out[name] = registry[name]
        elif isinstance(value, StateModule):
            out[name] = None
    for name in registry:
        if name not in out:
            out[name] = registry[name]  # a registered slot (a declared attrs field)
    return out


def _dump_root(
    module: StateModule, path: Path, live: bool = False, lax: bool = False, held: Held | None = None
) -> dict[str, Any]:
    try:
        return _dump(module, path, live, lax, held)
    except TooDeep as exc:
        raise StateDumpError([module_problem(module, path, exc.path)]) from None


def refuse_too_deep(data: Any) -> None:
    """Refuse data nested past ``MAX_DEPTH`` before any recursive walk meets it.

    Raises:
        StateLoadError: Naming the limit and the first path past it.
    """
    if too_deep(data):
        raise StateLoadError([Problem(path_too_deep(data) or (), depth_message())])


def _dump(obj: StateModule, path: Path, live: bool = False, lax: bool = False, held: Held | None = None) -> dict[str, Any]:
    """The state of ``obj``; ``live`` shares validated JSON values instead of
    copying them (for data that is encoded at once, see :func:`dump_many`);
    ``lax`` passes registered values that are not JSON through (see ``state_dict``);
    ``held`` collects append-only lists instead of encoding them (see :func:`dump_many`)."""
    if len(path) >= MAX_DEPTH:
        raise TooDeep(path)  # a cycle of modules, or a chain too long to save
    version = tag(type(obj))
    out: dict[str, Any] = {} if version is None else {VERSION_KEY: version}
    for plan in _plan_of(obj).fields:
        value = getattr(obj, plan.name)
        dump = plan.encode if live else plan.dump
        if isinstance(value, StateModule):
            out[plan.name] = _dump_child(value, (*path, plan.name), live, held)
        elif plan.secret:
            seal_into(out, plan.name, plan.dump, value, (*path, plan.name))  # type: ignore[arg-type]
        elif held is not None and plan.append_only and type(value) is list:
            held.append(HeldList(obj, plan, value, (*path, plan.name), out))
            out[plan.name] = None  # filled in by the caller, or left out of a delta
        elif live and dump is not None:
            out[plan.name] = _encode_value(obj, plan, value, (*path, plan.name))
        elif dump is not None:
            out[plan.name] = _dump_value(obj, dump, value, (*path, plan.name), plan.tp)
        elif plan.is_state or plan.module_type is not None:
            out[plan.name] = None  # an optional nested module that is not set
    for name, hooks in _extras(obj).items():
        value = getattr(obj, name)
        if isinstance(value, StateModule):
            out[name] = _dump_child(value, (*path, name), live, held)
        elif hooks is not None:
            out[name] = _dump_registered(obj, hooks[0], value, (*path, name), lax)
    return out


def _dump_top(module: StateModule, path: Path, live: bool = False, held: Held | None = None) -> dict[str, Any]:
    """A module given to a session: its own ``state_dict()`` when its class overrides it."""
    if type(module).state_dict is StateModule.state_dict:
        return _dump_root(module, path, live, held=held)
    return dump_override(module, path)


def _dump_child(module: StateModule, path: Path, live: bool = False, held: Held | None = None) -> dict[str, Any]:
    """A module's state, through its own ``state_dict()`` when its class overrides it."""
    if type(module).state_dict is StateModule.state_dict:
        return _dump(module, path, live, held=held)
    return dump_override(module, path)


def _dump_registered(owner: StateModule, dump: Callable[[Any], Any], value: Any, path: Path, lax: bool) -> Any:
    if lax and dump is copy_loose:
        try:
            return copy_loose(value)
        except JSONValueError:
            return value  # for the overriding state_dict() to replace; its result is checked
    return _dump_value(owner, dump, value, path, Any)


def encode_held(held: HeldList, start: int = 0) -> Any:
    """Encode a held append-only list, from item ``start`` on, as a save would."""
    return _encode_value(held.owner, held.plan, held.value[start:] if start else held.value, held.path)


def _encode_value(owner: object, plan: FieldPlan, value: Any, path: Path) -> Any:
    """A live hook raises a bare error; the copying hook then says what is wrong, and where."""
    assert plan.encode is not None and plan.dump is not None
    try:
        return plan.encode(value)
    except Exception:  # noqa: BLE001 - the copying hook reports it
        return _dump_value(owner, plan.dump, value, path, plan.tp)


def _dump_value(owner: object, dump: Callable[[Any], Any], value: Any, path: Path, tp: Any) -> Any:
    try:
        return dump(value)
    except RecursionError:
        raise StateDumpError([value_problem(value, path)]) from None
    except Exception as exc:
        found = [] if tp is Any else dump_problems(_converter_of(type(owner)), tp, value, path)
        problems = [Problem(p, m) for p, m in found or problems_of(exc, path)]
        raise StateDumpError(problems) from exc


def _converter_of(cls: type) -> cattrs.Converter:
    return getattr(cls, "__statekit_converter__", None) or DEFAULT_CONVERTER


class _Loader:
    """Collects new values and problems (plan), then assigns them (commit)."""

    def __init__(self, strict: bool, fresh: bool = False) -> None:
        self.strict = strict
        self.fresh = fresh
        self.problems: list[Problem] = []
        self.assignments: list[tuple[object, str, Any]] = []
        self.missing: list[str] = []
        self.unexpected: list[str] = []
        self.deferred: list[Deferred] = []

    def problem(self, path: Path, message: str) -> None:
        self.problems.append(Problem(path, message))

    def plan_child(self, module: StateModule, state: Any, path: Path) -> None:
        """Plan a module's load, or defer it to its own ``load_state_dict()`` when overridden."""
        if type(module).load_state_dict is StateModule.load_state_dict:
            self.plan(module, state, path)
            return
        item = defer(module, state, path, self.strict, self.problems)
        if item is not None:
            self.deferred.append(item)

    def plan(self, module: StateModule, state: Any, path: Path) -> None:
        """Plan the load of one module (and, recursively, its children)."""
        if not isinstance(state, Mapping):
            self.problem(path, f"expected an object of state, got {describe(state)}")
            return
        state = upgrade(type(module), state, path)
        keys = _state_keys(module)
        for name, spec in keys.items():
            if name in state:
                self._plan_key(module, name, spec, state[name], (*path, name))
            elif self.strict and not _is_secret(spec):
                self.problem((*path, name), "required key is missing")
            else:
                self.missing.append(format_path((*path, name)))
        for name in state:
            if name not in keys:
                self._unknown((*path, name), keys)

    def _unknown(self, path: Path, known: Iterable[str]) -> None:
        if self.strict:
            self.problem(path, unknown_key(str(path[-1]), known))
        else:
            self.unexpected.append(format_path(path))

    def _plan_key(self, module: StateModule, name: str, spec: Any, data: Any, path: Path) -> None:
        if _is_secret(spec):
            self._plan_secret(module, spec, data, path)
            return
        current = getattr(module, name)
        if data is None and isinstance(spec, FieldPlan) and spec.nullable:
            self.assignments.append((module, name, None))
        elif isinstance(current, StateModule):
            self.plan_child(current, data, path)
        elif isinstance(spec, FieldPlan):
            self._plan_field(module, spec, data, path)
        elif spec is not None:
            self._plan_value(module, name, spec[1], data, path)

    def _plan_secret(self, module: StateModule, plan: FieldPlan, data: Any, path: Path) -> None:
        try:
            data = open_secret(data)
        except SecretError as exc:
            self.problem(path, str(exc))
            return
        before = len(self.problems)
        self._plan_field(module, plan, data, path)
        hidden(self.problems, before, path)

    def _plan_field(self, module: StateModule, plan: FieldPlan, data: Any, path: Path) -> None:
        if plan.module_type is not None:
            self._plan_new_module(module, plan, data, path)
            return
        load = plan.load_strict if self.strict else plan.load_lenient
        if self.strict and self.fresh:
            load = plan.load_fresh
        assert load is not None and plan.load_strict is not None
        if not self.strict:
            load = self._lenient_load(plan.load_strict, load, data, path)
        new = self._plan_value(module, plan.name, load, data, path)
        if new is not _FAILED and plan.field.validator is not None:
            self._validate(module, plan.field, new, path)

    def _lenient_load(self, strict: Callable[[Any], Any], loose: Callable[[Any], Any], data: Any, path: Path) -> Callable[[Any], Any]:
        """Report unknown record keys before ignoring them (strict first: it is the common case)."""
        try:
            value = strict(data)
        except Exception as exc:  # noqa: BLE001 - re-raised by the loose hook if real
            if only_extra_keys(exc):
                self.unexpected.extend(format_path(p) for p, _ in problems_of(exc, path))
            return loose
        return lambda _: value

    def _plan_value(self, module: object, name: str, load: Callable[[Any], Any], data: Any, path: Path) -> Any:
        try:
            new = load(data)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a problem
            self.problems.extend(Problem(p, m) for p, m in problems_of(exc, path))
            return _FAILED
        self.assignments.append((module, name, new))
        return new

    def _plan_new_module(self, module: StateModule, plan: FieldPlan, data: Any, path: Path) -> None:
        """The field names a module class but holds ``None``: build one (or keep ``None``)."""
        if data is None:
            self.assignments.append((module, plan.name, None))
            return
        assert plan.module_type is not None
        before = len(self.problems)
        new = _build_module(plan.module_type, data, self, path, fill_defaults=False)
        if len(self.problems) == before:
            self.assignments.append((module, plan.name, new))

    def _validate(self, module: object, field: attrs.Attribute[Any], value: Any, path: Path) -> None:
        try:
            field.validator(module, field, value)  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - a validator's refusal is a problem
            self.problems.extend(Problem(p, m) for p, m in problems_of(exc, path))

    def commit(self) -> LoadResult:
        """Raise every problem, or assign every planned value."""
        return _commit([self])[0]


def _commit(loaders: list[_Loader]) -> list[LoadResult]:
    """Run the deferred overrides of every loader (restored together if one
    raises), then assign every planned value."""
    problems = [p for loader in loaders for p in loader.problems]
    if problems:
        raise StateLoadError(problems)
    if any(loader.deferred for loader in loaders):
        _run_deferred(loaders)
    for loader in loaders:
        for target, name, value in loader.assignments:
            object.__setattr__(target, name, value)
    ignored = [key for loader in loaders for key in loader.unexpected]
    if ignored:
        _LOG.warning("a non-strict load ignored %d unknown key(s): %s", len(ignored), ", ".join(ignored))
    return [LoadResult(loader.missing, loader.unexpected) for loader in loaders]


def _run_deferred(loaders: list[_Loader]) -> None:
    owners = [loader for loader in loaders for _ in loader.deferred]
    items = [item for loader in loaders for item in loader.deferred]
    for loader, item, result in zip(owners, items, run_overrides(items), strict=True):
        if result is not None:
            loader.missing.extend(join_paths(item.path, result.missing_keys))
            loader.unexpected.extend(join_paths(item.path, result.unexpected_keys))


_FAILED = object()


def _state_keys(module: StateModule) -> dict[str, Any]:
    """Every state key of ``module`` with what loads it, in dump order."""
    keys: dict[str, Any] = {}
    for plan in _plan_of(module).fields:
        if plan.is_state or plan.module_type is not None or isinstance(getattr(module, plan.name), StateModule):
            keys[plan.name] = plan
    keys.update(_extras(module))
    return keys


def dump_many(
    modules: Mapping[str, StateModule], *, live: bool = False, held: Held | None = None
) -> dict[str, Any]:
    """``{name: module.state_dict()}``, with error paths that start at the name.

    Args:
        modules: The modules, by name.
        live: Validate JSON-typed values but share them with the live objects
            instead of copying them. Only for a caller that encodes the result
            at once, in the same thread, before anything can change the objects.
        held: Collects every append-only list (with where it goes) instead of
            encoding it; its place in the result holds ``None`` until the
            caller fills it in (a session saving only new items).

    Raises:
        StatekitError: A value is not a state module.
        StateDumpError: A module's state is not JSON data.
    """
    check_modules(modules)
    return {name: _dump_top(module, (name,), live, held) for name, module in modules.items()}


def check_modules(modules: Mapping[str, object]) -> None:
    """Refuse anything but ``StateModule`` instances, naming the keyword argument.

    Raises:
        StatekitError: ``name=`` is a class, a value record or any other value.
    """
    for name, value in modules.items():
        if not isinstance(value, StateModule):
            raise StatekitError(f"{name}= must be a StateModule instance, got {_what(value)}")


def _what(value: object) -> str:
    if isinstance(value, type):
        hint = "; pass an instance" if issubclass(value, StateModule) else ""
        return f"the class {value.__qualname__}{hint}"
    if attrs.has(type(value)):
        return f"{type(value).__qualname__}, a value record (its class does not subclass StateModule)"
    return with_article(type(value).__name__) if type(value) in (dict, list) else describe(value)


def load_many(
    modules: Mapping[str, StateModule], document: Mapping[str, Any], *, strict: bool = True, fresh: bool = False
) -> dict[str, LoadResult]:
    """Load several modules from one document, all or nothing.

    Args:
        modules: The modules to load, by their name in the document.
        document: ``{name: state}``; keys nobody asked for are ignored.
        strict: As for :meth:`StateModule.load_state_dict`; a requested module
            missing from the document is a problem when strict, else reported.
        fresh: ``document`` comes straight from the JSON codec's decoder and nobody
            else holds it: its JSON values are checked and kept, not copied.

    Returns:
        One :class:`LoadResult` per module.

    Raises:
        StateLoadError: Every problem in every module; nothing was changed.
    """
    check_modules(modules)
    loaders = {name: _Loader(strict, fresh) for name in modules}
    for name, module in modules.items():
        if name in document:
            loaders[name].plan_child(module, document[name], (name,))
        elif strict:
            loaders[name].problem((name,), "module is missing from the session")
        else:
            loaders[name].missing.append(name)
    return dict(zip(loaders, _commit(list(loaders.values())), strict=True))


def build(cls: type[T], data: Any, *, strict: bool = True, fill_defaults: bool = True) -> T:
    """Build a new instance of a ``@stateful`` class (or any attrs class) from JSON data.

    Missing fields take their defaults; a missing required field is a problem,
    and so is an unknown key when ``strict``. With ``fill_defaults=False`` a
    module follows the load rules instead: when ``strict``, every state key
    must be there (as in a strict session load).

    Raises:
        StateLoadError: Every problem found.
    """
    refuse_too_deep(data)
    loader = _Loader(strict)
    if issubclass(cls, StateModule):
        obj: T = _build_module(cls, data, loader, (), fill_defaults=fill_defaults)
    else:
        obj = _build_record(cls, data, loader)
    loader.commit()
    return obj


def _build_record(cls: type, data: Any, loader: _Loader) -> Any:
    conv = _converter_of(cls)
    try:
        return (conv if loader.strict else lenient(conv)).structure(data, cls)
    except Exception as exc:  # noqa: BLE001 - reported with paths
        loader.problems.extend(Problem(p, m) for p, m in problems_of(exc, ()))
        return None


def _build_module(cls: type, data: Any, loader: _Loader, path: Path, *, fill_defaults: bool) -> Any:
    """A new module from ``data``; ``fill_defaults`` lets missing keys take defaults
    even when strict (configs); a load into ``None`` follows the load rules."""
    if not isinstance(data, Mapping):
        loader.problem(path, f"expected an object of state, got {describe(data)}")
        return None
    data = upgrade(cls, data, path)
    if getattr(cls, "load_state_dict", None) is not StateModule.load_state_dict:
        return _build_by_override(cls, data, loader, path)
    plan = _plan_of_class(cls)
    kwargs: dict[str, Any] = {}
    for field_plan in plan.fields:
        _build_field(field_plan, data, loader, (*path, field_plan.name), kwargs, fill_defaults)
    for name in data:
        if name not in plan.by_name or not _is_state_plan(plan.by_name[name]):
            known = [p.name for p in plan.fields if _is_state_plan(p)]
            loader._unknown((*path, name), known)  # noqa: SLF001 - same module
    if loader.problems:
        return None
    try:
        return cls(**kwargs)
    except Exception as exc:  # noqa: BLE001 - a validator or __attrs_post_init__ refused
        loader.problems.extend(Problem(p, m) for p, m in problems_of(exc, path))
        return None


def overrides_load(cls: object) -> bool:
    """Whether ``cls`` is a module class with its own ``load_state_dict()`` (built and loaded through it)."""
    return isinstance(cls, type) and issubclass(cls, StateModule) and cls.load_state_dict is not StateModule.load_state_dict


def _build_by_override(cls: type, data: Mapping[str, Any], loader: _Loader, path: Path) -> Any:
    """Build with no arguments, then load through the class's own ``load_state_dict()``."""
    try:
        module = cls()
    except Exception as exc:  # noqa: BLE001 - reported with the path
        message = f"{cls.__qualname__}() raised {type(exc).__name__}: {exc} (an overriding load_state_dict() needs one)"
        loader.problem(path, message)
        return None
    item = defer(module, data, path, loader.strict, loader.problems)
    if item is not None:
        item.fresh = True
        loader.deferred.append(item)
    return module


def _plan_of_class(cls: type) -> ClassPlan:
    plan: ClassPlan | None = cls.__statekit_plan__  # type: ignore[attr-defined]
    return plan if plan is not None else _late_plan(cls)


def _is_secret(spec: Any) -> bool:
    return isinstance(spec, FieldPlan) and spec.secret


def _is_state_plan(plan: FieldPlan) -> bool:
    return plan.is_state or plan.module_type is not None


def _build_field(
    plan: FieldPlan, data: Mapping[str, Any], loader: _Loader, path: Path, kwargs: dict[str, Any], fill_defaults: bool
) -> None:
    name = plan.name
    if not _is_state_plan(plan) or name not in data:
        _missing_field(plan, loader, path, fill_defaults)
        return
    if plan.module_type is not None:
        value = None
        if data[name] is not None:
            value = _build_module(plan.module_type, data[name], loader, path, fill_defaults=fill_defaults)
    else:
        load = plan.load_strict if loader.strict else plan.load_lenient
        assert load is not None
        try:
            value = load(open_secret(data[name]) if plan.secret else data[name])
        except SecretError as exc:
            loader.problem(path, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - reported with its path
            problems = problems_of(exc, path) if not plan.secret else [(path, "not a valid value for this secret field (details hidden)")]
            loader.problems.extend(Problem(p, m) for p, m in problems)
            return
    kwargs[plan.field.alias or name] = value


def _missing_field(plan: FieldPlan, loader: _Loader, path: Path, fill_defaults: bool) -> None:
    required = plan.field.default is attrs.NOTHING and plan.field.init
    if not _is_state_plan(plan) or fill_defaults or plan.secret:
        if required:
            loader.problem(path, "required key is missing")
    elif loader.strict or required:
        loader.problem(path, "required key is missing")
    else:
        loader.missing.append(format_path(path))


def _resolve(cls: type, localns: Mapping[str, Any]) -> None:
    """Resolve string annotations now (cattrs reads ``field.type``), if possible."""
    try:
        attrs.resolve_types(cls, localns=dict(localns))
    except NameError:
        pass  # a class defined later: resolved when first used


def _plan_now_or_later(cls: type, converter: cattrs.Converter | None) -> ClassPlan | None:
    try:
        return make_plan(cls, converter, StateModule)
    except NameError:
        return None  # a forward reference to a class not yet defined: plan on first use


@overload
def stateful(cls: type[T], /) -> type[T]: ...
@overload
def stateful(
    *,
    kw_only: bool = False,
    eq: bool = True,
    repr: bool = True,
    frozen: bool = False,
    converter: cattrs.Converter | None = None,
    version: int = 1,
    migrations: Mapping[int, Migration] | None = None,
) -> Callable[[type[T]], type[T]]: ...
@dataclass_transform(field_specifiers=(state_field, attrs.field, attr.attrib, attr.ib))
def stateful(
    cls: type[T] | None = None,
    /,
    *,
    kw_only: bool = False,
    eq: bool = True,
    repr: bool = True,
    frozen: bool = False,
    converter: cattrs.Converter | None = None,
    version: int = 1,
    migrations: Mapping[int, Migration] | None = None,
) -> type[T] | Callable[[type[T]], type[T]]:
    """Make a class an attrs class whose ``state_field()`` attributes are state.

    A ``@stateful`` class that subclasses :class:`StateModule` is a state module
    (``state_dict`` / ``load_state_dict``); any other is a typed value record
    that modules hold and that :func:`~statekit.from_config` builds.

    Args:
        cls: The class, when used bare (``@stateful``).
        kw_only: Make every constructor argument keyword-only.
        eq: Generate ``__eq__``.
        repr: Generate ``__repr__``.
        frozen: Make instances immutable (value records only: modules load in place).
        converter: A cattrs converter for this class's value fields (see
            :func:`statekit.make_converter`).
        version: The version of the class's state (an int >= 1). From 2 on,
            the state carries ``"__version__": version``; data without it is
            version 1.
        migrations: For every older version N, a function turning plain
            state of version N into state of version N + 1 (docs/versions.md).

    Raises:
        StateDefinitionError: A state field's type cannot be saved or loaded,
            named with the field; or the version or migrations are wrong (a
            step missing, a migration for a version >= ``version``).
    """

    localns = sys._getframe(1).f_locals  # noqa: SLF001 - for classes defined in functions

    def wrap(cls: type[T]) -> type[T]:
        if frozen and issubclass(cls, StateModule):
            raise StatekitError(f"{cls.__qualname__}: a StateModule cannot be frozen; it is loaded in place")
        _STATEFUL.active = True
        try:
            new = attrs.define(cls, kw_only=kw_only, eq=eq, repr=repr, frozen=frozen, slots=True)
        finally:
            _STATEFUL.active = False
        if issubclass(new, StateModule):
            new.__statekit_undecorated__ = False
        define_versions(new, version, migrations)
        new.__statekit_converter__ = converter  # type: ignore[attr-defined]
        new.__statekit_localns__ = dict(localns)  # type: ignore[attr-defined]
        _resolve(new, localns)
        if issubclass(new, StateModule):
            new.__statekit_plan__ = _plan_now_or_later(new, converter)
        else:
            check_record(new, converter)
        return new

    return wrap if cls is None else wrap(cls)


__all__ = ["LoadResult", "StateModule", "build", "dump_many", "load_many", "module_class", "stateful"]
