"""The classes named on the command line: ``package.module:Class`` or ``path/file.py:Class``, imported."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from statekit._load import overrides_load
from statekit._schema import require_stateful_class
from statekit.cli._shared import UsageError
from statekit.errors import StatekitError

def load_class(spec: str) -> type[Any]:
    """Import the class named by ``package.module:Class`` or ``path/file.py:Class``.

    The current directory is importable, as with ``python -m``.

    Raises:
        UsageError: The spec is malformed, the module cannot be imported, it has
            no such attribute, or the attribute is not a ``@stateful`` class.
    """
    module_name, sep, qualname = spec.partition(":")
    if not sep or not module_name or not qualname:
        raise UsageError(f"{spec!r} is not a class spec: write package.module:Class (or file.py:Class)")
    target: Any = _import(module_name)
    for part in qualname.split("."):
        if not hasattr(target, part):
            raise UsageError(f"{module_name} has no attribute {qualname!r}")
        target = getattr(target, part)
    if overrides_load(target):
        return target  # type: ignore[no-any-return]  # built with no arguments, loaded through its override
    try:
        return require_stateful_class(target, module_hint="the command needs a @stateful class")
    except StatekitError as exc:
        raise UsageError(f"{spec}: {exc}") from None


def _import(name: str) -> ModuleType:
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if name.endswith(".py"):
            return _import_file(Path(name))
        return importlib.import_module(name)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of user code is reported, not raised
        raise UsageError(f"cannot import {name!r}: {type(exc).__name__}: {exc}") from None


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise UsageError(f"cannot import {str(path)!r}: no such file")
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # as ``python file.py`` does: the file imports its neighbours
    name = f"_statekit_cli_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and attrs look their module up
    spec.loader.exec_module(module)
    return module


def named_classes(specs: Sequence[str]) -> dict[str, type[Any]]:
    """The classes of ``NAME=package.module:Class`` specs (``--module``), by name.

    Raises:
        UsageError: A spec is malformed, or names no class (see :func:`load_class`).
    """
    classes: dict[str, type[Any]] = {}
    for spec in specs:
        name, sep, class_spec = spec.partition("=")
        if not sep or not name:
            raise UsageError(f"{spec!r}: write NAME=package.module:Class")
        classes[name] = load_class(class_spec)
    return classes
