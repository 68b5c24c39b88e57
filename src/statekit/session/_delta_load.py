"""Reading sessions whose modules hold append-only lists: the delta base a load leaves, and the checks and error places of stored deltas.

A load remembers what it read as a :class:`~._appends.DeltaBase` when the live
modules are exactly what is stored (see :mod:`._delta_save` for the saves that
append to it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from statekit.state.foreign import SupportsState
from statekit.state.gc import paused_gc
from statekit.state.dump import Held, dump_many
from statekit.state.typed_lists import list_at
from statekit.codecs import Codec, with_document_positions
from statekit.errors import DocumentError, PathSegment, Problem, StateLoadError, StatekitError
from statekit.session._appends import DeltaBase, appended_at, log_tail, saved_items, skeleton_bytes, stored_skeleton
from statekit.session._companion import Stored, split
from statekit.session.document import META_KEY, token_of


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
