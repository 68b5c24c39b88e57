"""``StateModule`` and ``@stateful``: declaring state.

What a module's state is (declared fields, held modules, registered
attributes) lives here; walking it lives in :mod:`statekit.state.dump` and, all or
nothing, :mod:`statekit.state.load`, which the two methods of :class:`StateModule`
call (imported when called: those modules build on this one).
"""

from __future__ import annotations

import dis
import inspect
import types
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self, TypeVar, dataclass_transform, overload

import attr
import attrs
import cattrs

from statekit.state.definitions import plain_annotations, refuse_plain, refuse_shared_defaults
from statekit.state.flags import check_flag
from statekit.values.fields import METADATA_KEY, FieldCodec, state_field
from statekit.state.gc import paused_gc
from statekit.values.plain import JSONValueError, copy_loose
from statekit._limits import depth_message, path_too_deep, too_deep
from statekit.state.dump import dump_root
from statekit.state.load import Loader, refuse_too_deep
from statekit.state.plan import ClassPlan, any_hooks, check_record, make_plan
from statekit.state.base import REGISTERED, LoadResult, StateBase, is_module
from statekit.values.versions import VERSION_KEY, Migration, define_versions
from statekit.errors import (
    PathSegment,
    Problem,
    StateAttributeError,
    StateDefinitionError,
    StatekitError,
    StateDumpError,
    StateModuleNameError,
)

T = TypeVar("T")
Path = tuple[PathSegment, ...]

