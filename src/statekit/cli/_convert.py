"""``statekit convert``: a session or config file between JSON and YAML, written atomically."""

from __future__ import annotations

import argparse
import os
import stat

from statekit._checkers import refuse_non_json
from statekit.cli._files import file_codec, output, read_whole, write_bytes
from statekit.cli._shared import OK, Commands, command


def add_convert(commands: Commands) -> None:
    """Add ``statekit convert`` to ``commands``."""
    sub = command(
        commands,
        "convert",
        "Convert a session or config file between JSON and YAML (chosen by suffix).",
        _run,
        "examples:\n  statekit convert sessions/chat-1.json chat-1.yaml\n  statekit convert agent.yaml agent.json --force",
    )
    sub.add_argument("source", metavar="IN", help="the .json/.yaml/.yml file to read")
    sub.add_argument("target", metavar="OUT", help="the .json/.yaml/.yml file to write")
    sub.add_argument("--force", action="store_true", help="replace OUT when it exists")


def _run(args: argparse.Namespace) -> int:
    file_codec(args.source)
    out_codec = file_codec(args.target)
    target = output(args.target, force=args.force)
    data = read_whole(args.source)
    refuse_non_json(data)
    write_bytes(target, out_codec.dumps(data), mode=stat.S_IMODE(os.stat(args.source).st_mode))
    print(f"wrote {target}")
    return OK
