"""What every subcommand of ``statekit`` shares: the exit statuses, the usage error, and how its parser is made."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from statekit.errors import StatekitError

OK, INVALID, USAGE = 0, 1, 2
INTERRUPTED = 130


class UsageError(StatekitError):
    """The command line asks for something impossible (exit status 2)."""


def fail(message: str, status: int) -> int:
    """Print ``message`` on standard error; ``status``, for the caller to return."""
    print(message, file=sys.stderr)
    return status


Commands = Any  # argparse's _SubParsersAction is private


def command(
    commands: Commands,
    name: str,
    summary: str,
    run: Callable[[argparse.Namespace], int],
    epilog: str,
    *,
    failed: int = INVALID,
) -> argparse.ArgumentParser:
    """Add the subcommand ``name``, which ``run`` carries out, to ``commands``; its parser, for its arguments.

    ``failed`` is the exit status when it fails (``diff`` keeps 1 for "different" and fails with 2, as diff(1)).
    """
    sub: argparse.ArgumentParser = commands.add_parser(
        name, help=summary, description=summary, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub.set_defaults(run=run, failed=failed)
    return sub
