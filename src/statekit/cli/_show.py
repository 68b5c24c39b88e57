"""``statekit show``: print a session file, or a stored session, readably (YAML or JSON), its secrets masked."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from statekit.values.checks import refuse_non_json
from statekit.state.config import Document
from statekit.values.secrets import mask_secrets
from statekit.cli._files import file_codec
from statekit.session.files import read_session_file
from statekit.cli._hints import show_target_hint
from statekit.cli._shared import OK, Commands, UsageError, command
from statekit.cli._revision_names import resolve
from statekit.cli._store import add_store_options, read_session, store_options, with_store
from statekit.codecs import JSON, YAML
from statekit.errors import SessionNotFoundError
from statekit.session import META_KEY, SessionBase


def add_show(commands: Commands) -> None:
    """Add ``statekit show`` to ``commands``."""
    sub = command(
        commands,
        "show",
        "Print a saved session (or any YAML/JSON state file) readably, as YAML.",
        _run,
        "examples:\n  statekit show sessions/chat-1.json\n  statekit show --dir sessions chat-1 --module agent\n"
        "  statekit show --host localhost --port 6379 --user alice chat-1 --json\n"
        "  statekit show --dir sessions chat-1 --at 3f2a9c1e0b7d   (a revision statekit history lists)",
    )
    sub.add_argument("target", metavar="FILE_OR_SESSION_ID", help="a .json/.yaml/.yml file, or a session id with --dir/Redis")
    sub.add_argument("--module", metavar="NAME", help="print only this module of the session")
    sub.add_argument("--json", action="store_true", help="print JSON instead of YAML")
    sub.add_argument(
        "--at", metavar="REV", help="print this revision of a stored session: a unique prefix of one statekit history lists, head~N"
    )
    add_store_options(sub)


def _run(args: argparse.Namespace) -> int:
    options = store_options(args)
    if not options.named:
        if args.at is not None:
            raise UsageError("--at reads a revision of a stored session: name its store (--dir DIR, --store URL, --redis-url URL)")
        _show_codec(args.target)
        document = read_session_file(args.target)
    else:
        document = _with_document(args)
    data = modules_of(document.data) if isinstance(document.data, dict) else document.data
    if args.module is not None:
        data = _pick_module(data, args.module, document.source)
    _print_data(mask_secrets(data), as_json=args.json, out=sys.stdout)
    return OK


def _show_codec(target: str) -> None:
    """Refuse a file ``show`` cannot read, saying what the user most likely meant."""
    try:
        file_codec(target)
    except UsageError as exc:
        hint = show_target_hint(target)
        raise UsageError(f"{exc}; {hint}" if hint else str(exc)) from None


def _with_document(args: argparse.Namespace) -> Document:
    found: list[Document] = []

    async def fetch(store: SessionBase) -> int:
        revision = None if args.at is None else await resolve(store, args.target, args.user, args.at)
        found.append(await read_session(store, args.target, args.user, at=revision))
        return OK

    with_store(args, fetch)
    return found[0]


def _pick_module(data: Any, name: str, source: str | None) -> Any:
    if not isinstance(data, dict) or name not in data:
        names = ", ".join(data) if isinstance(data, dict) and data else "none"
        raise SessionNotFoundError(f"{source}: no module {name!r} in this session (modules: {names})")
    return data[name]


def _print_data(data: Any, *, as_json: bool, out: TextIO) -> None:
    if as_json:
        refuse_non_json(data)  # JSON would print NaN and infinities as null
    codec = JSON if as_json else YAML
    out.write(codec.dumps(data).decode("utf-8"))
    out.flush()


def modules_of(document: Mapping[str, Any]) -> dict[str, Any]:
    """A session document without statekit's own metadata key."""
    return {name: state for name, state in document.items() if name != META_KEY}
