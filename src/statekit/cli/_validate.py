"""``statekit validate``: check a config or session file against ``@stateful`` classes, as a load would."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

import attrs

from statekit.state.config import Document
from statekit.state.hints import MISSING
from statekit.state.load import build
from statekit.state.secret_fields import secret_paths
from statekit.cli._classes import load_class, named_classes
from statekit.cli._files import file_codec
from statekit.session.files import read_session_file
from statekit.cli._sealed import without_sealed
from statekit.cli._shared import OK, Commands, UsageError, command
from statekit.errors import PathSegment, Problem, StateLoadError, StateVersionError
from statekit.session import META_KEY
from statekit.session.document import as_session, check_meta


def add_validate(commands: Commands) -> None:
    """Add ``statekit validate`` to ``commands``."""
    sub = command(
        commands,
        "validate",
        "Check a config or session file against @stateful classes; problems go to stderr.",
        _run,
        "examples:\n  statekit validate agent.yaml --class myapp.agents:Agent\n"
        "  statekit validate sessions/chat-1.json --module agent=myapp.agents:Agent --module memory=myapp.memory:Memory",
    )
    sub.add_argument("file", metavar="FILE", help="a .json, .yaml or .yml file")
    what = sub.add_mutually_exclusive_group(required=True)
    what.add_argument("--class", dest="cls", metavar="MODULE:CLASS", help="the whole file is the state of this class")
    what.add_argument(
        "--module",
        action="append",
        metavar="NAME=MODULE:CLASS",
        help="the file is a session; check module NAME against this class (repeatable)",
    )
    sub.add_argument("--lenient", action="store_true", help="allow unknown keys (a non-strict load)")


def _run(args: argparse.Namespace) -> int:
    file_codec(args.file)
    if args.cls is not None:
        cls = load_class(args.cls)
        check_config(read_session_file(args.file), cls, strict=not args.lenient)
        print(f"{args.file}: valid {cls.__qualname__}")
        return OK
    classes = named_classes(args.module)
    check_session(read_session_file(args.file), classes, strict=not args.lenient)
    print(f"{args.file}: valid session ({', '.join(classes)})")
    return OK


def check_config(document: Document, cls: type[Any], *, strict: bool) -> None:
    """Build ``cls`` from a config document, as ``from_config`` would.

    Raises:
        UsageError: The document is a session (use :func:`check_session`).
        StateLoadError: Every problem, positioned.
        StateVersionError: The data is newer than the class, or a migration
            failed (naming the file).
    """
    if isinstance(document.data, Mapping) and META_KEY in document.data:
        raise UsageError(
            f"{document.source} is a session file (it has {META_KEY!r}): "
            "check its modules with --module NAME=MODULE:CLASS"
        )
    try:
        build(cls, document.data, strict=strict)
    except StateLoadError as exc:
        raise document.positioned(exc) from None
    except StateVersionError as exc:  # named by its file, as a load from_config() names it
        raise exc.located(document.source) from exc.__cause__


def check_session(document: Document, classes: Mapping[str, type[Any]], *, strict: bool) -> None:
    """Build every named module of a session document, reporting every problem.

    Raises:
        DocumentError: The document is not a mapping of module names to states.
        StateLoadError: Every problem, each path starting at its module name.
        StateVersionError: A module's data is newer than its class, or a
            migration failed (naming the file and the module).
    """
    data = as_session(document.data, document.source or "the session")
    if META_KEY in data:
        check_meta(data[META_KEY], document.source or "the session")
    problems: list[Problem] = []
    for name, cls in classes.items():
        if name not in data:
            problems.append(Problem((name,), "module is missing from the session"))
            continue
        secret = secret_paths(cls)  # encrypted (not checkable here) or saved without a key: left out either way
        try:  # as a session load builds it: a module's keys are required when strict
            build(cls, without_sealed(data[name], secret), strict=strict, fill_defaults=False)
        except StateLoadError as exc:
            problems.extend(under(name, p) for p in exc.problems if not (p.path in secret and p.message == MISSING))
        except StateVersionError as exc:  # named by its file and module, as a session load names it
            raise exc.under((name,)).located(document.source) from exc.__cause__
    if problems:
        raise document.positioned(StateLoadError(problems))


def under(name: str, problem: Problem) -> Problem:
    """``problem`` with its path under the module ``name``."""
    path: tuple[PathSegment, ...] = (name, *problem.path)
    return attrs.evolve(problem, path=path)
