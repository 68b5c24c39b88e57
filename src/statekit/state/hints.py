"""The hint a failed strict load of saved data adds: a class that changed wants a version and a migration."""

from __future__ import annotations

import re
from collections.abc import Sequence

from statekit.errors import Problem, format_path

MISSING = "required key is missing"
_UNKNOWN = "unknown key"
_WRONG_TYPE = re.compile(r"expected .+, got ")


def migration_hint(problems: Sequence[Problem]) -> str | None:
    """Say how to bring old data up when ``problems`` look like a class changed since the data was saved.

    A renamed field shows as a missing key and an unknown key side by side (in
    the same state); a field whose type changed, as a value of another type.

    Returns:
        The hint, or ``None`` when the problems look like neither.
    """
    missing: dict[tuple[object, ...], list[Problem]] = {}
    unknown: dict[tuple[object, ...], list[Problem]] = {}
    retyped = False
    for problem in problems:
        if problem.message == MISSING and problem.path:
            missing.setdefault(problem.path[:-1], []).append(problem)
        elif problem.message.startswith(_UNKNOWN) and problem.path:
            unknown.setdefault(problem.path[:-1], []).append(problem)
        elif _WRONG_TYPE.match(problem.message):
            retyped = True
    renamed = [
        f"{format_path(old.path)} -> {format_path(new.path)}?"
        for parent in missing
        if parent in unknown
        for old, new in zip(unknown[parent], missing[parent], strict=False)
    ]
    changes = ([f"a field renamed: {', '.join(renamed)}"] if renamed else []) + (["a field's type changed"] if retyped else [])
    if not changes:
        return None
    return (
        f"if the class changed since this data was saved ({'; '.join(changes)}), give it a version and a migration "
        "that brings old data up: @stateful(version=..., migrations=...) (docs/versions.md)"
    )
