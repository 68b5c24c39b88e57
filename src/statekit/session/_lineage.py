"""History over deltas: the revisions a head's delta lines name, read into its history index, and the bytes each one was.

A session that keeps history and holds append-only lists saves a turn as one
delta line, as without history (O(new items)), and that line names the
revision it was saved over and when (see :mod:`._proofs`). So the head
document (``T``) and its lines ``L1..Ln`` hold ``n + 1`` revisions: the document
alone, and each prefix ``T + L1..Lk``. Nothing else is stored for them: the
head's index (what its document's metadata says, see :mod:`._history_index`)
is read *over* its lines, each prefix becoming a :class:`Located` record, and a
revision's bytes are cut back from the head (:func:`prefix_of`). When a full
write replaces the head, the old head is kept whole as one blob, and its
prefixes' records name that blob.
"""

from __future__ import annotations

from datetime import datetime, timezone

import msgspec

from statekit.errors import DocumentError
from statekit.session._companion import joined, split
from statekit.session._history_index import HeadHistory
from statekit.session._history_records import Located, Revision, time_checked
from statekit.session._proofs import chained_lines
from statekit.session._revisions import Expected, line_revision, revision_of
from statekit.session.document import deltas_flag, header, header_of


def over_deltas(index: HeadHistory | None, raw: bytes, source: str) -> HeadHistory | None:
    """The history index of stored bytes: their document's ``index``, read over the delta lines they carry.

    Args:
        index: What the document's metadata holds (``None``: it keeps no history).
        raw: The stored bytes (a document carrying deltas, or not).
        source: Where they are stored, for errors.

    Raises:
        DocumentError: A delta line of a document that keeps history names no revision, or not the one before it.
    """
    doc, log, token = split(raw)
    if index is None or not log or token is None:
        return index
    lines = chained_lines(log)
    if not lines:
        return index
    lead = len(log) - sum(len(line) for line, _, _ in lines)  # a newline (in one value) and the header line
    size, parent = len(doc) + lead, None
    located: list[Located] = []
    for number, (line, named, at) in enumerate(lines):
        if named is None or at is None:
            raise DocumentError(
                f"delta {number + 1} names no revision, but its document keeps history: it was not written by "
                "this statekit; restore the session from where it came",
                source=source,
            )
        if parent is not None and named != parent.revision:
            raise DocumentError(
                f"delta {number + 1} was saved over revision {named}, but the delta before it is {parent.revision}: "
                "a line was changed or moved; restore the session from where it came",
                source=source,
            )
        if parent is None:  # the document alone: what its metadata says of it
            parent = index.head(named, len(doc))
        located.append(Located(parent, number))
        size += len(line)
        parent, saved_at = Revision(line_revision(line), named, _at(at, number, source), size, index.modules), at
    assert parent is not None
    entries = (*reversed(located), *index.entries)
    over = HeadHistory(
        keep=index.keep,
        saved_at=time_checked(saved_at, f"delta {len(lines)}'s time", source),
        parent=parent.parent,
        forked_from=None,
        modules=index.modules,
        entries=entries,
        source=index.source,
        beside=index.beside,
        unread=index.unread,
    )
    return over.within_keep()


_COMPARED_BYTES = 1 << 16
"""Loaded bytes up to this size are compared with the bytes last seen before their index is read."""


def remembered_index(seen: Expected | None, raw: bytes) -> HeadHistory | None:
    """The history index the object remembers of loaded bytes that hold one, when they are the bytes it last
    wrote or loaded (a turn's load after its own save reads no index); ``None``: read it from them."""
    if seen is None or not isinstance(seen.history, HeadHistory) or seen.raw is None or len(raw) > _COMPARED_BYTES:
        return None  # (a large head: reading its index costs less than comparing it)
    return seen.history if seen.raw == raw else None


def after_line(index: HeadHistory, head: Revision, lines: int, saved_at: str) -> tuple[HeadHistory, set[str]]:
    """The history index once a delta line saved at ``saved_at`` is stored over ``head`` (whose index is
    ``index``), which held ``lines`` delta lines; and the blobs no revision it keeps is in any more (to remove)."""
    entries = (Located(head, lines), *index.entries)
    over = HeadHistory(
        keep=index.keep,
        saved_at=time_checked(saved_at, f"delta {lines + 1}'s time", index.source()),
        parent=head.revision,
        forked_from=None,
        modules=index.modules,
        entries=entries,
        source=index.source,
        beside=index.beside,
        unread=index.unread,
    )
    if index.keep is None or len(entries) <= index.keep:
        return over, set()
    gone = over.blobs(index.keep) - over.blobs(0, index.keep)
    return msgspec.structs.replace(over, entries=over.truncated(index.keep)), gone


def prefix_of(raw: bytes, lines: int, source: str) -> bytes:
    """The stored bytes of the revision that held the first ``lines`` delta lines of ``raw``, as a read
    returned them then (the document alone, its ``"deltas"`` flag 0, when ``lines`` is 0).

    Raises:
        DocumentError: ``raw`` holds fewer delta lines (a damaged blob).
    """
    doc, log, token = split(raw)
    if lines == 0:
        flag = deltas_flag(doc)
        if flag is not None and flag[1]:
            return doc[: flag[0]] + b"0" + doc[flag[0] + 1 :]
        return bytes(doc)
    held = chained_lines(log) if token is not None else []
    if len(held) < lines:
        raise DocumentError(f"the stored bytes hold {len(held)} delta line(s), not the {lines} a kept revision names", source=source)
    lead = b"\n" if log.startswith(b"\n") else b""
    found = header_of(log[len(lead) :].split(b"\n", 1)[0])
    if token is None or found is None or found[1] != token:
        raise DocumentError("the delta lines of a kept revision do not follow a header naming their document", source=source)
    counted = lines if found[2] is not None else None
    return joined(bytes(doc), lead + header(token, counted) + b"".join(line for line, _, _ in held[:lines]), token)


def check_root(raw: bytes, source: str) -> None:
    """Refuse stored bytes whose first delta line names a parent other than their document: the document
    was changed under deltas that name revisions (a revision cut from them would not be what was saved).

    Raises:
        DocumentError: Saying so.
    """
    lines = chained_lines(split(raw)[1])
    named = lines[0][1] if lines else None
    if named is not None and revision_of(prefix_of(raw, 0, source)) != named:
        raise DocumentError(
            f"the document was changed after the deltas that follow it were saved (its first delta was saved "
            f"over revision {named}): the revisions they name would not load as saved; restore the session from "
            "where it came",
            source=source,
        )


def _at(text: str, number: int, source: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise DocumentError(f"delta {number + 1} names its time as {text!r}, not an ISO 8601 time with its offset", source=source)
    return when.astimezone(timezone.utc)
