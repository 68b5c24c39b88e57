"""Every exception statekit raises derives from :class:`StatekitError`.

Load errors carry *all* the problems found, each with the path of the offending
value (``memory.content[3].role``) and, when the data came from a file, the
file, line and column where it sits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import attrs

PathSegment = str | int
"""One step of a path: a mapping key (``str``) or a list index (``int``)."""


def format_path(path: Sequence[PathSegment]) -> str:
    """Render a path the way users write it: ``memory.content[3].role``.

    Args:
        path: The segments from the root, keys as ``str`` and indices as ``int``.

    Returns:
        The dotted form; ``"<root>"`` for the empty path. A key that is not
        a plain name is written quoted, as JSON writes it: ``tags["a.b"]``.
    """
    out: list[str] = []
    for segment in path:
        if isinstance(segment, int):
            out.append(f"[{segment}]")
        elif _PLAIN_KEY.fullmatch(segment):
            out.append(f".{segment}" if out else segment)
        else:  # quoted: a key "a.b" is not a.b, and a newline or an escape code cannot forge output
            out.append(f"[{_quoted(segment)}]")
    return "".join(out) or "<root>"


_PLAIN_KEY = re.compile(r"[^\W\d][\w-]*")
"""Keys written bare in a path: a letter or ``_``, then letters, digits, ``_`` or ``-``."""


def _quoted(key: str) -> str:
    """``key`` as a JSON string, with every character that does not print escaped too."""
    body = json.dumps(key, ensure_ascii=False)[1:-1]
    return '"' + "".join(char if char.isprintable() else f"\\u{ord(char):04x}" for char in body) + '"'


@attrs.frozen
class Problem:
    """One thing wrong with loaded data.

    Attributes:
        path: Segments from the root of the loaded document.
        message: What is wrong, in plain words.
        source: The file (or other source) the data came from, when known.
        line: 1-based line in ``source``, when known.
        column: 1-based column in ``source``, when known.
    """

    path: tuple[PathSegment, ...]
    message: str
    source: str | None = None
    line: int | None = None
    column: int | None = None

    @property
    def dotted(self) -> str:
        """The path as ``memory.content[3].role``."""
        return format_path(self.path)

    def __str__(self) -> str:
        where = ""
        if self.source is not None:
            where = self.source
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        return f"{where}{self.dotted}: {self.message}"


class StatekitError(Exception):
    """Base class of every error statekit raises."""


class StateDefinitionError(StatekitError, TypeError):
    """A ``@stateful`` class declares something statekit cannot save or load."""


class StateModuleNameError(StateDefinitionError, ValueError):
    """``register_state`` named an attribute that holds a module (nested state already).

    Also a ``ValueError``, which is what AgentScope raises.
    """


class StateAttributeError(StatekitError, AttributeError):
    """``register_state`` named an attribute the object does not have.

    Also an ``AttributeError``, which is what AgentScope code catches.
    """


class StateDumpError(StatekitError, ValueError):
    """``state_dict()`` met a value that is not JSON data (or a codec failed)."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__(_render("cannot dump state", self.problems))


class StateLoadError(StatekitError, ValueError):
    """Loaded data does not fit the declared state; nothing was changed.

    Attributes:
        problems: Every problem found, in document order.
        hint: What most likely fixes them (the last line of the message), or ``None``.
    """

    def __init__(self, problems: Iterable[Problem], *, title: str = "cannot load state", hint: str | None = None) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.title = title
        self.hint = hint
        message = _render(title, self.problems)
        super().__init__(message if hint is None else f"{message}\nhint: {hint}")

    @property
    def paths(self) -> list[str]:
        """The dotted path of every problem."""
        return [p.dotted for p in self.problems]

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_load_error, (self.problems, self.title, self.hint))


def with_positions(
    error: StateLoadError,
    source: str | None,
    locate: Callable[[tuple[PathSegment, ...]], tuple[int, int] | None],
) -> StateLoadError:
    """Return a copy of ``error`` whose problems name their file, line and column.

    Args:
        error: The error raised by the state layer.
        source: The file (or other source) the data was read from.
        locate: Maps a path to its 1-based ``(line, column)``, or ``None`` when
            the path is not in the document (a missing key).

    Returns:
        A new :class:`StateLoadError` with the same problems, now positioned.
    """
    problems = []
    for problem in error.problems:
        position = locate(problem.path)
        line, column = position if position is not None else (None, None)
        problems.append(attrs.evolve(problem, source=source, line=line, column=column))
    return StateLoadError(problems, title=error.title, hint=error.hint)


def _rebuild_load_error(problems: tuple[Problem, ...], title: str, hint: str | None = None) -> StateLoadError:
    return StateLoadError(problems, title=title, hint=hint)


def _render(title: str, problems: Sequence[Problem]) -> str:
    noun = "problem" if len(problems) == 1 else "problems"
    lines = [f"{title}: {len(problems)} {noun}"]
    lines.extend(f"  {p}" for p in problems)
    return "\n".join(lines)


