"""Codecs: plain JSON data <-> bytes, and where a path sits in those bytes.

A codec knows nothing of state modules or storage. It turns plain JSON data
into bytes and back, and, only after a load has failed, re-reads the bytes once
to tell the line and column of each problem.

- :data:`JSON`: pretty-printed UTF-8 JSON (orjson writes, msgspec reads).
- :data:`JSON_COMPACT`: the same on one line (for Redis).
- :data:`YAML`: block-style, human-editable UTF-8 YAML (libyaml, safe only).
- :func:`repaired`: a document Python's ``json`` wrote with NaN, Infinity or lone surrogates, made JSON (for imports).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from statekit.codecs import json as _json
from statekit.codecs import yaml as _yaml
from statekit.codecs._nonjson import repaired
from statekit.codecs._positions import Path, Position
from statekit.errors import StateLoadError, with_positions

__all__ = ["JSON", "JSON_COMPACT", "YAML", "Codec", "Path", "Position", "repaired", "with_document_positions"]


@attrs.frozen
class Codec:
    """A format: how plain data becomes bytes and back.

    Attributes:
        name: A short name (``"json"``, ``"yaml"``).
        suffix: The file name suffix, dot included.
        dumps: Plain data to bytes; raises ``StateDumpError`` for non-JSON data.
        loads: Bytes (and an optional source name) to plain data; raises
            ``DocumentError`` with the line and column of a syntax error.
        locate: Bytes and paths to ``{path: (line, column)}``; only called when
            a load has failed.
        loads_unique: Like ``loads``, refusing a key written twice where
            ``loads`` does not check (JSON); ``None`` when ``loads`` already does.
        fast: Encodes and decodes at C speed (orjson, msgspec). A session then
            encodes straight from the live objects on the calling thread (no
            snapshot), and keeps the decoded data instead of copying it (the
            decoder makes only JSON data: string keys, finite numbers, no tuples).
        explain: Bytes and the (path, message) of each problem with a value
            that was a string where something else was expected, to
            ``{path: hint}`` (YAML: ``yes`` is text in YAML 1.2, write
            ``true``); ``None``: no hints. Only called when a load has failed.
    """

    name: str
    suffix: str
    dumps: Callable[[Any], bytes]
    loads: Callable[[bytes, str | None], Any]
    locate: Callable[[bytes, Iterable[Path]], dict[Path, Position]]
    loads_unique: Callable[[bytes, str | None], Any] | None = None
    fast: bool = False
    explain: Callable[[bytes, Iterable[tuple[Path, str]]], dict[Path, str]] | None = None

    def loads_strict(self, raw: bytes, source: str | None = None) -> Any:
        """Decode ``raw``, refusing duplicate keys with their line and column (configs, ``validate``)."""
        return (self.loads_unique or self.loads)(raw, source)


JSON = Codec("json", _json.SUFFIX, _json.dumps, _json.loads, _json.locate, _json.loads_unique, fast=True)
JSON_COMPACT = Codec(
    "json", _json.SUFFIX, _json.dumps_compact, _json.loads, _json.locate, _json.loads_unique, fast=True
)
YAML = Codec("yaml", _yaml.SUFFIX, _yaml.dumps, _yaml.loads, _yaml.locate, explain=_yaml.explain)


def with_document_positions(error: StateLoadError, raw: bytes, source: str | None, codec: Codec) -> StateLoadError:
    """Return ``error`` with every problem placed in the document it came from.

    Re-reads ``raw`` once; call it only after a load has failed.

    Args:
        error: The error raised while loading the data decoded from ``raw``.
        raw: The bytes the data was decoded from.
        source: The file (or other source) name to show.
        codec: The codec that decoded ``raw``.

    Returns:
        A new :class:`StateLoadError` whose problems carry source, line, column.
    """
    if codec.explain is not None:
        error = _explained(error, raw, codec.explain)
    positions = codec.locate(raw, [problem.path for problem in error.problems])
    return with_positions(error, source, positions.get)


_GOT_TEXT = "got a string"


def _explained(
    error: StateLoadError, raw: bytes, explain: Callable[[bytes, Iterable[tuple[Path, str]]], dict[Path, str]]
) -> StateLoadError:
    """``error`` with the codec's hint added to each problem about a string it can explain."""
    about_text = [(problem.path, problem.message) for problem in error.problems if problem.message.endswith(_GOT_TEXT)]
    hints = explain(raw, about_text)
    if not hints:
        return error
    problems = [
        attrs.evolve(problem, message=f"{problem.message} ({hints[problem.path]})")
        if problem.path in hints and problem.message.endswith(_GOT_TEXT)
        else problem
        for problem in error.problems
    ]
    return StateLoadError(problems, title=error.title, hint=error.hint)
