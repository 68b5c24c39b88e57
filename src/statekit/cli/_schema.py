"""``statekit schema``: the JSON Schema of a class's state, or of a session's modules, for editors."""

from __future__ import annotations

import argparse
import sys

import orjson

from statekit._schema import json_schema, session_schema
from statekit.cli._classes import load_class, named_classes
from statekit.cli._files import output, write_bytes
from statekit.cli._shared import OK, Commands, UsageError, command


def add_schema(commands: Commands) -> None:
    """Add ``statekit schema`` to ``commands``."""
    sub = command(
        commands,
        "schema",
        "Print the JSON Schema (draft 2020-12) of a class's state, for editors.",
        _run,
        "examples:\n  statekit schema myapp.agents:Agent > agent.schema.json\n"
        "  statekit schema --module agent=myapp.agents:Agent -o session.schema.json\n\n"
        "In a YAML file, point the YAML language server at the schema with a first line\n"
        "  # yaml-language-server: $schema=agent.schema.json",
    )
    sub.add_argument("cls", nargs="?", metavar="MODULE:CLASS", help="the class (a config file's schema)")
    sub.add_argument("--module", action="append", metavar="NAME=MODULE:CLASS", help="a session's module (repeatable)")
    sub.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    sub.add_argument("--force", action="store_true", help="replace FILE when it exists")


def _run(args: argparse.Namespace) -> int:
    if (args.cls is None) == (args.module is None):
        raise UsageError("give one class (MODULE:CLASS) or session modules (--module NAME=MODULE:CLASS)")
    if args.cls is not None:
        schema = json_schema(load_class(args.cls))
    else:
        schema = session_schema(**named_classes(args.module))
    payload = orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    if args.output is None:
        sys.stdout.write(payload.decode("utf-8"))
    else:
        write_bytes(output(args.output, force=args.force), payload)
    return OK
