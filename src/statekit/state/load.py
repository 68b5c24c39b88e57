"""Loading state, all or nothing: plan every new value and problem, then commit.

The *plan* phase walks the whole tree, builds every new value and collects
every problem; only when there is none does the *commit* phase assign the new
values (running overriding ``load_state_dict()`` methods first, restored
together if one raises). A failed load leaves every object exactly as it was.
:func:`build` makes new instances from data (configs, the command line);
:mod:`statekit.state.commit` holds what a plan collects and commits it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import attrs

from statekit._limits import depth_message, path_too_deep, too_deep
from statekit.errors import PathSegment, Problem, SecretError, StateLoadError, StateVersionError, format_path
from statekit.state.base import LoadResult, StateBase, class_plan, is_module, state_extras, state_keys, walks_load
from statekit.state.commit import FAILED, Pending, commit_all
from statekit.state.dump import check_modules, converter_of
from statekit.state.flags import check_flag
from statekit.state.foreign import SupportsState
from statekit.state.overrides import defer
from statekit.state.plan import ClassPlan, FieldPlan
from statekit.state.secret_fields import holds_secrets
from statekit.values.converter import lenient
from statekit.values.plain import describe
from statekit.values.problems import problems_of
from statekit.values.secrets import HIDDEN_BUILD, hidden, hidden_version_error, open_secret
from statekit.values.versions import is_older, upgrade

T = TypeVar("T")
Path = tuple[PathSegment, ...]



def refuse_too_deep(data: Any) -> None:
    """Refuse data nested past ``MAX_DEPTH`` before any recursive walk meets it.

    Raises:
        StateLoadError: Naming the limit and the first path past it.
    """
    if too_deep(data):
        raise StateLoadError([Problem(path_too_deep(data) or (), depth_message())])


class Loader(Pending):
    """Plans a load: walks the data against the modules, collecting new values and problems (then commits them)."""

    def plan_child(self, module: SupportsState, state: Any, path: Path) -> None:
        """Plan a module's load, or defer it to its own ``load_state_dict()`` when overridden (or foreign)."""
        if walks_load(module):
            self.plan(module, state, path)
            return
        item = defer(module, state, path, self.strict, self.problems)
        if item is not None:
            self.deferred.append(item)

    def plan(self, module: StateBase, state: Any, path: Path) -> None:
        """Plan the load of one module (and, recursively, its children)."""
        self.paths[id(module)] = path
        if not isinstance(state, Mapping):
            self.problem(path, f"expected an object of state, got {describe(state)}")
            return
        if self.fresh and is_older(type(module), state):
            with self.copying():
                self._plan_keys(module, upgrade(type(module), state, path), path)
            return
        self._plan_keys(module, upgrade(type(module), state, path), path)

    @contextlib.contextmanager
    def copying(self) -> Iterator[None]:
        """Plan as for a caller's dict within the block (of a fresh load): a migration's
        output is not the decoder's, so it (and all below it) is checked and copied."""
        self.fresh = False
        try:
            yield
        finally:
            self.fresh = True

    def _plan_keys(self, module: StateBase, state: Mapping[str, Any], path: Path) -> None:
        keys = state_keys(module)
        for name, spec in keys.items():
            if name in state:
                self.plan_key(module, name, spec, state[name], (*path, name))
            elif self.strict and not _is_secret(spec):
                self.problem((*path, name), "required key is missing")
            else:
                self.missing.append(format_path((*path, name)))
        for name in state:
            if name not in keys:
                self.unknown((*path, name), keys)

    def plan_key(self, module: StateBase, name: str, spec: Any, data: Any, path: Path) -> None:
        if _is_secret(spec):
            self._plan_secret(module, spec, data, path)
            return
        current = getattr(module, name, None)
        if data is None and isinstance(spec, FieldPlan) and spec.nullable:
            self.assignments.append((module, name, None))
        elif is_module(current):
            self.plan_child(current, data, path)
        elif isinstance(spec, FieldPlan):
            self._plan_field(module, spec, data, path)
        elif spec is not None:
            self.plan_value(module, name, spec[1], data, path)

    def _plan_secret(self, module: StateBase, plan: FieldPlan, data: Any, path: Path) -> None:
        try:
            data = open_secret(data)
        except SecretError as exc:
            self.problem(path, str(exc))
            return
        marks = len(self.problems), len(self.unexpected)
        failed = None
        try:
            self._plan_field(module, plan, data, path)
        except StateVersionError as exc:  # its reason may quote the value (a migration's error)
            failed = hidden_version_error(exc)
        if failed is not None:  # raised outside the handler: the error's context does not keep the reason
            del data
            raise failed
        hidden(self.problems, marks[0], path)
        self.hide_unexpected(marks[1], path)

    def _plan_field(self, module: StateBase, plan: FieldPlan, data: Any, path: Path) -> None:
        if plan.module_type is not None:
            self._plan_new_module(module, plan, data, path)
            return
        load = plan.load_strict if self.strict else plan.load_lenient
        if self.strict and self.fresh:
            load = plan.load_fresh
        assert load is not None and plan.load_strict is not None
        if not self.strict:
            load = self.lenient_load(plan.load_strict, load, data, path)
        new = self.plan_value(module, plan.name, load, data, path)
        if new is not FAILED and plan.field.validator is not None:
            self.validate(module, plan.field, new, path)

    def _plan_new_module(self, module: StateBase, plan: FieldPlan, data: Any, path: Path) -> None:
        """The field names a module class but holds ``None``: build one (or keep ``None``)."""
        if data is None:
            self.assignments.append((module, plan.name, None))
            return
        assert plan.module_type is not None
        before = len(self.problems)
        new = _build_module(plan.module_type, data, self, path, fill_defaults=False)
        if len(self.problems) == before:
            self.assignments.append((module, plan.name, new))

    def commit(self) -> LoadResult:
        """Raise every problem, or assign every planned value."""
        return commit_all([self])[0]


