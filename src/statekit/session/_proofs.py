"""Delta lines that prove themselves: each carries its sequence number and a chained checksum.

A companion (or the deltas after a Redis document) starts with a header line
naming the line format, the document's token and how many deltas were saved
(its format is in :mod:`statekit.session.document`)::

    {"statekit_log":2,"document":"9f2c4e1a0b7d3c55","deltas":2           }
    [[1,"6d1f0c2a"],[["agent","memory","content"],[{"role":"user","text":"hi"}]]]
    [[2,"03be77a9"],[["agent","events"],[7]]]

Each delta line is ``[[sequence, checksum], delta, ...]`` (each delta a
``[path, items]`` pair, as deep in the line as without the proof): the sequence
counts from 1, and the checksum is the CRC-32 of ``"<sequence>,"`` and the bytes
of the deltas, chained from the previous line's checksum (the first line's from
the token's).
So a line repeated, swapped, left out, taken from another document (or from
another copy of this one that went on differently) or changed in any byte is
found, and named by its line. The count (a fixed-width number, rewritten in
place once a new line is stored: in a file after the line's fsync, in Redis by
the same script) finds the last lines cut off; one line more than it says is a
save killed between the two writes, which stored its line. Companions of
format 1 (lines of deltas alone) still load as they did; the next save rewrites
them whole in this format.

A session that keeps history (docs/history.md) names each delta's revision: its
proof also holds the revision the line was saved over and when it was saved,
``[[sequence, checksum, parent, saved_at], delta, ...]``, and the revision of
the stored session is then the SHA-1 of its last line (see
:func:`~statekit.session._revisions.revision_of`): each line names its parent,
so the revisions chain back to the document, and a delta save names its new
revision without hashing what was stored before it.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

from statekit.errors import DocumentError

_SEALED = re.compile(rb'\[\[([1-9][0-9]{0,17}),"([0-9a-f]{8})"(?:,"([0-9a-f]{40})","([0-9TZ:.+-]{1,40})")?\](?:,|(?=\]$))')
_CHAINED = re.compile(rb'\[\[[1-9][0-9]{0,17},"[0-9a-f]{8}","[0-9a-f]{40}",')


def start(token: str) -> int:
    """The checksum the first delta line chains from."""
    return zlib.crc32(token.encode())


def seal(deltas: bytes, sequence: int, previous: int, record: tuple[str, str] | None = None) -> tuple[bytes, int]:
    """The delta line of ``deltas`` (a non-empty JSON array, maybe newline-terminated), and its checksum;
    ``record``: the revision it is saved over and when (a session that keeps history)."""
    body = deltas.removesuffix(b"\n")[1:-1]
    checksum = zlib.crc32(b"%d," % sequence + body, previous)
    named = b"" if record is None else b',"%s","%s"' % (record[0].encode(), record[1].encode())
    return b'[[%d,"%08x"%s]%s]\n' % (sequence, checksum, named, b"," + body if body else b""), checksum


def chained_line(log: bytes) -> bytes | None:
    """The last line of stored deltas when it names its parent revision (a session that keeps history):
    the revision of the stored session is its SHA-1. ``None``: the deltas name no revisions."""
    if not log.endswith(b"\n"):
        return None
    line = log[log.rfind(b"\n", 0, len(log) - 1) + 1 :]
    return line if _CHAINED.match(line) else None


def chained_lines(log: bytes) -> list[tuple[bytes, str | None, str | None]]:
    """Each complete delta line of stored deltas (its newline included; the header line left out), with the
    parent revision and the time its proof names (``None``: it names none, or it is no delta line)."""
    out: list[tuple[bytes, str | None, str | None]] = []
    for line in log.removeprefix(b"\n").split(b"\n")[1:-1]:
        found = _SEALED.match(line)
        parent, at = (None, None) if found is None else found.group(3, 4)
        out.append((line + b"\n", None if parent is None else parent.decode(), None if at is None else at.decode()))
    return out


def last(lines: list[bytes]) -> tuple[int, int]:
    """The sequence and checksum of the last of ``lines`` (checked complete lines), ``(0, 0)``: none."""
    if not lines:
        return 0, 0
    found = _SEALED.match(lines[-1])
    assert found is not None  # checked by the load that read them
    return int(found.group(1)), int(found.group(2), 16)


def check(lines: list[bytes], decoded: list[Any], token: str, count: int | None, source: str) -> list[Any]:
    """The deltas of each sealed line, once every line proved to be the next one of this document.

    Args:
        lines: The companion's delta lines (line 2 on), without their newlines.
        decoded: Each line decoded.
        token: The document's token.
        count: How many deltas the header says were saved (``None``: it keeps
            no count). One line more is a save killed after its line was
            stored and before the count was.
        source: The companion's name, for errors.

    Raises:
        DocumentError: A line that is not the next delta of this document, at its line.
    """
    out: list[Any] = []
    previous, crc32, match = start(token), zlib.crc32, _SEALED.match
    for index, (line, value) in enumerate(zip(lines, decoded, strict=True)):
        found = match(line)
        if found is None or line[-1:] != b"]" or type(value) is not list or len(value) < (1 if found.group(3) else 2):
            raise DocumentError(
                "not a delta line of this companion's format ([[sequence, checksum], delta, ...])",
                source=source,
                line=index + 2,
            )
        sequence, checksum = found.group(1, 2)
        if int(sequence) != index + 1:
            raise DocumentError(_out_of_place(int(sequence), index + 1), source=source, line=index + 2)
        previous = crc32(memoryview(line)[found.end() : -1], crc32(sequence + b",", previous))
        if previous != int(checksum, 16):
            raise DocumentError(
                f"delta {index + 1} fails its checksum: the line was changed, or comes from another document "
                "(or from another copy of this one); restore the companion from where it came, or move it away "
                "to load the document alone",
                source=source,
                line=index + 2,
            )
        out.append(value[1:])
    if count is not None and not count <= len(lines) <= count + 1:
        raise DocumentError(
            f"the header says {count} deltas were saved, but {len(lines)} are here: "
            + ("the last ones were cut off" if len(lines) < count else "lines were added after the last save")
            + "; restore the companion from where it came, or move it away to load the document alone",
            source=source,
            line=len(lines) + 2 if len(lines) < count else count + 3,
        )
    return out


def _out_of_place(sequence: int, expected: int) -> str:
    if sequence < expected:  # every line before was the delta of its place
        return f"delta {sequence} again (line {sequence + 1} was delta {sequence}): a line was repeated or moved"
    return f"delta {sequence} where delta {expected} belongs: a line is missing or was moved"
