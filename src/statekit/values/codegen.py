"""Compiling generated functions, each with its own source kept for tracebacks while it lives."""

from __future__ import annotations

import itertools
import linecache
import threading
import weakref
from collections.abc import Callable
from typing import Any

_LOCK = threading.Lock()
_live: set[str] = set()  # the file names of generated functions alive (their linecache entries)


def compile_function(signature: str, body: list[str], names: dict[str, Any], where: str) -> Callable[..., Any]:
    """Compile ``def <signature>:`` with ``body`` (indented lines) in the globals ``names``.

    Each function gets a file name of its own (``<statekit fast structure mod.Rec>``, then
    ``<statekit fast structure mod.Rec-1>`` for the next variant of the same class, as attrs
    names its own generated code), so that a traceback shows the source of exactly the
    function that ran; the source is dropped from :mod:`linecache` when the function is.

    Args:
        signature: ``"structure(o)"``: the function's name and parameters.
        body: Its lines, each indented four spaces.
        names: The globals the body uses (updated with the new function).
        where: What it was generated for, shown as the file name in tracebacks.

    Returns:
        The function.
    """
    source = "\n".join([f"def {signature}:", *body, ""])
    filename = _claim(f"<statekit {where}>", source)
    try:
        exec(compile(source, filename, "exec"), names)  # noqa: S102 - generated from field names and indexes only
    except BaseException:
        _release(filename)
        raise
    function: Callable[..., Any] = names[signature.partition("(")[0]]
    weakref.finalize(function, _release, filename)
    return function


def _claim(base: str, source: str) -> str:
    """A file name no live generated function has, with ``source`` in linecache under it."""
    with _LOCK:
        filename, count = base, itertools.count(1)
        while filename in _live or filename in linecache.cache:
            filename = f"{base[:-1]}-{next(count)}>"
        _live.add(filename)
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return filename


def _release(filename: str) -> None:
    with _LOCK:
        _live.discard(filename)
        linecache.cache.pop(filename, None)


def generated_sources() -> int:
    """How many generated functions are alive (each keeps its source in linecache)."""
    return len(_live)


__all__ = ["compile_function", "generated_sources"]
