"""Encrypted secrets in stored sessions read without their key: left out by ``validate``, the one obstacle of a ``migrate``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statekit._dump import dump_many
from statekit._load import build, secret_paths
from statekit._secrets import is_sealed
from statekit.errors import PathSegment, StatekitError, StateLoadError

NEEDS_KEY = (
    "the secret is encrypted and a migration must open it: give the key it was saved with "
    "as --secret-key-env VAR (the environment variable that holds it)"
)
"""The problem of an encrypted secret in a session to migrate, said with the command's option."""


def only_sealed(error: StateLoadError, document: Mapping[str, Any], classes: Mapping[str, type[Any]]) -> bool:
    """Whether every problem of ``error`` is an encrypted secret field (which no key was given to open)."""
    for problem in error.problems:
        cls = classes.get(str(problem.path[0])) if problem.path else None
        if cls is None or problem.path[1:] not in secret_paths(cls) or not is_sealed(_at(document, problem.path)):
            return False
    return True


def is_current(document: Mapping[str, Any], classes: Mapping[str, type[Any]]) -> bool:
    """Whether each named module, its encrypted secrets aside, is stored exactly as a migration would write it.

    Then a migration would change nothing but could not open the secrets: the
    session is left as it is, without its key.
    """
    for name, cls in classes.items():
        stored = without_sealed(document[name], secret_paths(cls))
        try:
            module = build(cls, stored, strict=True)  # the secrets left out take their defaults
        except StatekitError:
            return False
        if dump_many({name: module})[name] != stored:  # without a key, no secret is dumped
            return False
    return True


def _at(document: Mapping[str, Any], path: tuple[Any, ...]) -> Any:
    value: Any = document
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def without_sealed(state: Any, secret: set[tuple[PathSegment, ...]], path: tuple[PathSegment, ...] = ()) -> Any:
    """``state`` without the encrypted values of its secret fields (found elsewhere, they are problems)."""
    if type(state) is not dict:
        return state
    kept = {}
    for key, value in state.items():
        here = (*path, key)
        if here in secret and is_sealed(value):
            continue
        kept[key] = without_sealed(value, secret, here)
    return kept
