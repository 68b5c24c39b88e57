"""Building statekit's converter: its strict hooks, its records, and its lenient twin."""

from __future__ import annotations

import contextlib
from typing import Any

import cattrs
from cattrs.errors import StructureHandlerNotFoundError

from statekit.values.plain import type_name
from statekit.values.class_cache import CachedByType
from statekit.values.containers import register_collections
from statekit.values.hooks import register_json, register_scalars
from statekit.values.pydantic import register_models
from statekit.values.records import register_records


def make_converter(*, forbid_extra_keys: bool = True) -> cattrs.Converter:
    """Build a cattrs converter with statekit's strict hooks.

    Users may register more hooks on it and pass it to ``@stateful(converter=...)``.

    Args:
        forbid_extra_keys: Reject unknown keys in value records (strict loads).

    Returns:
        A new :class:`cattrs.Converter`.
    """
    conv = StatekitConverter(
        forbid_extra_keys=forbid_extra_keys,
        detailed_validation=True,
        unstructure_fallback_factory=_unsupported,
        structure_fallback_factory=_unsupported,
    )
    register_scalars(conv)
    register_json(conv)
    register_collections(conv)
    register_records(conv)
    register_models(conv)
    return conv


class UnsupportedTypeError(StructureHandlerNotFoundError):
    """No hook of statekit's (nor of the user's converter) handles ``type``."""


def _unsupported(tp: Any) -> Any:
    raise UnsupportedTypeError(
        f"statekit cannot save or load {type_name(tp)}: give the field to_json/from_json, "
        "or register a hook on a converter",
        tp,
    )


class StatekitConverter(cattrs.Converter):
    """A cattrs converter that knows when a hook is registered on it.

    Its lenient twin (:func:`lenient`) is a copy; registering a hook drops the
    copy, so that a hook registered after first use reaches both.
    """

    __slots__ = ("__weakref__", "_lenient", "generation")  # weakly: statekit's Shapes are held with it
    _lenient: cattrs.Converter
    generation: int
    """How many times a hook was registered: caches of generated code key on it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # cattrs caches its hooks in an lru_cache per converter, which would keep every
        # class it ever saw alive: here they are held on the classes themselves.
        for name, dispatch in (("unstructure hooks", self._unstructure_func), ("structure hooks", self._structure_func)):
            dispatch.dispatch = CachedByType(name, dispatch.dispatch_without_caching)  # type: ignore[assignment]

    def _changed(self) -> None:
        with contextlib.suppress(AttributeError):
            del self._lenient
        self.generation = getattr(self, "generation", 0) + 1

    def lenient_twin(self) -> cattrs.Converter:
        """This converter ignoring unknown keys in value records: a copy, kept until a hook is registered."""
        try:
            return self._lenient
        except AttributeError:
            self._lenient = self.copy(forbid_extra_keys=False)
            return self._lenient

    def register_structure_hook(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102 - cattrs documents these
        self._changed()
        return super().register_structure_hook(*args, **kwargs)

    def register_structure_hook_func(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102
        self._changed()
        return super().register_structure_hook_func(*args, **kwargs)

    def register_structure_hook_factory(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102
        self._changed()
        return super().register_structure_hook_factory(*args, **kwargs)

    def register_unstructure_hook(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102
        self._changed()  # the Shapes' dump decisions read the unstructure hooks
        return super().register_unstructure_hook(*args, **kwargs)

    def register_unstructure_hook_func(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102
        self._changed()
        return super().register_unstructure_hook_func(*args, **kwargs)

    def register_unstructure_hook_factory(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102
        self._changed()
        return super().register_unstructure_hook_factory(*args, **kwargs)


def lenient(conv: cattrs.Converter) -> cattrs.Converter:
    """The same converter, but ignoring unknown keys in value records.

    Made again after any hook is registered on ``conv`` (a plain cattrs
    converter, which cannot say so, gets a fresh copy every time).
    """
    if not isinstance(conv, StatekitConverter):
        return conv.copy(forbid_extra_keys=False)
    return conv.lenient_twin()
