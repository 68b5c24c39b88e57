"""Caches of generated code by type, held on the classes they are for: a class dropped takes its code along."""

from __future__ import annotations

import sys
import threading
import typing
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Final

from statekit.values.codegen import generated_sources
from statekit.values.annotations import iter_types

MISSING: Final = object()
"""What :meth:`TypeCache.get` returns for a key it does not hold."""

_ATTRIBUTE = "__statekit_cache__"
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: int, str, list... take no attribute
_LOCK = threading.Lock()
_NONE: Final[dict[Any, Any]] = {}  # read only: what a class without entries holds
_holders: weakref.WeakSet[type] = weakref.WeakSet()  # the classes holding entries (for cache_sizes)
_caches: weakref.WeakSet[TypeCache] = weakref.WeakSet()


class TypeCache:
    """A cache whose entries live on their *owner* class, in its own ``__dict__``.

    A module-level dict keyed by class keeps every class it ever saw alive, with
    its generated code (which refers to the class). Held on the class, an entry
    is a cycle the garbage collector frees with the class. An entry about no
    class of the user's (``int``, ``list[str]``) is kept in the cache itself:
    there are only so many of those. An entry that refers to a converter keeps
    that converter alive as long as the class (a module's class holds its
    converter anyway). Every key names its class too, so that an entry can never
    answer for another class (one made from this one's namespace, say).
    """

    def __init__(self, name: str, *, keep: int | None = None) -> None:
        """``keep``: at most this many entries per owner (the oldest goes first)."""
        self.name = name
        self._keep = keep
        self._shared: dict[Hashable, Any] = {}
        _caches.add(self)

    def get(self, key: Hashable, owner: type | None) -> Any:
        """The entry of ``key`` stored on ``owner``, or :data:`MISSING`."""
        store = _store(owner)
        entries = self._shared if store is None else store.get(self, self._shared)
        return entries.get(key, MISSING)

    def put(self, key: Hashable, owner: type | None, value: Any) -> None:
        """Store ``value`` for ``key`` on ``owner`` (here, when ``owner`` is ``None`` or takes no attribute)."""
        with _LOCK:
            store = _store(owner)
            if store is None and owner is not None and _takes_entries(owner):
                store = {}
                try:
                    setattr(owner, _ATTRIBUTE, store)
                except (AttributeError, TypeError):  # a metaclass that refuses new attributes
                    store = None
                else:
                    _holders.add(owner)
            entries = self._shared if store is None else store.setdefault(self, {})
            if self._keep is not None and key not in entries and len(entries) >= self._keep:
                del entries[next(iter(entries))]
            entries[key] = value

    def pop(self, key: Hashable, owner: type | None) -> None:
        """Forget ``key`` (if held)."""
        with _LOCK:
            store = _store(owner)
            (self._shared if store is None else store.get(self, {})).pop(key, None)

    def clear(self) -> None:
        """Forget every entry, on every class."""
        with _LOCK:
            self._shared.clear()
            for store in _stores():
                store.pop(self, None)

    def size(self) -> int:
        """How many entries this cache holds, on the classes alive and here."""
        with _LOCK:
            return len(self._shared) + sum(len(store.get(self, {})) for store in _stores())


def _store(owner: type | None) -> dict[TypeCache, dict[Hashable, Any]] | None:
    if owner is None:
        return None
    store: dict[TypeCache, dict[Hashable, Any]] | None = owner.__dict__.get(_ATTRIBUTE)
    return store


def _stores() -> list[dict[TypeCache, dict[Hashable, Any]]]:
    return [store for store in map(_store, list(_holders)) if store is not None]


def owner_of(tp: Any) -> type | None:
    """The class an entry about ``tp`` is held on: the first class in it not of Python's own
    (``Msg`` in ``list[Msg]``, ``Box`` in ``Box[int]``), or ``None`` (``int``, ``dict[str, Any]``,
    ``Mapping[str, int]``: there are only so many of those)."""
    for inner in iter_types(tp):
        for candidate in (inner, typing.get_origin(inner)):
            if isinstance(candidate, type) and _takes_entries(candidate):
                return candidate
    return None


def _takes_entries(cls: type) -> bool:
    """Not a type of Python's own (``int``, ``typing.Any``, ``collections.abc.Mapping``): those
    live for ever, and so would whatever was cached on them."""
    module = getattr(cls, "__module__", None) or "builtins"
    return not cls.__flags__ & _IMMUTABLE_TYPE and module.partition(".")[0] not in sys.stdlib_module_names


class CachedByType:
    """``find(tp)``, cached by type in a :class:`TypeCache` (what cattrs' dispatch keeps in an
    ``lru_cache``, which holds every class it saw): callable, with ``cache_clear()``."""

    def __init__(self, name: str, find: Callable[[Any], Any]) -> None:
        self._cache = TypeCache(name)
        self._find = find

    def __call__(self, tp: Any) -> Any:
        cache = self._cache
        found = cache._shared.get(tp, MISSING)  # int, list[str]: first, and fast
        if found is MISSING and isinstance(tp, type):  # a class: its own entry, without looking for an owner
            entries = tp.__dict__.get(_ATTRIBUTE, _NONE).get(cache, _NONE)
            found = entries.get(tp, MISSING)
        if found is MISSING:
            owner = owner_of(tp)
            found = cache.get(tp, owner)
            if found is MISSING:
                found = self._find(tp)
                cache.put(tp, owner, found)
        return found

    def cache_clear(self) -> None:
        """Forget everything found (a hook was registered)."""
        self._cache.clear()


def cache_sizes() -> dict[str, int]:
    """How many entries each cache of generated code holds (summed by name), and how many
    generated functions are alive (``"generated sources"``): the figures that must come back
    down when classes are dropped."""
    sizes: dict[str, int] = {}
    for cache in list(_caches):
        sizes[cache.name] = sizes.get(cache.name, 0) + cache.size()
    sizes["generated sources"] = generated_sources()
    return sizes


__all__ = ["MISSING", "CachedByType", "TypeCache", "cache_sizes", "owner_of"]
