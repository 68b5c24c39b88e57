"""A dump's refusal of a value of another class than the one it writes (it would load back as another value)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from statekit.values.plain import JSONValueError, describe, with_article

Hook = Callable[[Any], Any]


def refusal(what: str) -> Hook:
    """What a dump calls with a value of another class than ``what`` it writes."""

    def refuse(value: Any) -> Any:
        raise JSONValueError([((), f"expected {what}, got {describe(value)}")])

    return refuse


def wrong_record(tp: type) -> Hook:
    """A record's refusal of another class (a subclass, a look-alike): its fields
    would be written as ``tp``'s, and loaded back as a ``tp``."""
    return refusal(with_article(tp.__qualname__))


def exactly(kind: type, dump: Hook, what: str | None = None) -> Hook:
    """``dump``, refusing any value whose class is not exactly ``kind`` (a subclass
    too): it would load back as another value. ``what`` names ``kind`` in the error."""
    refuse = refusal(what) if what is not None else wrong_record(kind)

    def checked(value: Any) -> Any:
        if type(value) is not kind:
            refuse(value)
        return dump(value)

    return checked


__all__ = ["exactly", "refusal", "wrong_record"]
