"""Saves that name some of a session's modules: the others are kept, taken from exactly what the compare-and-set checks.

A session may hold more modules than one save names (docs/sessions.md). A save
writes a whole document, so the modules it does not name are copied into it
from the stored document, as stored (sealed secrets and appended items
included), and the write is conditional on that very document:

- a save that checks a revision (the object loaded or saved the session
  before, or ``update()``) takes them from the bytes it remembers, or from a
  read that must still be that revision; when the object remembers that the
  stored document holds no other module (``Expected.names``), nothing is read
  or decoded at all: a save naming every module costs what it did;
- a blind save (nothing remembered) or ``overwrite=True`` reads the stored
  document, takes them from it and writes only if it is still what was read;
  losing that race, it waits a random backoff and reads again (:data:`BLIND_ATTEMPTS`).

So no other writer's change to a module the save does not name is lost, and
nothing is torn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs
import msgspec

from statekit.values.plain import describe
from statekit.errors import ConflictError, DocumentError, SessionError
from statekit.session._companion import split
from statekit.session._revisions import MISSING, MISSING_REVISION, Expected, conflict_message, revision_of
from statekit.session.document import BOM, META_KEY, check_meta, doc_token

BLIND_ATTEMPTS: Final = 100
"""How often a blind save (or ``overwrite=True``) reads again after another writer got in between
(with the random backoff of ``update()``): each round one of the racing writers wins."""


@attrs.frozen
class Others:
    """The stored modules a save does not name, and the stored order of every module.

    Attributes:
        states: The kept modules' stored states (plain data, as decoded).
        order: Every module name of the stored document, in its order.
        expected: What the compare-and-set must find (the bytes they were taken from).
        read: Whether finding them read or decoded anything (the caller awaited:
            a live dump made before is stale).
    """

    states: dict[str, Any]
    order: tuple[str, ...]
    expected: Expected
    read: bool = True

    def names(self, saved: Mapping[str, object]) -> frozenset[str]:
        """The module names of the document written: the saved ones and the kept ones."""
        return frozenset(saved).union(self.states)

    def ordered(self, saved: Mapping[str, object]) -> tuple[str, ...]:
        """The module names of the document written, in its order (see :meth:`merged`)."""
        if not self.states:
            return tuple(saved)
        return (*self.order, *(name for name in saved if name not in self.order))

    def merged(self, states: dict[str, Any]) -> dict[str, Any]:
        """``states`` (the saved modules) with the kept ones, in the stored order (new modules last)."""
        if not self.states:
            return states
        out = {name: states[name] if name in states else self.states[name] for name in self.order}
        out.update((name, state) for name, state in states.items() if name not in out)
        return out


@attrs.frozen
class Basis:
    """What a save writes over.

    Attributes:
        expected: What the compare-and-set must find stored.
        blind: Whether ``expected`` comes from a read made for this save (a blind
            save or ``overwrite=True``): a lost race reads again instead of raising.
        overwrite: ``overwrite=True``: a stored document that cannot be read is replaced whole.
    """

    expected: Expected
    blind: bool = False
    overwrite: bool = False


Fetch = Callable[[], Awaitable[bytes | None]]
"""Reads the stored bytes of the session (``None``: not stored)."""


def save_basis(expected: Expected | None, overwrite: bool) -> Basis | None:
    """What a save must find stored: ``expected`` (what the object remembers); ``None``: (blind) what a read finds
    now (:func:`read_basis`). A plain function: the usual save, over what the object remembers, awaits nothing."""
    if expected is not None and not overwrite:
        return Basis(expected)
    return None


async def read_basis(overwrite: bool, fetch: Fetch) -> Basis:
    """What a blind save must find stored: what a read finds now."""
    raw = await fetch()
    return Basis(MISSING if raw is None else Expected(raw=raw), blind=True, overwrite=overwrite)


def others_known(names: frozenset[str], basis: Basis, *, read: bool = False) -> Others | None:
    """:func:`others` when nothing needs reading: the object remembers that the document holds no module
    but ``names`` (the usual save); ``None`` otherwise."""
    expected = basis.expected
    if expected.names is not None and expected.names <= names and not read:
        return Others({}, (), expected, read=False)  # nothing to read, nothing to decode
    return None


async def others(
    names: frozenset[str],
    basis: Basis,
    fetch: Fetch,
    decode: Callable[[bytes], Awaitable[Mapping[str, Any]]],
    source: Callable[[], str],
    *,
    read: bool = False,
    scan: Callable[[bytes], list[str] | None] | None = None,
) -> Others:
    """The stored modules not in ``names``, from exactly the document ``basis`` expects.

    With ``read``, the document is decoded even when the object remembers that it
    holds no other module (for the order of its modules). ``scan`` finds the
    document's module names cheaply, when it can (:func:`json_names`): when they
    are all in ``names`` nothing needs decoding.

    Raises:
        ConflictError: The object remembers only a revision, and the stored one is
            another (the save would fail anyway); nothing was written.
        DocumentError: The stored document cannot be read, so its other modules
            cannot be kept (``overwrite=True`` replaces it whole instead).
    """
    known = others_known(names, basis, read=read)
    if known is not None:
        return known
    expected = basis.expected
    if not expected.only_base and expected.raw is None and expected.revision == MISSING_REVISION:
        return Others({}, (), expected, read=False)  # nothing stored is expected
    raw = expected.raw
    fetched = raw is None
    if raw is None:  # only a hash, or the base of a delta save, is remembered: read, and check it is that
        raw = await fetch()
        if raw is None or not _is(raw, expected):
            raise ConflictError(conflict_message(source(), created=False), source=source())
    stored = None if scan is None or read else scan(raw)
    if stored is not None and names.issuperset(stored):  # a blind save of every module: no full decode
        return Others({}, tuple(stored), Expected(raw=raw, base=expected.base, names=frozenset(stored)), read=fetched)
    try:
        document = await decode(raw)
    except DocumentError as err:
        if basis.overwrite:
            return Others({}, (), expected)
        raise DocumentError(
            f"{err.reason}; a save keeps the stored modules it does not name, so it must read them: "
            "fix the document, or save with overwrite=True to replace it whole",
            source=err.source,
            line=err.line,
            column=err.column,
        ) from None
    order = tuple(name for name in document if name != META_KEY)
    states = {name: document[name] for name in order if name not in names}
    return Others(states, order, Expected(raw=raw, base=expected.base, names=frozenset(order)))


_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])


def json_names(raw: bytes) -> list[str] | None:
    """The module names of a JSON document, found without building its values (8x faster than
    decoding it); ``None`` when it is not a readable session document (the full decode says why)."""
    doc = split(raw)[0]  # deltas only append to lists: the document names every module
    try:
        top = _TOP.decode(doc[len(BOM) :] if doc.startswith(BOM) else doc)
        if META_KEY in top:
            check_meta(msgspec.json.decode(top[META_KEY]), "")
    except (msgspec.DecodeError, DocumentError):
        return None
    return [name for name in top if name != META_KEY]


def _is(raw: bytes, expected: Expected) -> bool:
    """Whether bytes just read are what ``expected`` (a revision, or a delta base) stands for."""
    if not expected.only_base:
        return revision_of(raw) == expected.revision
    assert expected.base is not None
    doc, log, _ = split(raw)
    base = expected.base
    return doc_token(doc) == base.token and len(doc) == base.doc_len and len(log) == base.log_len


def check_removed(names: tuple[object, ...]) -> frozenset[str]:
    """The module names given to ``remove_modules()``, checked.

    Raises:
        SessionError: None given, or one that is not a module name.
    """
    if not names:
        raise SessionError("remove_modules() names no module: pass their names, as in remove_modules('chat-1', 'notes')")
    for name in names:
        if not isinstance(name, str) or not name or name == META_KEY:
            raise SessionError(f"remove_modules() takes module names (strings), got {describe(name)}")
    return frozenset(names)  # type: ignore[arg-type]  # checked above


def refuse_removal(names: frozenset[str], stored: tuple[str, ...], source: str) -> None:
    """Refuse to remove a module the session does not hold, or all of them (changing nothing).

    Raises:
        SessionError: Naming what the session holds.
    """
    held = ", ".join(stored) or "none"
    absent = sorted(names.difference(stored))
    if absent:
        raise SessionError(f"{source} holds no module {', '.join(map(repr, absent))} (it holds: {held}); nothing was removed")
    if names.issuperset(stored):
        raise SessionError(f"removing every module of {source} would leave it empty: delete the session instead")
