"""YAML syntax errors in plain words, at the line where the mistake is.

libyaml stops at the first token that does not fit, which is often the line
*after* the mistake: a key indented one space too far is only noticed when the
next line comes back to the right indentation. These helpers move the report
to the line to blame and say what is wrong there. Error path only.
"""

from __future__ import annotations

import re

import yaml

from statekit.errors import DocumentError

TAB = "a tab character; YAML indents with spaces"

_MISPLACED_COLON = ("mapping values are not allowed",)
_DEDENT = (
    "did not find expected key",
    "did not find expected '-' indicator",
    "expected <block end>",
    "did not find expected <document start>",
    "expected '<document start>'",
)
_SIMPLE_KEY = "could not find expected ':'"
_INDICATORS = re.compile(r"[ ]*(?:[-?:][ ]+)*")
_INDICATOR = re.compile(r"[-?:][ ]+")
_UNCLOSED_PROBLEMS = ("found unexpected end of stream", "did not find expected ',' or", "expected ',' or")
_UNCLOSED = {
    "quoted scalar": "a quoted string that is never closed",
    "flow sequence": "a '[' list that is never closed (or a missing ',')",
    "flow mapping": "a '{' mapping that is never closed (or a missing ',')",
}
_PLAIN_WORDS = {
    "mapping values are not allowed in this context": "a ':' where no key can start (check this line's indentation, or quote a value that holds ': ')",
    "mapping values are not allowed here": "a ':' where no key can start (check this line's indentation, or quote a value that holds ': ')",
    "did not find expected key": "this line's indentation matches no mapping above it",
    "did not find expected '-' indicator": "expected a list item ('- ') at this indentation",
}
_KEY_VALUE = re.compile(r"[ ]*(?:-[ ]+)*[^\s#][^#]*?:[ ]+[^\s#|>]")
_UTF16 = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}
_NOT_PRINTABLE = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")  # what libyaml counts as the end of a line


def marked_error(err: yaml.MarkedYAMLError, raw: bytes, source: str | None) -> DocumentError:
    """A :class:`DocumentError` for a YAML syntax error, placed and worded for people.

    Args:
        err: The error the parser raised.
        raw: The document.
        source: The file name to show.

    Returns:
        The error, at the line to blame.
    """
    reason = "; ".join(part for part in (err.context, err.problem) if part)
    mark = err.problem_mark or err.context_mark
    if mark is None:
        return DocumentError(f"invalid YAML: {reason}", source=source)
    lines = raw.decode("utf-8", "replace").splitlines()
    line, column = mark.line, mark.column
    blamed = _blame(err, lines, line, column)
    if blamed is not None:
        return DocumentError(f"invalid YAML: {blamed[2]}", source=source, line=blamed[0] + 1, column=blamed[1] + 1)
    if _char_at(lines, line, column) == "\t" or "tab" in reason:
        reason = TAB
    reason = _PLAIN_WORDS.get(err.problem or "", reason)
    return DocumentError(f"invalid YAML: {reason}", source=source, line=line + 1, column=column + 1)


def reader_error(raw: bytes, err: yaml.reader.ReaderError, source: str | None) -> DocumentError:
    """A :class:`DocumentError` for bytes YAML cannot read (not UTF-8/16, a control character).

    The place is found again in ``raw``, as a line and a column in characters
    (the reader's own position is a byte offset with libyaml, a character
    offset without it).

    Args:
        err: The error the reader raised.
        raw: The document.
        source: The file name to show.

    Returns:
        The error, at the first character that cannot be read.
    """
    encoding = _UTF16.get(raw[:2], "utf-8")
    body = raw[2:] if encoding != "utf-8" else raw.removeprefix(b"\xef\xbb\xbf")
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as bad:
        text = body[: bad.start].decode(encoding)
    else:
        found = _NOT_PRINTABLE.search(text)
        text = text if found is None else text[: found.start()]
    lines = _BREAK.split(text)
    return DocumentError(f"invalid YAML: {err.reason}", source=source, line=len(lines), column=len(lines[-1]) + 1)


def _blame(err: yaml.MarkedYAMLError, lines: list[str], line: int, column: int) -> tuple[int, int, str] | None:
    problem, start = err.problem or "", err.context_mark
    for opened, reason in _UNCLOSED.items():
        if start is not None and opened in (err.context or "") and problem.startswith(_UNCLOSED_PROBLEMS):
            return start.line, start.column, reason
    if problem.startswith(_SIMPLE_KEY) and start is not None:
        return start.line, start.column, "a line that is neither a 'key: value' nor a list item (a missing ':'?)"
    previous = _previous_content_line(lines, line)
    if previous is None:
        return None
    here, there = _content_column(lines[previous]), _content_column(_line(lines, line))
    colon = problem.startswith(_MISPLACED_COLON) and here < there and _KEY_VALUE.match(lines[previous]) is not None
    dedent = problem.startswith(_DEDENT) and column not in _start_columns(lines[previous]) and column < here
    if not (colon or dedent):
        return None
    following = _next_content_line(lines, line)
    if following is not None and _content_column(lines[following]) == there:
        return _misaligned(previous, here, line, there)  # the line after agrees with this one
    return _misaligned(line, there, previous, here)


def _start_columns(text: str) -> set[int]:
    """The columns where nodes start on a line: its indentation and after each indicator."""
    columns = {len(text) - len(text.lstrip(" "))}
    columns.update(match.end() for match in _INDICATOR.finditer(text, 0, _content_column(text)))
    return columns


def _misaligned(blamed: int, here: int, other: int, there: int) -> tuple[int, int, str]:
    reason = (
        f"bad indentation: this line starts in column {here + 1}, line {other + 1} in column {there + 1}; "
        "the keys of one mapping, and the items of one list, must line up"
    )
    return blamed, here, reason


def _line(lines: list[str], line: int) -> str:
    return lines[line] if line < len(lines) else ""


def _next_content_line(lines: list[str], line: int) -> int | None:
    for index in range(line + 1, len(lines)):
        text = lines[index].strip()
        if text and not text.startswith("#"):
            return index
    return None


def _previous_content_line(lines: list[str], line: int) -> int | None:
    for index in range(min(line, len(lines)) - 1, -1, -1):
        text = lines[index].strip()
        if text and not text.startswith("#"):
            return index
    return None


def _content_column(text: str) -> int:
    """Where a line's content starts, after its indentation and ``- `` indicators."""
    match = _INDICATORS.match(text)
    return match.end() if match else 0


def _char_at(lines: list[str], line: int, column: int) -> str:
    if line < len(lines) and column < len(lines[line]):
        return lines[line][column]
    return ""
