"""How a session loads: read, decode (typed when it can, plain when it must), load all or nothing.

:class:`~statekit.session.SessionBase`'s load path, on the session's
:class:`~._backend.Backend`: :func:`load_modules` reads the stored bytes,
tries the typed load of well-formed JSON (:mod:`statekit.state.typed`, with the
deltas of append-only lists: :mod:`._typed_appends`) and falls back
to decoding plain data and :func:`~statekit.state.load.load_many`, which reports every
problem; the document's metadata and deltas are checked on the way.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from statekit.state.foreign import SupportsState
from statekit.state.gc import paused_gc, without_gc
from statekit.state.load import load_many
from statekit.state.module import LoadResult
from statekit.values.secrets import secrets_with
from statekit.state.typed import TypedDocument, decode, load_typed, meta_of, typed_document
from statekit.values.versions import migrations_run
from statekit.codecs import JSON, JSON_COMPACT
from statekit.errors import DocumentError, StateLoadError, StateVersionError
from statekit.session._backend import Backend
from statekit.session._appends import DeltaBase, merge
from statekit.session._companion import split
from statekit.session._history_index import HeadHistory, index_of
from statekit.session._lineage import over_deltas, remembered_index
from statekit.session._typed_appends import history_of_typed, with_deltas
from statekit.session._delta_load import base_after_load, base_after_typed_load, check_token, positioned
from statekit.session._ids import SessionKey
from statekit.session._log import log_timed
from statekit.session._revisions import MISSING, Expected
from statekit.session.document import (
    BOM,
    HEAD_BYTES,
    META_KEY,
    HISTORY_KEY,
    as_session,
    check_meta,
    doc_token,
    token_of,
)

DEPTH_CHECKING = (JSON, JSON_COMPACT)
"""The codecs whose ``dumps`` and ``loads`` refuse documents nested past ``MAX_DEPTH``."""


async def load_modules(
    backend: Backend, key: SessionKey, modules: Mapping[str, SupportsState], strict: bool
) -> tuple[dict[str, LoadResult] | None, Expected]:
    """Load the modules and remember what was read.

    Returns:
        The load results (``None`` when the session is missing) and what
        was read, for a save that must find it still there.
    """
    started = time.perf_counter()
    raw = await backend.fetch(key)
    if raw is None:
        backend.revisions.remember(key, MISSING)
        return None, MISSING
    results, base, names, history = await load_bytes(backend, key, raw, modules, strict)
    seen = Expected(raw=raw, base=base, names=names, history=history)
    backend.revisions.remember(key, seen)
    log_timed("loaded", list(modules), lambda: backend.source(key), len(raw), started)
    return results, seen


async def load_bytes(
    backend: Backend,
    key: SessionKey,
    raw: bytes,
    modules: Mapping[str, SupportsState],
    strict: bool,
    source: tuple[str, str] | None = None,
) -> tuple[dict[str, LoadResult], DeltaBase | None, frozenset[str], HeadHistory | None]:
    """Load the modules from stored bytes, all or nothing (remembering nothing).

    Args:
        source: How errors name the document and its deltas (by default, the session's head).

    Returns:
        The load results, the delta base (append-only lists), the document's module names
        and its history index (``None``: it keeps none).
    """
    names = frozenset(modules)
    try:
        typed = await _load_typed(backend, raw, key, modules, strict)
        if typed is None:
            return await _load_plain(backend, raw, key, modules, strict)
        results, base, history = typed
    except StateLoadError as err:
        where, log_where = source or (backend.source(key), backend.companion_source(key))
        raise positioned(err, raw, backend.codec, where, log_where) from None
    except StateVersionError as err:
        raise err.located(source[0] if source else backend.source(key)) from err.__cause__
    return results, base, names, history


async def _load_typed(
    backend: Backend, raw: bytes, key: SessionKey, modules: Mapping[str, SupportsState], strict: bool
) -> tuple[dict[str, LoadResult], DeltaBase | None, HeadHistory | None] | None:
    """The fast load (see :mod:`statekit.state.typed`), deltas included (see :mod:`._typed_appends`).

    Returns:
        The results, the delta base (append-only lists) and the history index; ``None``,
        nothing changed, when the typed load does not apply.
    """
    seen = backend.revisions.get(key)
    if not backend.codec.fast or not _may_hold_only(seen, modules):
        return None
    typed = typed_document(modules, META_KEY)
    if typed is None:
        return None
    # The collector stays off from the decode to the commit, and until the decoded mirrors are
    # dropped (when _typed_load returns): else its first pass after the decode walks them all
    # (several ms on a large load) for nothing. (The pause is process-wide: the decode's thread too.)
    with paused_gc():
        return await _typed_load(backend, typed, raw, key, modules, strict, seen)


async def _typed_load(
    backend: Backend,
    typed: TypedDocument,
    raw: bytes,
    key: SessionKey,
    modules: Mapping[str, SupportsState],
    strict: bool,
    seen: Expected | None,
) -> tuple[dict[str, LoadResult], DeltaBase | None, HeadHistory | None] | None:
    """:func:`_load_typed` once its decoder is known (``seen``: what this object last wrote or loaded)."""
    last = seen.raw if backend.codec in DEPTH_CHECKING and seen is not None else None
    doc, log, token = split(raw)
    body = doc[len(BOM):] if doc.startswith(BOM) else doc
    # Bytes this object wrote or loaded before passed the depth check then (the built-in
    # codecs check it on both ways; another codec may not): a compare costs less (made
    # only when the bounded decoder does not prove the depth: on a large document it costs more).
    checked = False if last is None else partial(operator.eq, last, raw)
    document = (await backend.run_codec(_boxed, typed, body, checked, size=len(body))).pop()
    if document is not None and log:
        document = await backend.run_codec(with_deltas, document, body, log, token, size=len(log))
    elif document is not None:
        document = with_deltas(document, body, log, token)
    if document is None:
        return None
    meta = meta_of(document)  # (TypedMeta, as with_deltas took it; None: absent)
    history = None
    if meta is not None and meta.history is not None:
        history = remembered_index(seen, raw) or _typed_index(backend, key, document, raw)
    migrated = migrations_run()
    with secrets_with(backend.secret_box):
        results = load_typed(typed, modules, document, strict)
        if results is None:
            return None
        own = None if meta is None else meta.token
        if own is None or migrations_run() != migrated:
            # data a migration upgraded (inside plain JSON) stays in the document as stored: the next save rewrites it
            return results, None, history
        return results, base_after_typed_load(modules, document, raw, own), history


async def _load_plain(
    backend: Backend, raw: bytes, key: SessionKey, modules: Mapping[str, SupportsState], strict: bool
) -> tuple[dict[str, LoadResult], DeltaBase | None, frozenset[str], HeadHistory | None]:
    """The full load: decode to plain data, plan and report every problem, commit.

    Returns:
        The results, the delta base (append-only lists), the document's module names and its history index.
    """
    document = await decode_stored(backend, raw, key)
    meta = document.get(META_KEY)
    history = index_of(meta, backend.source(key)) if isinstance(meta, dict) and HISTORY_KEY in meta else None
    history = over_deltas(history, raw, backend.source(key))
    migrated = migrations_run()
    with paused_gc(), secrets_with(backend.secret_box):
        results = load_many(modules, document, strict=strict, fresh=backend.codec.fast)
    names = frozenset(name for name in document if name != META_KEY)
    if not token_of(document) or migrations_run() != migrated or any(r.unexpected_keys for r in results.values()):
        # keys a lenient load ignored, or data a migration upgraded (an item too), stay in the document
        # as stored: the next save rewrites it (the skeleton check covers missing module keys; an
        # item's missing keys took defaults it may omit)
        return results, None, names, history
    with secrets_with(backend.secret_box):  # saved with append-only lists: what the next save compares with
        return results, base_after_load(modules, document, raw), names, history


async def decode_stored(backend: Backend, raw: bytes, key: SessionKey) -> Mapping[str, Any]:
    """The stored bytes as plain data: the document with its deltas merged in.

    Raises:
        DocumentError: Not a session document, a format newer than this statekit,
            deltas of another document, or metadata moved from the top.
    """
    raw, log, token = split(raw)
    document = await _decode_document(backend, raw, key)
    if log:
        check_token(document, token, backend.source(key), backend.companion_source(key))
        # without the collector: a full pass over the fresh document costs more than the merge
        await backend.run_codec(
            without_gc(merge), document, log, token or "", backend.companion_source(key), size=len(log)
        )
    elif token_of(document) is not None and doc_token(raw) is None:
        raise DocumentError(misplaced(document, backend.saves_deltas()), source=backend.source(key))
    elif token is not None:  # a companion beside a document without a token
        check_token(document, token, backend.source(key), backend.companion_source(key))
    return document


def misplaced(document: Mapping[str, Any], deltas: bool) -> str:
    """Why the token of a decoded document was not found in its first bytes (``deltas``: the
    backend reads them; else the token is out of place there)."""
    if not deltas:
        return ELSEWHERE
    return REORDERED if next(iter(document)) != META_KEY else FAR


async def _decode_document(backend: Backend, raw: bytes, key: SessionKey) -> dict[str, Any]:
    try:
        document = await backend.run_codec(without_gc(backend.codec.loads), raw, None, size=len(raw))
    except DocumentError as err:  # named here, so that a good load never builds the name
        raise DocumentError(err.reason, source=backend.source(key), line=err.line, column=err.column) from None
    document = as_session(document, backend.source(key))
    if META_KEY in document:
        check_meta(document[META_KEY], backend.source(key))
    return document


REORDERED = (
    f"the document's {META_KEY!r} metadata is not its first key (did a tool sort or reorder the keys?): "
    "statekit finds the items appended beside the document by it; move it back to the top of the document"
)

FAR = (
    f"the document's token (in its {META_KEY!r} metadata) is not within its first {HEAD_BYTES} bytes, where "
    "statekit looks for it to find the items appended beside the document (did a tool add keys or spaces to "
    "the metadata?); keep the metadata as statekit wrote it"
)

ELSEWHERE = (
    f"the document's {META_KEY!r} metadata names items appended beside it, as a JSON session file's does "
    "(in its .log companion), which this backend does not read; copy the session with `statekit convert`, "
    "which folds them in"
)


def _typed_index(backend: Backend, key: SessionKey, document: Any, raw: bytes) -> HeadHistory | None:
    """The history index of a typed document whose metadata holds one, read over the deltas ``raw`` carries."""
    return over_deltas(history_of_typed(document, lambda: backend.source(key)), raw, backend.source(key))


def _boxed(typed: TypedDocument, body: bytes, checked: bool | Callable[[], bool]) -> list[Any]:
    """What :func:`decode` returns, in a list the caller empties (so the worker thread's future does not hold it)."""
    return [decode(typed, body, checked)]


def _may_hold_only(seen: Expected | None, modules: Mapping[str, SupportsState]) -> bool:
    """False when the document last seen held other modules: the typed decode would fail on them."""
    return seen is None or seen.names is None or seen.names == frozenset(modules)
