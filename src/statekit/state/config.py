"""``from_config`` and ``seed``: state from hand-written YAML or JSON files.

A config file holds the state of one ``@stateful`` class, written by a person:
comments are welcome (YAML), fields left out take their defaults. Every error
names the file, the line (and column when known) and the field path, and
nothing is built or changed when loading fails.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs

from statekit.codecs import JSON, YAML, Codec, with_document_positions
from statekit.values.plain import describe
from statekit.state.base import overrides_load
from statekit.state.load import Loader, build, refuse_too_deep
from statekit.state.module import LoadResult, StateModule
from statekit.state.schema import require_stateful_class
from statekit.errors import DocumentError, Problem, StateDefinitionError, StateLoadError, StateVersionError

T = TypeVar("T")

ConfigSource = str | os.PathLike[str] | Mapping[str, Any]
"""A config file path (``.yaml``, ``.yml`` or ``.json``) or the data itself."""

CODECS: dict[str, Codec] = {".json": JSON, ".yaml": YAML, ".yml": YAML}
"""The codec of each file name suffix statekit reads and writes."""


def codec_for(path: str | os.PathLike[str]) -> Codec:
    """Return the codec of a file, chosen by its suffix (case-insensitive).

    Raises:
        DocumentError: The suffix is not ``.json``, ``.yaml`` or ``.yml``.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in CODECS:
        known = ", ".join(CODECS)
        got = f"'{suffix}'" if suffix else "no suffix"
        raise DocumentError(f"cannot tell the format from {got}: use one of {known}", source=os.fspath(path))
    return CODECS[suffix]


@attrs.frozen
class Document:
    """Plain data read from a file, with what it takes to position errors.

    Attributes:
        data: The decoded data (``{}`` for an empty file).
        source: The file name, ``None`` for data given directly.
        raw: The bytes it was decoded from.
        codec: The codec that decoded them.
        place: Positions the problems instead of the codec, when the data
            came from more than ``raw`` (a session's appended items).
    """

    data: Any
    source: str | None = None
    raw: bytes | None = None
    codec: Codec | None = None
    place: Callable[[StateLoadError], StateLoadError] | None = None

    def positioned(self, error: StateLoadError) -> StateLoadError:
        """Return ``error`` with file, line and column on every problem, in file order."""
        if self.place is not None:
            located = self.place(error)
        elif self.raw is None or self.codec is None:
            return error
        else:
            located = with_document_positions(error, self.raw, self.source, self.codec)
        ordered = sorted(located.problems, key=lambda problem: _file_order(problem, self.source))
        return StateLoadError(ordered, title=located.title, hint=located.hint)


def _file_order(problem: Problem, first: str | None) -> tuple[bool, int, int]:
    return (problem.source != first, problem.line or 0, problem.column or 0)


def read_document(source: ConfigSource) -> Document:
    """Read and decode a YAML or JSON file, or wrap data given directly.

    Raises:
        DocumentError: The file cannot be read, its suffix is unknown, or it
            is not valid YAML/JSON (with line and column).
    """
    if isinstance(source, Mapping):
        return Document(source)
    if not isinstance(source, (str, os.PathLike)):
        raise StateDefinitionError(f"a config source is a file path or a mapping, got {describe(source)}")
    name = os.fspath(source)
    if "\x00" in name:  # os.open() would raise a bare ValueError
        raise DocumentError(f"cannot read the file: the path {name!r} contains a NUL character", source=name)
    codec = codec_for(name)
    try:
        raw = _read_regular(name)
    except OSError as exc:
        raise DocumentError(f"cannot read the file: {exc.strerror or exc}", source=name) from None
    data = codec.loads_strict(raw, name)
    return Document({} if data is None else data, name, raw, codec)


def _read_regular(name: str) -> bytes:
    """The whole file, refused at once when it is not a regular file (a FIFO would block the read)."""
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:  # checked before open() wraps it: open() refuses a folder and leaves the fd open
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DocumentError("cannot read the file: not a regular file", source=name)
        file = open(fd, "rb")  # noqa: SIM115 - owns the fd from here
    except BaseException:
        os.close(fd)
        raise
    with file:
        return file.read()


def from_config(cls: type[T], source: ConfigSource, *, strict: bool = True) -> T:
    """Build a new instance of a ``@stateful`` class from a config file or mapping.

    Args:
        cls: A ``@stateful`` class: a state module or a value record.
        source: A ``.yaml``/``.yml``/``.json`` file path, or the data itself.
        strict: Reject unknown keys (a typo such as ``tunrs:``) at every depth.
            When false they are ignored.

    Returns:
        The new instance; fields missing from the config take their defaults.

    Raises:
        DocumentError: The file cannot be read or parsed.
        StateLoadError: Every problem (wrong type, missing required field,
            unknown key), each with its file, line, column and field path.
        StateDefinitionError: ``cls`` is not a ``@stateful`` class (or a
            module class overriding ``load_state_dict``, built with no
            arguments and loaded through it).
    """
    if not overrides_load(cls):
        require_stateful_class(cls, module_hint="create one and load it with seed()")
    document = read_document(source)
    try:
        return build(cls, document.data, strict=strict)
    except StateLoadError as error:
        raise document.positioned(error) from None
    except StateVersionError as error:
        raise error.located(document.source) from error.__cause__


def seed(instance: StateModule, source: ConfigSource) -> LoadResult:
    """Load a config into an existing state module, leniently.

    Keys the config leaves out keep their current values; keys the module does
    not know are ignored. Values of the wrong shape are still errors, and the
    load is all or nothing.

    Args:
        instance: The module to seed, loaded in place.
        source: A ``.yaml``/``.yml``/``.json`` file path, or the data itself.

    Returns:
        What the config left out (``missing_keys``) and what was ignored
        (``unexpected_keys``), as dotted paths.

    Raises:
        DocumentError: The file cannot be read or parsed.
        StateLoadError: Every problem, positioned; nothing was changed.
        StateDefinitionError: ``instance`` is not a state module.
    """
    if not isinstance(instance, StateModule):
        raise StateDefinitionError(f"seed() loads into a StateModule instance, got {describe(instance)}")
    document = read_document(source)
    try:
        return _load_leniently(instance, document.data)
    except StateLoadError as error:
        raise document.positioned(error) from None
    except StateVersionError as error:
        raise error.located(document.source) from error.__cause__


def _load_leniently(module: StateModule, data: Any) -> LoadResult:
    """A non-strict load; through the class's own ``load_state_dict()`` as a session
    load does it, so that the module is restored when that raises."""
    if not overrides_load(type(module)):
        return module.load_state_dict(data, strict=False)
    refuse_too_deep(data)
    loader = Loader(strict=False)
    loader.plan_child(module, data, ())
    return loader.commit()
