"""Saving and loading sessions whose modules hold append-only lists (see :mod:`._appends`).

A save dumps the modules once, holding the append-only lists back; when only
appends happened since the session object last loaded or saved (see
:func:`~statekit.session._appends.new_items`) it stores just the new items,
otherwise (or once the deltas pass the compaction threshold) it encodes the
lists too and rewrites the document, with a new token.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from statekit.state.foreign import SupportsState
from statekit.state.gc import paused_gc
from statekit.state.dump import Held, dump_many
from statekit.state.typed_lists import list_at
from statekit.values.secrets import secrets_with
from statekit.codecs import Codec, with_document_positions
from statekit.errors import ConflictError, DocumentError, PathSegment, Problem, StateLoadError, StatekitError
from statekit.session._appends import (
    Path,
    DeltaBase,
    appended_at,
    base_after_write,
    delta_line,
    fill,
    log_tail,
    new_items,
    new_token,
    saved_after,
    saved_items,
    skeleton_bytes,
    stored_skeleton,
)
from statekit.session._backend import Backend
from statekit.session._cancel import finished_despite_cancel
from statekit.session._companion import Stored, split
from statekit.session._ids import SessionKey
from statekit.session._kept import Others
from statekit.session._prefix import Prefix
from statekit.session._revisions import Expected, conflict_message
from statekit.session.document import META_KEY, appends_document, plain_document, token_of


async def save_with_appends(
    backend: Backend,
    key: SessionKey,
    modules: Mapping[str, SupportsState],
    expected: Expected,
    kept: Callable[[], Awaitable[Others]],
) -> int:
    """Save ``modules``: a delta when only appends happened, else the whole document.

    Args:
        backend: The session's storage.
        key: Where.
        modules: What.
        expected: What the save must find stored.
        kept: Finds the stored modules the save does not name (for a whole document).

    Returns:
        The bytes written.
    """
    base = expected.base
    held: Held = []
    dumped = None
    if base is not None:  # a delta may do: dump now, and decide
        with paused_gc(), secrets_with(backend.secret_box):
            skeleton = dump_many(modules, live=True, held=held)
        shape = skeleton_bytes(skeleton)
        parts = new_items(base, shape, held) if held else None
        if parts is not None:
            line = delta_line(parts)
            if not base.compacts(len(line)):
                items = saved_after(base, parts)  # what the line holds: taken before any await
                await _save_delta(backend, key, base, line, items, expected.names)
                return len(line)
        dumped = skeleton, shape
    others = await kept()
    raw = None
    if dumped is None or others.read:  # the live dump is taken after the last await: nothing changes it before encoding
        held = []
        with paused_gc(), secrets_with(backend.secret_box):
            skeleton = dump_many(modules, live=True, held=held)
            if not held:  # nothing append-only: the plain save
                raw = backend.codec.dumps(plain_document(others.merged(skeleton)))
        shape = skeleton_bytes(skeleton) if held else b""
    else:
        skeleton, shape = dumped
        if not held:
            with paused_gc(), secrets_with(backend.secret_box):
                raw = backend.codec.dumps(plain_document(others.merged(skeleton)))
    if raw is not None:
        del skeleton, dumped  # its dicts are encoded: free them before the write (a large save's peak)
        await backend.store(key, raw, others.expected, overwrite=False, names=others.names(modules))
        return len(raw)
    return await _save_full(backend, key, skeleton, shape, held, others, modules)


@finished_despite_cancel
async def _save_delta(
    backend: Backend,
    key: SessionKey,
    base: DeltaBase,
    line: bytes,
    items: Mapping[Path, Prefix],
    names: frozenset[str] | None,
) -> None:
    """Append ``line`` and remember that the lists then hold ``items`` (and the document still ``names``).

    ``items`` is taken by the caller along with ``line``: on backends that write in
    threads this runs as a task of its own, after other tasks may have appended more.
    """
    line, chain = base.sealed(line) if line else (line, None)
    written = await backend.append(key, line, base)  # b"": only the revision check
    if written is None:
        source = backend.source(key)
        raise ConflictError(conflict_message(source, created=False), source=source)
    backend.revisions.remember(key, Expected(base=base.after(written, items, chain), names=names))


async def _save_full(
    backend: Backend,
    key: SessionKey,
    skeleton: dict[str, Any],
    shape: bytes,
    held: Held,
    others: Others,
    modules: Mapping[str, SupportsState],
) -> int:
    token = new_token()
    with paused_gc():
        fill(held)
        raw = backend.codec.dumps(appends_document(token, others.merged(skeleton)))
    base = base_after_write(token, len(raw), shape, held)
    await backend.store(key, raw, others.expected, overwrite=False, base=base, names=others.names(modules))
    return len(raw)


def base_after_load(modules: Mapping[str, SupportsState], document: Mapping[str, Any], raw: bytes) -> DeltaBase | None:
    """What a load just read, as a delta base; ``None`` when a save must rewrite in full.

    The live modules' skeleton must be the stored one (no module, key or value
    the load left out or changed), and every append-only list as long as stored.
    """
    token = token_of(document)
    if token is None:
        return None
    return _base_of(modules, raw, token, lambda held, shape: stored_skeleton(document, held, META_KEY) == shape)


def base_after_typed_load(modules: Mapping[str, SupportsState], document: Any, raw: bytes, token: str) -> DeltaBase | None:
    """What a typed load (:mod:`statekit.state.typed`) of ``document``, its mirrors, just read, as a delta base.

    No second look at the stored skeleton is needed: the typed load took every
    key as stored (none unknown or missing, every version current), so the
    stored document loads into what the live modules now hold. Every
    append-only list must hold as many items as its stored list.
    """

    def same_lengths(held: Held, _: bytes) -> bool:
        return all(_length(list_at(document, entry.path)) == len(entry.value) for entry in held)

    return _base_of(modules, raw, token, same_lengths)


def _length(stored: list[Any] | None) -> int:
    return -1 if stored is None else len(stored)


def _base_of(
    modules: Mapping[str, SupportsState], raw: bytes, token: str, stored: Callable[[Held, bytes], bool]
) -> DeltaBase | None:
    """The delta base of document ``token`` read as ``raw``, if ``stored(held, skeleton)``
    says the live modules' lists and skeleton are the stored ones."""
    held: Held = []
    try:
        with paused_gc():
            shape = skeleton_bytes(dump_many(modules, live=True, held=held))
    except StatekitError:
        return None
    if not held or not stored(held, shape):
        return None
    log = raw.log if isinstance(raw, Stored) else b""
    tail = log_tail(log) if log else (0, 0)
    if tail is None:
        return None  # deltas of format 1 (no sequence): the next save rewrites them in the current one
    return DeltaBase(token, len(log), len(raw), shape, saved_items(held), count=tail[0], chain=tail[1])