class StateVersionError(StatekitError, ValueError):
    """Versioned data cannot be brought to its class's version; nothing was changed.

    Raised for data newer than the class (saved by newer code), a
    ``__version__`` that is not an int, and a migration that raised or returned
    something other than a dict.

    Attributes:
        path: Segments from the root of the load to the state that failed.
        found: The data's version (``1`` when it carries none).
        expected: The class's version.
        reason: What is wrong, without the path.
        source: The file (or other source) the data came from, when known.
    """

    def __init__(
        self, reason: str, *, path: Sequence[PathSegment] = (), found: object, expected: int, source: str | None = None
    ) -> None:
        self.reason = reason
        self.path: tuple[PathSegment, ...] = tuple(path)
        self.found = found
        self.expected = expected
        self.source = source
        where = f"{source}: " if source is not None else ""
        super().__init__(f"{where}{format_path(self.path)}: {reason}")

    def under(self, prefix: Sequence[PathSegment]) -> StateVersionError:
        """The same error, its path starting at ``prefix`` (where the load began)."""
        return self._evolve(path=(*prefix, *self.path))

    def located(self, source: str | None) -> StateVersionError:
        """The same error, naming the file (or other source) the data came from."""
        return self._evolve(source=source)

    def _evolve(self, **changes: Any) -> StateVersionError:
        fields = {"path": self.path, "found": self.found, "expected": self.expected, "source": self.source}
        return StateVersionError(self.reason, **{**fields, **changes})

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_version_error, (self.reason, self.path, self.found, self.expected, self.source))


def _rebuild_version_error(
    reason: str, path: tuple[PathSegment, ...], found: object, expected: int, source: str | None
) -> StateVersionError:
    return StateVersionError(reason, path=path, found=found, expected=expected, source=source)


class DocumentError(StatekitError, ValueError):
    """A file or byte string could not be parsed (syntax, encoding, unsafe tag).

    Attributes:
        source: The file or other source, when known.
        line: 1-based line of the fault, when known.
        column: 1-based column of the fault, when known.
        reason: What is wrong, without the location.
    """

    def __init__(
        self,
        reason: str,
        *,
        source: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.reason = reason
        self.source = source
        self.line = line
        self.column = column
        where = source or "<data>"
        if line is not None:
            where += f":{line}" + (f":{column}" if column is not None else "")
        super().__init__(f"{where}: {reason}")


class SessionError(StatekitError):
    """Base class of errors raised by session backends."""


class SessionNotFoundError(SessionError, LookupError, ValueError):
    """The requested session does not exist (and ``allow_not_exist`` was false).

    Also a ``ValueError``, which is what AgentScope code catches.
    """


class InvalidSessionIdError(SessionError, ValueError):
    """A ``session_id`` or ``user_id`` is empty, too long or contains NUL."""


class BackendUnavailableError(SessionError, ConnectionError):
    """The storage could not be reached (a Redis server that is down or refuses)."""


class WriteOutcomeUnknownError(BackendUnavailableError):
    """A write was sent but the storage stopped answering before saying whether it was applied.

    The write may or may not have been applied (the server may still run it):
    load the session to see which. Raised instead of a plain
    :class:`BackendUnavailableError`, which says that nothing was sent.
    """


class BackendAuthError(SessionError, PermissionError):
    """The storage refused our credentials (a wrong Redis password or ACL user).

    Not a :class:`BackendUnavailableError`: retrying will not help.
    """


class ConflictError(SessionError):
    """A save lost a race: the session changed since this object last loaded or saved it.

    The save was refused and nothing was written. Load again and redo the change (``update()`` does this for you), or save
    with ``overwrite=True`` to replace whatever is stored.

    Attributes:
        source: Where the session is stored (a file path or a Redis key).
    """

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_conflict, (str(self), self.source))


def _rebuild_conflict(message: str, source: str) -> ConflictError:
    return ConflictError(message, source=source)


class LeaseError(ConflictError):
    """A write refused by a session's lease (:class:`LeaseHeldError`, :class:`LeaseLostError`).

    Not a race that another attempt wins: ``update()`` and the other retry
    loops raise it at once (docs/leases.md).
    """


class LeaseHeldError(LeaseError):
    """Another session object holds the session's lease: the write (or the lease asked for) was refused.

    Nothing was written. Take the lease (``session.lease(...)``, with ``wait=``
    to wait for it) before writing a session that others lease, or wait until it is released.

    Attributes:
        source: Where the session is stored.
        held_until: When the lease ends unless it is renewed (UTC), as the store knows it.
    """

    def __init__(self, message: str, *, source: str, held_until: datetime | None = None) -> None:
        super().__init__(message, source=source)
        self.held_until = held_until

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_held, (str(self), self.source, self.held_until))


def _rebuild_held(message: str, source: str, held_until: datetime | None) -> LeaseHeldError:
    return LeaseHeldError(message, source=source, held_until=held_until)


class LeaseLostError(LeaseError):
    """The lease this session object held expired or was taken over: the write (or ``renew``) was refused.

    Nothing was written: another worker may own the session now (fencing). Take
    the lease again and load before changing the session.

    Attributes:
        source: Where the session is stored.
        token: The fencing token of the lost lease.
    """

    def __init__(self, message: str, *, source: str, token: int) -> None:
        super().__init__(message, source=source)
        self.token = token

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_lost, (str(self), self.source, self.token))


def _rebuild_lost(message: str, source: str, token: int) -> LeaseLostError:
    return LeaseLostError(message, source=source, token=token)


class MissingExtraError(StatekitError, ImportError):
    """An optional dependency is not installed; the message names the extra."""


class SecretError(StatekitError):
    """A secret field cannot be sealed or opened: a malformed key, a wrong key, an altered value.

    The message never quotes the key or the secret.
    """
