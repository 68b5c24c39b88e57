"""The top of the ``statekit`` command: the parser of every subcommand, and main(), which turns each failure into an exit status."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from statekit import __version__
from statekit.cli._compact import add_compact
from statekit.cli._convert import add_convert
from statekit.cli._copy import add_copy
from statekit.cli._diff import add_diff
from statekit.cli._history import add_history, add_rollback
from statekit.cli._import import add_import_agentscope
from statekit.cli._init_db import add_init_db
from statekit.cli._migrate import add_migrate
from statekit.cli._rekey import add_rekey
from statekit.cli._schema import add_schema
from statekit.cli._sessions import add_delete, add_list
from statekit.cli._show import add_show
from statekit.cli._validate import add_validate
from statekit.cli._shared import INTERRUPTED, USAGE, UsageError, fail
from statekit.errors import StatekitError

_EPILOG = """\
examples:
  statekit show sessions/chat-1.json
  statekit show --dir sessions --user alice chat-1 --module agent
  statekit show --redis-url redis://localhost:6379/0 --user alice chat-1
  statekit validate agent.yaml --class myapp.agents:Agent
  statekit validate sessions/chat-1.yaml --module agent=myapp.agents:Agent
  statekit convert sessions/chat-1.json chat-1.yaml
  statekit schema myapp.agents:Agent > agent.schema.json
  statekit list --dir sessions --user alice
  statekit delete --redis-url redis://localhost:6379/0 --user alice chat-1
  statekit migrate --dir sessions --module agent=myapp.agents:Agent --dry-run
  statekit rekey --dir sessions --new-key-env NEW_KEY --old-key-env OLD_KEY --dry-run
  statekit copy sessions sqlite:///backup.db --all-users
  statekit import-agentscope old_sessions sessions --user-id alice
  statekit init-db postgresql://app@db.example.com/app
  statekit history --dir sessions chat-1
  statekit show --dir sessions chat-1 --at 3f2a9c1e0b7d
  statekit diff --dir sessions chat-1 head~1
  statekit rollback --dir sessions chat-1 3f2a9c1e0b7d

exit status: 0 ok, 1 invalid data or a failed operation, 2 usage error.
diff's, as diff(1)'s: 0 equal, 1 different, 2 trouble.
Classes are named package.module:Class (or path/to/file.py:Class); the
current directory is importable.
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``statekit`` command.

    Args:
        argv: The arguments after the program name (``sys.argv[1:]`` when omitted).

    Returns:
        The exit status: 0 ok, 1 invalid data or failed operation, 2 usage error.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else USAGE
    try:
        status: int = args.run(args)
    except UsageError as exc:
        return fail(f"statekit {args.command}: error: {exc}", USAGE)
    except StatekitError as exc:
        return fail(str(exc), args.failed)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return fail(f"statekit {args.command}: {where}{exc.strerror or exc}", args.failed)
    except KeyboardInterrupt:
        return fail(f"statekit {args.command}: interrupted", INTERRUPTED)
    except Exception as exc:  # noqa: BLE001 - a traceback never reaches the user
        return fail(f"statekit {args.command}: unexpected {type(exc).__name__}: {exc}", args.failed)
    return status


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``statekit`` command, with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="statekit",
        description="Look at, check, convert and tidy saved statekit sessions and config files.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"statekit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_show(commands)
    add_validate(commands)
    add_convert(commands)
    add_schema(commands)
    add_list(commands)
    add_delete(commands)
    add_compact(commands)
    add_migrate(commands)
    add_rekey(commands)
    add_copy(commands)
    add_import_agentscope(commands)
    add_init_db(commands)
    add_history(commands)
    add_diff(commands)
    add_rollback(commands)
    return parser