def check_token(document: Mapping[str, Any], token: str | None, source: str, log_source: str) -> None:
    """Refuse deltas whose token the decoded document does not carry."""
    own = token_of(document)
    if own is None and token is not None:
        whose = f"to document {token}" if token else "(its header line is damaged)"
        raise DocumentError(
            f"{log_source} holds items appended {whose}, but this document has no token in its "
            f"{META_KEY!r} metadata (was it removed by hand, or the document replaced?): loading it would leave "
            "those items out; put the token back, or move the companion away to load the document alone",
            source=source,
        )
    if token is None or own != token:
        raise DocumentError(
            f"the appended items in {log_source} name document {token}, but this document is "
            f"{own}: they do not belong together",
            source=source,
        )


def is_joined(raw: bytes) -> bool:
    """Whether a read holds deltas beside the document."""
    return isinstance(raw, Stored)


def positioned(err: StateLoadError, raw: bytes, codec: Codec, source: str, log_source: str) -> StateLoadError:
    """``err`` with each problem placed in the document, or in the companion line that appended its item.

    Args:
        err: The error of a load of ``raw``.
        raw: What was read: a document, or a :class:`Stored` carrying its deltas.
        codec: The codec that decoded it.
        source: How to name the document; ``log_source``: its deltas.
    """
    doc, log, _ = split(raw)
    placed = appended_at(doc, log, [problem.path for problem in err.problems]) if log else {}
    in_doc = with_document_positions(err, doc, source, codec)
    if not placed:
        return in_doc
    problems = [_in_log(p, *placed[p.path], codec, log_source) if p.path in placed else p for p in in_doc.problems]
    return StateLoadError(problems, title=err.title, hint=err.hint)


def _in_log(
    problem: Problem, number: int, line: bytes, inner: tuple[PathSegment, ...], codec: Codec, source: str
) -> Problem:
    """``problem`` placed at ``inner`` in the companion line ``number`` (``line``)."""
    position = codec.locate(line, [inner]).get(inner)
    column = None if position is None else position[1]
    return attrs.evolve(problem, source=source, line=number, column=column)
