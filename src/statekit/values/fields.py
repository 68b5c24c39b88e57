"""``state_field()``: the marker that makes an attribute part of the state."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

import attrs

T = TypeVar("T")

METADATA_KEY = "statekit"
"""Key under which a :class:`FieldCodec` sits in an attrs field's metadata."""


@attrs.frozen
class FieldCodec:
    """The per-field codec of a state field (both ``None`` when cattrs does it).

    ``secret``: never written in clear (see :mod:`statekit.values.secrets`).
    ``append_only``: a list that only grows (sessions then save only new items).
    """

    to_json: Callable[[Any], Any] | None = None
    from_json: Callable[[Any], Any] | None = None
    secret: bool = False
    append_only: bool = False

    def __attrs_post_init__(self) -> None:
        if self.secret:
            _SECRET_FIELDS[0] = True


_SECRET_FIELDS = [False]
"""Whether a secret field's codec was ever made in this process (it never goes back to ``False``)."""


def secret_fields_declared() -> bool:
    """Whether any field was declared ``state_field(secret=True)`` in this process: until one is, no module
    can hold a secret field, and a save without a key has nothing to look for."""
    return _SECRET_FIELDS[0]


def _hidden(_: object) -> str:
    return "<secret>"


def field_codec(field: attrs.Attribute[Any]) -> FieldCodec | None:
    """Return the codec of a state field, or ``None`` when it is not state."""
    codec = field.metadata.get(METADATA_KEY)
    return codec if isinstance(codec, FieldCodec) else None


@overload
def state_field(
    *,
    default: T,
    to_json: Callable[[T], Any] | None = ...,
    from_json: Callable[[Any], T] | None = ...,
    validator: Callable[[Any, attrs.Attribute[Any], T], Any] | None = ...,
    repr: bool = ...,
    eq: bool = ...,
    init: bool = ...,
    kw_only: bool = ...,
    alias: str | None = ...,
    metadata: Mapping[Any, Any] | None = ...,
    secret: bool = ...,
    append_only: bool = ...,
) -> T: ...
@overload
def state_field(
    *,
    factory: Callable[[], T],
    to_json: Callable[[T], Any] | None = ...,
    from_json: Callable[[Any], T] | None = ...,
    validator: Callable[[Any, attrs.Attribute[Any], T], Any] | None = ...,
    repr: bool = ...,
    eq: bool = ...,
    init: bool = ...,
    kw_only: bool = ...,
    alias: str | None = ...,
    metadata: Mapping[Any, Any] | None = ...,
    secret: bool = ...,
    append_only: bool = ...,
) -> T: ...
@overload
def state_field(
    *,
    from_json: Callable[[Any], T],
    to_json: Callable[[T], Any] | None = ...,
    validator: Callable[[Any, attrs.Attribute[Any], T], Any] | None = ...,
    repr: bool = ...,
    eq: bool = ...,
    init: bool = ...,
    kw_only: bool = ...,
    alias: str | None = ...,
    metadata: Mapping[Any, Any] | None = ...,
    secret: bool = ...,
    append_only: bool = ...,
) -> T: ...
@overload
def state_field(
    *,
    to_json: Callable[[Any], Any] | None = ...,
    validator: Callable[[Any, attrs.Attribute[Any], Any], Any] | None = ...,
    repr: bool = ...,
    eq: bool = ...,
    init: bool = ...,
    kw_only: bool = ...,
    alias: str | None = ...,
    metadata: Mapping[Any, Any] | None = ...,
    secret: bool = ...,
    append_only: bool = ...,
) -> Any: ...
def state_field(
    *,
    default: Any = attrs.NOTHING,
    factory: Callable[[], Any] | None = None,
    to_json: Callable[[Any], Any] | None = None,
    from_json: Callable[[Any], Any] | None = None,
    validator: Callable[[Any, attrs.Attribute[Any], Any], Any] | None = None,
    repr: bool = True,
    eq: bool = True,
    init: bool = True,
    kw_only: bool = False,
    alias: str | None = None,
    metadata: Mapping[Any, Any] | None = None,
    secret: bool = False,
    append_only: bool = False,
) -> Any:
    """Declare an attribute of a ``@stateful`` class as part of its state.

    Args:
        default: The value when the constructor is not given one.
        factory: Called with no argument to make a fresh default (for lists,
            dicts and other mutable values).
        to_json: Turns the value into JSON data for ``state_dict()``; cattrs
            does it when omitted. Its result is copied, so it may return
            live containers.
        from_json: Builds the value from JSON data in ``load_state_dict()``;
            cattrs does it when omitted. An exception it raises becomes a
            :class:`~statekit.errors.StateLoadError` naming the field.
        validator: An attrs validator, run on construction and on load.
        repr: Include the field in ``repr()``.
        eq: Include the field in ``==``.
        init: Accept the field in ``__init__``.
        kw_only: Make the constructor argument keyword-only.
        alias: The constructor argument's name, when not the attribute's.
        metadata: Extra attrs metadata (the ``"statekit"`` key is reserved).
        secret: Never write the value in clear (an API key, a token): left out
            of saved documents, or encrypted when the session has a
            ``secret_key``; ``repr()`` shows ``<secret>``. See docs/secrets.md.
        append_only: The field is a list that only grows at its end (an agent's
            memory): a session save then writes only the items appended since
            this session object last loaded or saved it (any other change still
            rewrites the whole document). Its items must be frozen records or
            immutable scalars (docs/sessions.md, "Append-only lists").

    Returns:
        An attrs field definition (typed as the value for mypy).
    """
    meta = dict(metadata or {})
    meta[METADATA_KEY] = FieldCodec(to_json=to_json, from_json=from_json, secret=secret, append_only=append_only)
    return attrs.field(
        default=default,
        factory=factory,
        validator=validator,
        repr=_hidden if secret and repr else repr,
        eq=eq,
        init=init,
        kw_only=kw_only,
        alias=alias,
        metadata=meta,
    )
