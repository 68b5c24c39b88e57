"""What Python's ``json`` writes that JSON cannot hold: NaN and Infinity, and lone surrogates.

AgentScope 1.x saves sessions with ``json.dumps``, which writes ``NaN``,
``Infinity`` and ``-Infinity`` for such floats, into a file opened with
``errors="surrogatepass"``, which writes a lone surrogate (half of a UTF-16
pair, such as a cut emoji) as bytes that are not UTF-8. statekit reads neither
(no other JSON reader does, and it could not write them back): :func:`diagnose`
names the first such value by its path, with the two ways out, and
:func:`repaired` reads the document with ``null`` for each number and U+FFFD
for each lone surrogate (``statekit import-agentscope --replace-invalid``).
"""

from __future__ import annotations

import json
from typing import Any

from statekit.codecs._positions import Path
from statekit.errors import format_path

_BOM = b"\xef\xbb\xbf"

HINT = (
    "replace it where the document is stored, or copy a folder of such files with "
    "`statekit import-agentscope --replace-invalid`, which writes null for NaN and Infinity "
    "and U+FFFD for a lone surrogate (docs/agentscope.md)"
)


class _Constant(str):
    """``NaN``, ``Infinity`` or ``-Infinity`` as read (a marker: a float would not say which)."""


class _Key(str):
    """A key met by :func:`invalid_values` (checked in its place, before its value)."""


def _read(raw: bytes) -> Any:
    """The document as Python's ``json`` reads what it wrote; ``None`` when it cannot either."""
    try:
        return json.loads(raw.removeprefix(_BOM).decode("utf-8", "surrogatepass"), parse_constant=_Constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def _is_whole(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def invalid_values(data: Any) -> list[tuple[Path, str]]:
    """Every NaN, Infinity and lone surrogate in ``data``, as ``(path, what)``, in document order."""
    found: list[tuple[Path, str]] = []
    stack: list[tuple[Path, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, _Constant):
            found.append((path, str(value)))
        elif isinstance(value, str) and not _is_whole(value):
            what = "a lone surrogate" if _whole(value).count("\ufffd") > value.count("\ufffd") else "a surrogate pair in halves"
            found.append((path, f"{what} in the key" if isinstance(value, _Key) else what))
        elif isinstance(value, dict):
            members = [[((*path, key), _Key(key)), ((*path, key), item)] for key, item in value.items()]
            stack.extend(reversed([pair for member in members for pair in member]))  # a key before its value
        elif isinstance(value, list):
            stack.extend(reversed([((*path, index), item) for index, item in enumerate(value)]))
    return found


def diagnose(raw: bytes) -> tuple[Path, str] | None:
    """Why ``raw`` failed to decode, when Python's ``json`` wrote it: ``(path, reason)``, or ``None``."""
    found = invalid_values(_read(raw))
    if not found:
        return None
    path, what = found[0]
    where = format_path(path) or "the top level"
    if what.startswith(("a lone surrogate", "a surrogate pair")):
        reason = (
            f"{what} at {where}: UTF-8 cannot hold it (half of a UTF-16 pair; Python writes them, "
            'as AgentScope 1.x does with errors="surrogatepass")'
        )
    else:
        reason = f"{what} at {where}: JSON has no NaN or Infinity (Python's json.dumps, which AgentScope 1.x saves with, writes them)"
    more = f" ({len(found) - 1} more such value(s) after it)" if len(found) > 1 else ""
    return path, f"invalid JSON: {reason}{more}; {HINT}"


def repaired(raw: bytes) -> tuple[Any, list[tuple[Path, str]]] | None:
    """The document with ``null`` for NaN and Infinity and U+FFFD for lone surrogates,
    and what was replaced where; ``None`` when Python's ``json`` cannot read it either."""
    data = _read(raw)
    if data is None:
        return None
    return _replace(data), invalid_values(data)


def _replace(value: Any) -> Any:
    if isinstance(value, _Constant):
        return None
    if isinstance(value, str):
        return value if _is_whole(value) else _whole(value)
    if isinstance(value, dict):
        return {_whole(key): _replace(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace(item) for item in value]
    return value


def _whole(text: str) -> str:
    """``text`` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


__all__ = ["HINT", "diagnose", "invalid_values", "repaired"]