class StateModule(StateBase):
    """Base class of objects whose state can be saved and loaded.

    State is: the fields declared with :func:`~statekit.state_field` in a
    ``@stateful`` subclass, every attribute that holds a ``StateModule``
    (nested state, found automatically), and attributes registered with
    :meth:`register_state`.
    """

    __statekit_undecorated__: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Note whether statekit walks the subclass's state itself, and refuse
        ``state_field()`` in a subclass that ``@stateful`` will not process."""
        super().__init_subclass__(**kwargs)
        cls.__statekit_walks_dump__ = cls.state_dict is StateModule.state_dict
        cls.__statekit_walks_load__ = cls.load_state_dict is StateModule.load_state_dict
        if _BEING_MADE in cls.__dict__ or not _declares_state_fields(cls):
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
                JSON data (also a ``TypeError``, as in AgentScope); or the name
                is ``__version__``, reserved for the data's version.
            StateModuleNameError: The attribute holds a module, which is nested
                state already (also a ``ValueError``, as in AgentScope).
        """
        if attr_name == VERSION_KEY:  # as for a declared field: the data's version lives there
            raise StateDefinitionError(f"{type(self).__qualname__}: {VERSION_KEY!r} is reserved for the data's version")
        if not hasattr(self, attr_name):
            raise StateAttributeError(f"{type(self).__qualname__} has no attribute {attr_name!r} to register")
        if is_module(getattr(self, attr_name)):
            raise StateModuleNameError(
                f"{type(self).__qualname__}.{attr_name} holds a module, which is nested state already: "
                "do not register it (AgentScope raises ValueError too)"
            )
        if custom_to_json is None:
            _check_registered(self, attr_name)
        registry = self.__dict__.setdefault(REGISTERED, {})
        registry[attr_name] = any_hooks(FieldCodec(custom_to_json, custom_from_json))

    def __delattr__(self, name: str) -> None:
        """Delete an attribute; a registered one leaves the state with it."""
        super().__delattr__(name)
        registry = getattr(self, "__dict__", {}).get(REGISTERED)
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
            state = dump_root(self, (), lax=type(self).state_dict is not StateModule.state_dict)
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
            StatekitError: ``strict`` is not ``True`` or ``False``.
        """
        refuse_too_deep(state)
        loader = Loader(check_flag(strict, "strict"))
        with paused_gc():
            loader.plan(self, state, ())
            return loader.commit()


_BEING_MADE = "__statekit_being_made__"
"""Set in a class's own namespace while ``@stateful`` makes the attrs class from it (attrs
copies it into the new class), so that ``__init_subclass__`` lets that class, and only it, be."""


def _declares_state_fields(cls: type) -> bool:
    """Whether the class body (or the attrs class made from it) holds ``state_field()``s."""
    values = list(cls.__dict__.values()) + list(cls.__dict__.get("__attrs_attrs__", ()))
    return any(METADATA_KEY in (getattr(v, "metadata", None) or {}) for v in values)


def _no_decorator_follows() -> bool:
    """Whether the ``class`` statement that is creating the class applies no decorator.

    ``__init_subclass__`` runs inside the statement (its frame is two up); with no
    decorator, the next instruction stores the class under its name.
    """
    frame = _caller(_caller(inspect.currentframe()))  # from this function's, up past __init_subclass__ to the statement
    if frame is None:  # a Python without frames: only @attrs.define is caught
        return False
    following = (i for i in dis.get_instructions(frame.f_code) if i.offset > frame.f_lasti and i.opname != "CACHE")
    step = next(following, None)
    return step is not None and step.opname.startswith("STORE_")


def _caller(frame: types.FrameType | None) -> types.FrameType | None:
    return frame.f_back if frame is not None else None


def _undecorated_message(cls: type) -> str:
    return (
        f"{cls.__qualname__} declares state_field() attributes but is not @stateful: "
        "add @stateful above the class (not @attrs.define or @dataclass), or nothing is saved"
    )


def _check_registered(module: StateModule, name: str) -> None:
    value = getattr(module, name)
    try:
        copy_loose(value)
    except JSONValueError as exc:
        raise StateDefinitionError(
            f"{type(module).__qualname__}.{name} is not JSON data ({exc}); "
            "register it with custom_to_json and custom_from_json"
        ) from None


def _resolve(cls: type, localns: Mapping[str, Any]) -> None:
    """Resolve string annotations now (cattrs reads ``field.type``), if possible."""
    try:
        attrs.resolve_types(cls, localns=dict(localns))
    except NameError:
        pass  # a class defined later: resolved when first used


def _plan_now_or_later(cls: type, converter: cattrs.Converter | None) -> ClassPlan | None:
    try:
        return make_plan(cls, converter, StateBase)
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
            :func:`statekit.make_converter`). A value record held by a module
            is converted by the module's converter, like every value of the
            module; its own applies when it is built alone (``from_config``).
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

    caller = _caller(inspect.currentframe())  # the namespace of classes defined in functions
    localns = caller.f_locals if caller is not None else {}

    def wrap(cls: type[T]) -> type[T]:
        if frozen and issubclass(cls, StateModule):
            raise StatekitError(f"{cls.__qualname__}: a StateModule cannot be frozen; it is loaded in place")
        plain = plain_annotations(cls) if issubclass(cls, StateModule) else []
        setattr(cls, _BEING_MADE, True)
        try:
            new = attrs.define(cls, kw_only=kw_only, eq=eq, repr=repr, frozen=frozen, slots=True)
        finally:
            delattr(cls, _BEING_MADE)
        if _BEING_MADE in new.__dict__:
            delattr(new, _BEING_MADE)
        refuse_shared_defaults(new)
        if issubclass(new, StateModule):
            new.__statekit_undecorated__ = False
        define_versions(new, version, migrations)
        new.__statekit_converter__ = converter  # type: ignore[attr-defined]
        new.__statekit_localns__ = dict(localns)  # type: ignore[attr-defined]
        _resolve(new, localns)
        if issubclass(new, StateModule):
            refuse_plain(new, plain, StateModule)
            new.__statekit_plan__ = _plan_now_or_later(new, converter)
        else:
            check_record(new, converter)
        return new

    return wrap if cls is None else wrap(cls)


__all__ = [
    "LoadResult",
    "StateModule",
    "stateful",
]
