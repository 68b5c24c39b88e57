"""Compiling generated functions, with their source kept for tracebacks."""

from __future__ import annotations

import linecache
from collections.abc import Callable
from typing import Any


def compile_function(signature: str, body: list[str], names: dict[str, Any], where: str) -> Callable[..., Any]:
    """Compile ``def <signature>:`` with ``body`` (indented lines) in the globals ``names``.

    Args:
        signature: ``"structure(o)"``: the function's name and parameters.
        body: Its lines, each indented four spaces.
        names: The globals the body uses (updated with the new function).
        where: What it was generated for, shown as the file name in tracebacks.

    Returns:
        The function.
    """
    source = "\n".join([f"def {signature}:", *body, ""])
    filename = f"<statekit {where}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), names)  # noqa: S102 - generated from field names and indexes only
    function: Callable[..., Any] = names[signature.partition("(")[0]]
    return function


__all__ = ["compile_function"]
