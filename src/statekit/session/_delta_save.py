"""Saving and loading sessions whose modules hold append-only lists (see :mod:`._appends`).

A save dumps the modules once, holding the append-only lists back; when only
appends happened since the session object last loaded or saved (see
:func:`~statekit.session._appends.new_items`) it stores just the new items,
otherwise (or once the deltas pass the compaction threshold) it encodes the
lists too and rewrites the document, with a new token. In a session that keeps
history a delta names its revision (see :mod:`._lineage`), and a rewrite is
planned by :func:`~._history.plan` like every write that keeps history.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from statekit.state.foreign import SupportsState
from statekit.state.gc import paused_gc
from statekit.state.dump import Held, dump_many
from statekit.values.secrets import secrets_with
from statekit.errors import ConflictError, StatekitError
from statekit.session._appends import (
    Path,
    DeltaBase,
    base_after_write,
    delta_line,
    fill,
    new_items,
    new_token,
    saved_after,
    skeleton_bytes,
)
from statekit.session._archive import Step
from statekit.session._backend import Backend
from statekit.session._cancel import finished_despite_cancel
from statekit.session._history import plan
from statekit.session._history_beside import Moved, complete
from statekit.session._history_index import HeadHistory
from statekit.session._history_records import now_text, widest
from statekit.session._ids import SessionKey
from statekit.session._kept import Others
from statekit.session._lineage import after_line
from statekit.session._log import log_unpruned
from statekit.session._prefix import Prefix
from statekit.session._revisions import Expected, conflict_message, line_revision
from statekit.session.document import appends_document, plain_document


async def save_with_appends(
    backend: Backend,
    key: SessionKey,
    modules: Mapping[str, SupportsState],
    expected: Expected,
    kept: Callable[[], Others | Awaitable[Others]],
) -> int:
    """Save ``modules``: a delta when only appends happened, else the whole document.

    Args:
        backend: The session's storage.
        key: Where.
        modules: What.
        expected: What the save must find stored.
        kept: Finds the stored modules the save does not name (for a whole document): at once, or to await.

    Returns:
        The bytes written.
    """
    base = expected.base
    history = expected.history if isinstance(expected.history, HeadHistory) else None
    held: Held = []
    dumped = None
    if base is not None and _deltas_keep(backend, history):  # a delta may do: dump now, and decide
        with paused_gc(), secrets_with(backend.secret_box):
            skeleton = dump_many(modules, live=True, held=held)
        shape = skeleton_bytes(skeleton)
        parts = new_items(base, shape, held) if held else None
        if parts is not None:
            line = delta_line(parts)
            if not base.compacts(len(line)):
                items = saved_after(base, parts)  # what the line holds: taken before any await
                await _save_delta(backend, key, (base, line, items), expected, history)
                return len(line)
        dumped = skeleton, shape
    found = kept()
    others = found if isinstance(found, Others) else await found
    step = None
    if backend.supports_history and (history is not None or backend.keep_history != 0):
        step, _ = await plan(backend, key, others.expected, others.ordered(modules))
        dumped = None  # planning may have read: dump again
    if dumped is None or others.read:  # the live dump is taken after the last await: nothing changes it before encoding
        held, raw = [], None
        with paused_gc(), secrets_with(backend.secret_box):
            skeleton = dump_many(modules, live=True, held=held)
            if not held:  # nothing append-only: the plain save
                raw = backend.codec.dumps(plain_document(others.merged(skeleton), _meta(backend, step)))
                del skeleton  # freed before the collector is back on (else its next pass walks all of it)
        if raw is not None:
            await backend.store(key, raw, others.expected, overwrite=False, names=others.names(modules), step=step)
            return len(raw)
        shape = skeleton_bytes(skeleton)
    else:
        skeleton, shape = dumped
        dumped = None
        if not held:
            with paused_gc(), secrets_with(backend.secret_box):
                raw = backend.codec.dumps(plain_document(others.merged(skeleton), _meta(backend, step)))
                del skeleton  # freed before the collector is back on (else its next pass walks all of it)
            await backend.store(key, raw, others.expected, overwrite=False, names=others.names(modules), step=step)
            return len(raw)
    return await _save_full(backend, key, (skeleton, shape, held), others, modules, step)


def _meta(backend: Backend, step: Step | None) -> dict[str, Any] | None:
    """The history index the document's metadata holds (``None``: none): made for its encoding alone, so
    that nothing of it is held while the write waits."""
    return None if step is None else step.meta(json=backend.codec.fast)


def _deltas_keep(backend: Backend, history: HeadHistory | None) -> bool:
    """Whether a delta save keeps the session's history as a full write would: it keeps none and the object
    is to keep none, or it keeps the object's retention or more (a delta does not change the head's index)."""
    if history is None:
        return not backend.supports_history or backend.keep_history == 0
    return widest(history.keep, backend.keep_history) == history.keep


@finished_despite_cancel
async def _save_delta(
    backend: Backend,
    key: SessionKey,
    delta: tuple[DeltaBase, bytes, Mapping[Path, Prefix]],
    expected: Expected,
    history: HeadHistory | None,
) -> None:
    """Append ``line`` over ``base`` and remember that the lists then hold ``items`` (and the document still
    ``expected.names``); in a session that keeps ``history``, the line names its revision, and the blobs
    of revisions it pushes past the retention are removed.

    ``items`` is taken by the caller along with ``line``: on backends that write in
    threads this runs as a task of its own, after other tasks may have appended more.
    """
    base, line, items = delta
    head, record = None, None
    if history is not None and history.unread and history.keep is not None:  # records kept beside the head:
        try:  # read once, for those the line pushes past the retention
            history = await complete(backend, key, history)
        except Moved as err:  # another head was written since this one was read
            raise ConflictError(conflict_message(err.source, created=False), source=err.source) from None
    if history is not None:  # a save that keeps history makes a revision, even one that appends nothing
        head = history.head(expected.revision, base.doc_len + base.log_len)
        record, line = (head.revision, now_text()), line or b"[]"
    line, chain = base.sealed(line, record) if line else (line, None)
    written = await backend.append(key, line, base)  # b"": only the revision check
    if written is None:
        source = backend.source(key)
        raise ConflictError(conflict_message(source, created=False), source=source)
    if history is None or head is None or record is None:
        backend.revisions.remember(key, Expected(base=base.after(written, items, chain), names=expected.names))
        return
    history, gone = after_line(history, head, base.count, record[1])
    after = base.after(written, items, chain, line_revision(line))
    backend.revisions.remember(key, Expected(base=after, names=expected.names, history=history))
    if gone:  # after the line is stored: a crash in between leaves blobs no revision names (delete sweeps them)
        try:
            await backend.blobs.drop(backend.faults, key, tuple(sorted(gone)))
        except StatekitError as err:  # the turn is saved: say so, rather than fail a save that landed
            log_unpruned(backend.source(key), len(gone), err)


async def _save_full(
    backend: Backend,
    key: SessionKey,
    dumped: tuple[dict[str, Any], bytes, Held],
    others: Others,
    modules: Mapping[str, SupportsState],
    step: Step | None,
) -> int:
    skeleton, shape, held = dumped
    token = new_token()
    with paused_gc():
        fill(held)
        raw = backend.codec.dumps(appends_document(token, others.merged(skeleton), _meta(backend, step)))
    base = base_after_write(token, len(raw), shape, held)
    await backend.store(key, raw, others.expected, overwrite=False, base=base, names=others.names(modules), step=step)
    return len(raw)
