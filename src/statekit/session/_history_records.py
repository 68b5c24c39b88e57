"""History's records: a :class:`Revision` as listed, a :class:`Located` one (the first lines of a head's deltas), the times they hold, the checks that read one and the JSON a save writes of one.

Every field a record or a head's index holds is checked when read, so a
hand-edited head fails with the path of what is wrong (``where``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Final

import attrs
import msgspec

from statekit.errors import DocumentError


@attrs.frozen
class Revision:
    """One revision of a stored session, as :meth:`~statekit.session.SessionBase.history` lists it.

    Attributes:
        revision: Its revision (the string :meth:`~statekit.session.SessionBase.revision` returned
            while it was the head).
        parent: The revision it was saved over (``None``: the session's first revision, or a fork's).
        saved_at: When it was saved (UTC). ``None`` for a revision saved while the session kept no history.
        size: Bytes of the stored document (its deltas included).
        modules: The module names it holds, in the stored order.
        forked_from: ``(user_id, session_id, revision)`` of the revision a fork started from
            (only on a fork's first revision).
    """

    revision: str
    parent: str | None
    saved_at: datetime | None
    size: int
    modules: tuple[str, ...]
    forked_from: tuple[str, str, str] | None = None


@attrs.frozen
class Located:
    """A kept revision that is the first ``lines`` delta lines of a stored head (see :mod:`._lineage`).

    Attributes:
        revision: Its record.
        lines: How many of the head's delta lines it holds.
        blob: The blob holding that head (``None``: the session's head itself, not yet kept as a blob).
    """

    revision: Revision
    lines: int
    blob: str | None = None


Entry = Revision | Located | bytes | msgspec.Raw
"""A kept revision's record in a :class:`HeadHistory`: decoded, located in a head, or its JSON as stored."""


def widest(a: int | None, b: int | None) -> int | None:
    """The larger of two retentions (``None``, keep all, is the largest)."""
    return None if a is None or b is None else max(a, b)


def now_text() -> str:
    """The time a save records (UTC), as a record holds it (see :func:`stamp`), with its microseconds: the
    date and the second are formatted once a second (``datetime.isoformat`` costs a save 1.5 us)."""
    second, fraction = divmod(time.time_ns() // 1000, 1_000_000)
    known = _SECOND[0]
    if known[0] != second:
        known = _SECOND[0] = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{known[1]}.{fraction:06d}Z"


_SECOND: list[tuple[int, str]] = [(-1, "")]
"""The second :func:`now_text` last formatted, and its text (one tuple, replaced whole)."""


def time_of(text: str | None) -> datetime | None:
    """The time a record holds (its text checked when it was read, see :func:`time_checked`), as a
    :class:`Revision` says it; the text is remembered for it (see :func:`stamp`)."""
    if text is None:
        return None
    value = datetime.fromisoformat(text).astimezone(timezone.utc)
    _remember(value, text)
    return value


def time_checked(value: object, where: str, source: str) -> str | None:
    """A time a record or an index holds, checked, as they hold it: ISO 8601 in UTC, written ``Z``.

    Raises:
        DocumentError: Not an ISO 8601 time with its offset.
    """
    if isinstance(value, str) and value.endswith("Z"):
        try:
            datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return value
    parsed = parsed_time(value, where, source)
    return None if parsed is None else stamp(parsed)


def time_text(value: datetime | None) -> str | None:
    """A time as a record holds it: ISO 8601, UTC written ``Z`` (the index rides in every save)."""
    return None if value is None else stamp(value)


def stamp(value: datetime) -> str:
    """A time as a record (or a delta line, see :mod:`._proofs`) holds it: ISO 8601, UTC written ``Z``.

    A UTC time's text is remembered by the time object itself (its identity: hashing an aware datetime
    costs more than writing it): a save writes its time, and the next save writes it again in the record
    of the head it replaces."""
    if value.tzinfo is timezone.utc:
        at = id(value)
        known = _STAMPS.get(at) if _STAMPED_TIMES.get(at) is value else None  # (another thread may clear them)
        if known is not None:
            return known
        text = value.isoformat()[:-6] + "Z"
        _remember(value, text)
        return text
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _remember(value: datetime, text: str) -> None:
    """Remember ``text`` as the record's text of the UTC time ``value`` (see :func:`stamp`)."""
    if len(_STAMPS) >= _STAMPED:
        _STAMPS.clear()
        _STAMPED_TIMES.clear()
    at = id(value)
    _STAMPS[at], _STAMPED_TIMES[at] = text, value  # (holding the time: its id is not given to another meanwhile)


_STAMPS: dict[int, str] = {}
_STAMPED_TIMES: dict[int, datetime] = {}
"""The times :data:`_STAMPS` holds the texts of, by the same ids: two dicts of untracked values, which the
cyclic collector never walks (a pair per entry would be one more tracked object per save)."""
_STAMPED: Final = 1024
"""How many times' texts :func:`stamp` remembers (then it starts again)."""


def record_of(item: object, where: str, source: str, implied: tuple[str | None, tuple[str, ...]]) -> Revision:
    """A kept record, checked; ``implied``: the parent and modules it leaves out (the next record's
    revision, the newer record's modules)."""
    data = checked_mapping(item, where, source)
    revision = data.get("revision")
    if not isinstance(revision, str) or not revision:
        raise DocumentError(f"{where}.revision should be a revision string, got {revision!r}", source=source)
    size = data.get("size")
    if type(size) is not int or size < 0:
        raise DocumentError(f"{where}.size should be an integer >= 0, got {size!r}", source=source)
    return Revision(
        revision=revision,
        parent=optional_revision(data["parent"], f"{where}.parent", source) if "parent" in data else implied[0],
        saved_at=parsed_time(data.get("saved_at"), f"{where}.saved_at", source),
        size=size,
        modules=module_names(data["modules"], f"{where}.modules", source) if "modules" in data else implied[1],
        forked_from=fork_of(data.get("forked_from"), f"{where}.forked_from", source),
    )


class RecordName(msgspec.Struct):
    """What a kept record says of where its bytes are: its revision, the blob holding it (``"in"``) and its lines."""

    revision: str
    blob: str | None = msgspec.field(name="in", default=None)
    lines: int | None = None


RECORD_NAME: Final = msgspec.json.Decoder(RecordName)
"""Reads a record's :class:`RecordName` without checking the rest of it."""


def name_of(entry: Entry) -> str | None:
    """The revision of a kept record, read without checking the rest of it (``None``: it holds no revision string)."""
    if isinstance(entry, Revision):
        return entry.revision
    if isinstance(entry, Located):
        return entry.revision.revision
    try:
        return RECORD_NAME.decode(entry).revision
    except msgspec.DecodeError:
        return None


def record_json(entry: Entry, older: Entry | None, newer: tuple[str, ...] | None) -> dict[str, Any]:
    """The record of a decoded kept revision (a :class:`Revision` or a :class:`Located` one), as stored: it leaves
    out its parent when that is the next (``older``) record, and its modules when they are ``newer`` (the newer
    record's, or the head's; ``None``: not known)."""
    located = entry if isinstance(entry, Located) else None
    kept = entry.revision if isinstance(entry, Located) else entry
    assert isinstance(kept, Revision)
    record: dict[str, Any] = {"revision": kept.revision, "saved_at": time_text(kept.saved_at), "size": kept.size}
    if older is None or kept.parent != (name_of(older) or False):  # (a record without a revision: say it)
        record["parent"] = kept.parent
    if kept.modules != newer:
        record["modules"] = list(kept.modules)
    if kept.forked_from is not None:
        record["forked_from"] = list(kept.forked_from)
    if located is not None:
        assert located.blob is not None, "a revision stored in the head is given its blob before it is written"
        record["in"], record["lines"] = located.blob, located.lines
    return record


def checked_mapping(value: object, where: str, source: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DocumentError(f"{where} should be an object, got {type(value).__name__}", source=source)
    return value


def optional_revision(value: object, where: str, source: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise DocumentError(f"{where} should be a revision string or null, got {value!r}", source=source)
    return value


def parsed_time(value: object, where: str, source: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise DocumentError(f"{where} should be an ISO 8601 time with its offset, got {value!r}", source=source)
    return parsed.astimezone(timezone.utc)


def module_names(value: object, where: str, source: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise DocumentError(f"{where} should be a list of module names, got {value!r}", source=source)
    return tuple(value)


def fork_of(value: object, where: str, source: str) -> tuple[str, str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 3 or not all(
        isinstance(part, str) for part in value
    ):
        raise DocumentError(f"{where} should be [user_id, session_id, revision], got {value!r}", source=source)
    return (value[0], value[1], value[2])