def load_many(
    modules: Mapping[str, SupportsState], document: Mapping[str, Any], *, strict: bool = True, fresh: bool = False
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
    loaders = {name: Loader(strict, fresh) for name in modules}
    for name, module in modules.items():
        if name in document:
            loaders[name].plan_child(module, document[name], (name,))
        elif strict:
            loaders[name].problem((name,), "module is missing from the session")
        else:
            loaders[name].missing.append(name)
    return dict(zip(loaders, commit_all(list(loaders.values())), strict=True))


def build(cls: type[T], data: Any, *, strict: bool = True, fill_defaults: bool = True) -> T:
    """Build a new instance of a ``@stateful`` class (or any attrs class) from JSON data.

    Missing fields take their defaults; a missing required field is a problem,
    and so is an unknown key when ``strict``. With ``fill_defaults=False`` a
    module follows the load rules instead: when ``strict``, every state key
    must be there (as in a strict session load).

    Raises:
        StateLoadError: Every problem found.
        StatekitError: ``strict`` is not ``True`` or ``False``.
    """
    refuse_too_deep(data)
    loader = Loader(check_flag(strict, "strict"), saved=False)  # configs (written by hand) and the CLI's checks: no hint
    if issubclass(cls, StateBase):
        obj: T = _build_module(cls, data, loader, (), fill_defaults=fill_defaults)
    else:
        obj = _build_record(cls, data, loader)
    loader.commit()
    return obj


def _build_record(cls: type, data: Any, loader: Loader) -> Any:
    conv = converter_of(cls)
    try:
        return (conv if loader.strict else lenient(conv)).structure(data, cls)
    except Exception as exc:  # noqa: BLE001 - reported with paths
        loader.problems.extend(Problem(p, m) for p, m in problems_of(exc, ()))
        return None


def _build_module(cls: type, data: Any, loader: Loader, path: Path, *, fill_defaults: bool) -> Any:
    """A new module from ``data``; ``fill_defaults`` lets missing keys take defaults
    even when strict (configs); a load into ``None`` follows the load rules."""
    if not isinstance(data, Mapping):
        loader.problem(path, f"expected an object of state, got {describe(data)}")
        return None
    if not getattr(cls, "__statekit_walks_load__", False):  # a foreign class, or its own load_state_dict()
        return _build_by_override(cls, data, loader, path)  # its load upgrades the data, once
    if loader.fresh and is_older(cls, data):
        with loader.copying():
            return _build_upgraded(cls, upgrade(cls, data, path), loader, path, fill_defaults=fill_defaults)
    return _build_upgraded(cls, upgrade(cls, data, path), loader, path, fill_defaults=fill_defaults)


def _build_upgraded(cls: type, data: Mapping[str, Any], loader: Loader, path: Path, *, fill_defaults: bool) -> Any:
    """A new module from ``data`` at ``cls``'s version."""
    plan = class_plan(cls)
    kwargs: dict[str, Any] = {}
    before = len(loader.problems)
    for field_plan in plan.fields:
        _build_field(field_plan, data, loader, (*path, field_plan.name), kwargs, fill_defaults)
    declared = [p.name for p in plan.fields if _is_state_plan(p)]
    extra = [name for name in data if name not in declared]
    module = None if len(loader.problems) > before else _construct(cls, kwargs, loader, path)
    if module is None:
        _unbuilt_extras(cls, plan, extra, declared, loader, path)
        return None
    _plan_extras(module, data, (declared, extra), loader, path, fill_defaults)
    return module


def _unbuilt_extras(cls: type, plan: ClassPlan, extra: list[str], declared: list[str], loader: Loader, path: Path) -> None:
    """Report the keys a module that could not be built does not declare, unless it
    could have registered them when built (then they are unknown only maybe: not reported)."""
    if _may_register(cls):
        return
    arguments = {p.name for p in plan.fields if _needs_argument(p)}  # reported as such, not as unknown keys
    for name in (name for name in extra if name not in arguments):
        loader.unknown((*path, name), declared)


def _may_register(cls: type) -> bool:
    """Whether building ``cls`` runs code of its own (``__attrs_post_init__``, its own
    ``__init__``), which may register state with ``register_state``."""
    init = getattr(getattr(cls, "__init__", None), "__code__", None)
    generated = init is not None and init.co_filename.startswith("<attrs generated")
    return hasattr(cls, "__attrs_post_init__") or not generated


def _construct(cls: type, kwargs: dict[str, Any], loader: Loader, path: Path) -> Any:
    try:
        return cls(**kwargs)
    except Exception as exc:  # noqa: BLE001 - a validator or __attrs_post_init__ refused
        found = problems_of(exc, path)
        if holds_secrets(cls, kwargs.values()):  # its message could quote them, whole or in part
            found = [(path, HIDDEN_BUILD)]
        loader.problems.extend(Problem(p, m) for p, m in found)
        return None


def _plan_extras(
    module: StateBase, data: Mapping[str, Any], names: tuple[list[str], list[str]], loader: Loader, path: Path, fill_defaults: bool
) -> None:
    """Load the state the new module declared when it was built: attributes it
    registered, or set to a module, in ``__init__`` / ``__attrs_post_init__``
    (``names``: the keys its class declares, and the others in ``data``)."""
    declared, extra = names
    keys = state_extras(module)
    for name, spec in keys.items():
        if name in data:
            loader.plan_key(module, name, spec, data[name], (*path, name))
        elif loader.strict and not fill_defaults:
            loader.problem((*path, name), "required key is missing")
        elif not fill_defaults:
            loader.missing.append(format_path((*path, name)))
    for name in extra:
        if name not in keys:
            loader.unknown((*path, name), [*declared, *keys])


def _build_by_override(cls: type, data: Mapping[str, Any], loader: Loader, path: Path) -> Any:
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


def _is_secret(spec: Any) -> bool:
    return isinstance(spec, FieldPlan) and spec.secret


def _is_state_plan(plan: FieldPlan) -> bool:
    return plan.is_state or plan.module_type is not None


def _build_field(
    plan: FieldPlan, data: Mapping[str, Any], loader: Loader, path: Path, kwargs: dict[str, Any], fill_defaults: bool
) -> None:
    name = plan.name
    if not _is_state_plan(plan) or name not in data:
        _missing_field(plan, loader, path, fill_defaults)
        return
    if plan.module_type is not None:
        value = None
        if data[name] is not None or not _may_hold_none(plan):  # null where a module must be: a problem
            value = _build_module(plan.module_type, data[name], loader, path, fill_defaults=fill_defaults)
    else:
        try:
            value = _build_value(plan, open_secret(data[name]) if plan.secret else data[name], loader, path)
        except SecretError as exc:
            loader.problem(path, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - reported with its path
            problems = problems_of(exc, path) if not plan.secret else [(path, "not a valid value for this secret field (details hidden)")]
            loader.problems.extend(Problem(p, m) for p, m in problems)
            return
    kwargs[plan.field.alias or name] = value


def _may_hold_none(plan: FieldPlan) -> bool:
    """Whether a module field may be built holding ``None``: its type admits it, or its
    default is ``None`` (what a load into a new instance would find, and keep)."""
    return plan.nullable or plan.field.default is None


def _build_value(plan: FieldPlan, data: Any, loader: Loader, path: Path) -> Any:
    """A field's value for a module being built; a lenient load lists the keys it ignores
    (inside a secret, only the secret's own path: the keys could be secret too)."""
    assert plan.load_strict is not None and plan.load_lenient is not None
    if loader.strict:
        return plan.load_strict(data)
    mark = len(loader.unexpected)
    value = loader.lenient_load(plan.load_strict, plan.load_lenient, data, path)(data)
    if plan.secret:
        loader.hide_unexpected(mark, path)
    return value


_NEEDS_ARGUMENT = (
    "not state, but the constructor needs it, so the module cannot be built from data: "
    "build it in code, then load the config into it with seed()"
)


def _needs_argument(plan: FieldPlan) -> bool:
    """A plain attribute (a client, a lock) the constructor requires: no config or session holds it."""
    return not _is_state_plan(plan) and plan.field.init and plan.field.default is attrs.NOTHING


def _missing_field(plan: FieldPlan, loader: Loader, path: Path, fill_defaults: bool) -> None:
    required = plan.field.default is attrs.NOTHING and plan.field.init
    if _needs_argument(plan):
        loader.problem(path, _NEEDS_ARGUMENT)
    elif not _is_state_plan(plan) or fill_defaults or plan.secret:
        if required:
            loader.problem(path, "required key is missing")
    elif loader.strict or required:
        loader.problem(path, "required key is missing")
    else:
        loader.missing.append(format_path(path))


__all__ = [
    "Loader",
    "build",
    "load_many",
    "refuse_too_deep",
]
