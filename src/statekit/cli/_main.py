"""The ``statekit`` command's parser and its run: every subcommand, and the exit statuses."""

from __future__ import annotations

import argparse
import asyncio
import os
import stat
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TextIO

import orjson

from statekit import __version__
from statekit.cli._support import (
    read_file,
    read_whole,
    StoreOptions,
    UsageError,
    check_config,
    check_session,
    close_store,
    file_codec,
    load_class,
    modules_of,
    open_store,
    read_session,
)
from statekit.cli._batch import Target, targets
from statekit.cli._compact import compact_sessions
from statekit.cli._hints import show_target_hint
from statekit.cli._import import import_folder
from statekit.cli._migrate import migrate_sessions
from statekit.cli._rekey import REKEY_EPILOG, REKEY_SUMMARY, add_rekey_arguments, rekey_box, rekey_sessions
from statekit._checkers import refuse_non_json
from statekit._config import Document
from statekit._module import StateModule
from statekit._secrets import SecretBox, mask_secrets
from statekit._schema import json_schema, session_schema
from statekit.codecs import JSON, YAML
from statekit.errors import SecretError, SessionNotFoundError, StatekitError
from statekit.session import SessionBase

OK, INVALID, USAGE = 0, 1, 2
INTERRUPTED = 130

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
  statekit import-agentscope old_sessions sessions --user-id alice

exit status: 0 ok, 1 invalid data or a failed operation, 2 usage error.
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
        return _fail(f"statekit {args.command}: error: {exc}", USAGE)
    except StatekitError as exc:
        return _fail(str(exc), INVALID)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"statekit {args.command}: {where}{exc.strerror or exc}", INVALID)
    except KeyboardInterrupt:
        return _fail(f"statekit {args.command}: interrupted", INTERRUPTED)
    except Exception as exc:  # noqa: BLE001 - a traceback never reaches the user
        return _fail(f"statekit {args.command}: unexpected {type(exc).__name__}: {exc}", INVALID)
    return status


def _fail(message: str, status: int) -> int:
    print(message, file=sys.stderr)
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
    _add_show(commands)
    _add_validate(commands)
    _add_convert(commands)
    _add_schema(commands)
    _add_list(commands)
    _add_delete(commands)
    _add_compact(commands)
    _add_migrate(commands)
    _add_rekey(commands)
    _add_import_agentscope(commands)
    return parser


Commands = Any  # argparse's _SubParsersAction is private


def _command(commands: Commands, name: str, summary: str, run: Callable[[argparse.Namespace], int], epilog: str) -> argparse.ArgumentParser:
    sub: argparse.ArgumentParser = commands.add_parser(
        name, help=summary, description=summary, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub.set_defaults(run=run)
    return sub


def _add_store_options(sub: argparse.ArgumentParser, *, all_users: bool = False) -> None:
    where = sub.add_argument_group("where the sessions are (a folder, or Redis)")
    where.add_argument("--dir", metavar="DIR", help="a folder of session files (JSONSession/YAMLSession)")
    where.add_argument("--yaml", action="store_true", help="the folder holds YAML sessions (default: JSON)")
    where.add_argument(
        "--redis-url", metavar="URL", help="a Redis server (redis://localhost:6379/0) or cluster (redis+cluster://host:port)"
    )
    where.add_argument("--host", help="Redis host (default: localhost when --port is given)")
    where.add_argument("--port", type=int, help="Redis port (default: 6379 when --host is given)")
    where.add_argument("--db", type=int, default=0, help="Redis database index (default: 0)")
    where.add_argument("--key-prefix", default="", metavar="PREFIX", help="the key_prefix the application gives RedisSession")
    sub.add_argument(
        "--user", metavar="USER_ID", help="the sessions' user_id (default: none for files, default_user for Redis)"
    )
    if all_users:
        sub.add_argument("--all-users", action="store_true", help="every session of every user (not with --user or SESSION_IDs)")


async def _targets(store: SessionBase, args: argparse.Namespace) -> list[Target]:
    """The sessions a command over many goes over (see :func:`~statekit.cli._batch.targets`)."""
    session_ids: list[str] = getattr(args, "session_ids", [])
    if args.all_users and (args.user is not None or session_ids):
        raise UsageError("--all-users goes over every session of every user: give no --user and no SESSION_ID")
    return await targets(store, session_ids, args.user, all_users=args.all_users)


def _store_options(args: argparse.Namespace) -> StoreOptions:
    url = args.redis_url
    if url is None and (args.host is not None or args.port is not None):
        url = f"redis://{args.host or 'localhost'}:{args.port or 6379}/{args.db}"
    if args.dir is not None and url is not None:
        raise UsageError("give either --dir or a Redis server, not both")
    return StoreOptions(folder=args.dir, yaml=args.yaml, redis_url=url, key_prefix=args.key_prefix)


def _with_store(args: argparse.Namespace, work: Callable[[SessionBase], Coroutine[Any, Any, int]]) -> int:
    store = _open(_store_options(args))

    async def run() -> int:
        try:
            return await work(store)
        finally:
            await close_store(store)

    return asyncio.run(run())


def _open(options: StoreOptions) -> SessionBase:
    """Open the store, refusing a folder that is not there (rather than listing nothing)."""
    if options.folder is not None and not Path(options.folder).is_dir():
        raise StatekitError(f"--dir {options.folder!r}: there is no such folder")
    return open_store(options)


# -- show ------------------------------------------------------------------------------


def _add_show(commands: Commands) -> None:
    sub = _command(
        commands,
        "show",
        "Print a saved session (or any YAML/JSON state file) readably, as YAML.",
        _run_show,
        "examples:\n  statekit show sessions/chat-1.json\n  statekit show --dir sessions chat-1 --module agent\n"
        "  statekit show --host localhost --port 6379 --user alice chat-1 --json",
    )
    sub.add_argument("target", metavar="FILE_OR_SESSION_ID", help="a .json/.yaml/.yml file, or a session id with --dir/Redis")
    sub.add_argument("--module", metavar="NAME", help="print only this module of the session")
    sub.add_argument("--json", action="store_true", help="print JSON instead of YAML")
    _add_store_options(sub)


def _run_show(args: argparse.Namespace) -> int:
    options = _store_options(args)
    if options.folder is None and options.redis_url is None:
        _show_codec(args.target)
        document = read_file(args.target)
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
        found.append(await read_session(store, args.target, args.user))
        return OK

    _with_store(args, fetch)
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


# -- validate --------------------------------------------------------------------------


def _add_validate(commands: Commands) -> None:
    sub = _command(
        commands,
        "validate",
        "Check a config or session file against @stateful classes; problems go to stderr.",
        _run_validate,
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


def _run_validate(args: argparse.Namespace) -> int:
    file_codec(args.file)
    if args.cls is not None:
        cls = load_class(args.cls)
        check_config(read_file(args.file), cls, strict=not args.lenient)
        print(f"{args.file}: valid {cls.__qualname__}")
        return OK
    classes = _named_classes(args.module)
    check_session(read_file(args.file), classes, strict=not args.lenient)
    print(f"{args.file}: valid session ({', '.join(classes)})")
    return OK


def _named_classes(specs: Sequence[str]) -> dict[str, type[Any]]:
    classes: dict[str, type[Any]] = {}
    for spec in specs:
        name, sep, class_spec = spec.partition("=")
        if not sep or not name:
            raise UsageError(f"{spec!r}: write NAME=package.module:Class")
        classes[name] = load_class(class_spec)
    return classes


# -- convert ---------------------------------------------------------------------------


def _add_convert(commands: Commands) -> None:
    sub = _command(
        commands,
        "convert",
        "Convert a session or config file between JSON and YAML (chosen by suffix).",
        _run_convert,
        "examples:\n  statekit convert sessions/chat-1.json chat-1.yaml\n  statekit convert agent.yaml agent.json --force",
    )
    sub.add_argument("source", metavar="IN", help="the .json/.yaml/.yml file to read")
    sub.add_argument("target", metavar="OUT", help="the .json/.yaml/.yml file to write")
    sub.add_argument("--force", action="store_true", help="replace OUT when it exists")


def _run_convert(args: argparse.Namespace) -> int:
    file_codec(args.source)
    out_codec = file_codec(args.target)
    target = _output(args.target, force=args.force)
    data = read_whole(args.source)
    refuse_non_json(data)
    _write_bytes(target, out_codec.dumps(data), mode=stat.S_IMODE(os.stat(args.source).st_mode))
    print(f"wrote {target}")
    return OK


def _output(name: str, *, force: bool) -> Path:
    """An output file the command may write: its folder exists, and it does not unless ``force``.

    Raises:
        UsageError: The file exists and ``force`` is false.
        StatekitError: Its folder does not exist.
    """
    target = Path(name)
    if target.exists() and not force:
        raise UsageError(f"{target} exists; add --force to replace it")
    if not target.parent.is_dir():
        raise StatekitError(f"cannot write {target}: there is no folder {str(target.parent)!r}")
    return target


def _write_bytes(target: Path, payload: bytes, *, mode: int | None = None) -> None:
    """Write through a temporary file, so that a failed write leaves OUT as it was.

    Args:
        target: The file to (re)place.
        payload: Its new content.
        mode: Its permission bits (``convert`` passes the source file's);
            ``None``: the usual ones, after the umask.
    """
    temporary = target.with_name(f".{target.name}.statekit-tmp")
    try:
        private = 0o666 if mode is None else mode & 0o600  # never readable by others before chmod
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, private)
        with open(descriptor, "wb") as file:
            file.write(payload)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


# -- schema ----------------------------------------------------------------------------


def _add_schema(commands: Commands) -> None:
    sub = _command(
        commands,
        "schema",
        "Print the JSON Schema (draft 2020-12) of a class's state, for editors.",
        _run_schema,
        "examples:\n  statekit schema myapp.agents:Agent > agent.schema.json\n"
        "  statekit schema --module agent=myapp.agents:Agent -o session.schema.json\n\n"
        "In a YAML file, point the YAML language server at the schema with a first line\n"
        "  # yaml-language-server: $schema=agent.schema.json",
    )
    sub.add_argument("cls", nargs="?", metavar="MODULE:CLASS", help="the class (a config file's schema)")
    sub.add_argument("--module", action="append", metavar="NAME=MODULE:CLASS", help="a session's module (repeatable)")
    sub.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    sub.add_argument("--force", action="store_true", help="replace FILE when it exists")


def _run_schema(args: argparse.Namespace) -> int:
    if (args.cls is None) == (args.module is None):
        raise UsageError("give one class (MODULE:CLASS) or session modules (--module NAME=MODULE:CLASS)")
    if args.cls is not None:
        schema = json_schema(load_class(args.cls))
    else:
        schema = session_schema(**_named_classes(args.module))
    payload = orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    if args.output is None:
        sys.stdout.write(payload.decode("utf-8"))
    else:
        _write_bytes(_output(args.output, force=args.force), payload)
    return OK


# -- list and delete ---------------------------------------------------------------------


def _add_list(commands: Commands) -> None:
    sub = _command(
        commands,
        "list",
        "List the session ids of a user, one per line.",
        _run_list,
        "examples:\n  statekit list --dir sessions\n  statekit list --redis-url redis://localhost:6379/0 --user alice\n"
        "  statekit list --dir sessions --all-users   (USER_ID<tab>SESSION_ID per line)",
    )
    _add_store_options(sub, all_users=True)


def _run_list(args: argparse.Namespace) -> int:
    async def work(store: SessionBase) -> int:
        for user, session_id in await _targets(store, args):
            print(f"{user}\t{session_id}" if args.all_users else session_id)
        return OK

    return _with_store(args, work)


def _add_delete(commands: Commands) -> None:
    sub = _command(
        commands,
        "delete",
        "Delete sessions of a user; exit status 1 if one of them did not exist.",
        _run_delete,
        "examples:\n  statekit delete --dir sessions chat-1 chat-2\n  statekit delete --host localhost --user alice chat-1",
    )
    sub.add_argument("session_ids", nargs="+", metavar="SESSION_ID", help="the sessions to delete")
    _add_store_options(sub)


def _run_delete(args: argparse.Namespace) -> int:
    async def work(store: SessionBase) -> int:
        status = OK
        for session_id in args.session_ids:
            try:
                deleted = await store.adelete(session_id, args.user)
            except StatekitError as exc:  # reported; the other sessions are still deleted
                status = _fail(f"statekit delete: {exc}", INVALID)
                continue
            if deleted:
                print(f"deleted {session_id}")
            else:
                user = store.key(session_id, args.user).user_id
                status = _fail(f"statekit delete: no session {session_id!r} of user {user!r}", INVALID)
        return status

    return _with_store(args, work)


# -- compact -----------------------------------------------------------------------------


def _add_compact(commands: Commands) -> None:
    sub = _command(
        commands,
        "compact",
        "Fold the items appended to sessions' append-only lists back into their documents.",
        _run_compact,
        "examples:\n  statekit compact --dir sessions chat-1\n  statekit compact --dir sessions   (every session)",
    )
    sub.add_argument("session_ids", nargs="*", metavar="SESSION_ID", help="the sessions (default: all of the user's)")
    _add_store_options(sub, all_users=True)


def _run_compact(args: argparse.Namespace) -> int:
    async def work(store: SessionBase) -> int:
        todo = await _targets(store, args)
        done = await compact_sessions(store, todo, out=sys.stdout, err=sys.stderr, all_users=args.all_users)
        return OK if done else INVALID

    return _with_store(args, work)


# -- migrate -----------------------------------------------------------------------------


def _add_migrate(commands: Commands) -> None:
    sub = _command(
        commands,
        "migrate",
        "Upgrade stored sessions to the current version of their classes, in place (docs/versions.md).",
        _run_migrate,
        "examples:\n  statekit migrate --dir sessions --module agent=myapp.agents:Agent --dry-run\n"
        "  statekit migrate --redis-url redis://localhost:6379/0 --user alice --module agent=myapp.agents:Agent\n\n"
        "Each session is loaded strictly (running the migrations) and written back atomically;\n"
        "a session that fails is reported and left as it was. Exit status 1 if any failed.",
    )
    sub.add_argument("session_ids", nargs="*", metavar="SESSION_ID", help="the sessions (default: all of the user's)")
    sub.add_argument(
        "--module", action="append", required=True, metavar="NAME=MODULE:CLASS", help="a module to migrate (repeatable)"
    )
    sub.add_argument("--dry-run", action="store_true", help="print a unified diff per session; write nothing")
    sub.add_argument(
        "--secret-key-env",
        metavar="VAR",
        help="the environment variable holding the sessions' secret_key (needed for encrypted secret fields)",
    )
    _add_store_options(sub, all_users=True)


def _run_migrate(args: argparse.Namespace) -> int:
    classes = _named_classes(args.module)
    for spec, cls in zip(args.module, classes.values(), strict=True):
        if not issubclass(cls, StateModule):
            raise UsageError(f"{spec}: sessions hold StateModule classes; {cls.__qualname__} is a value record")

    secrets = _secret_box(args.secret_key_env)

    async def work(store: SessionBase) -> int:
        todo = await _targets(store, args)
        done = await migrate_sessions(
            store, todo, classes, dry_run=args.dry_run, out=sys.stdout, err=sys.stderr, secrets=secrets
        )
        return OK if done else INVALID

    return _with_store(args, work)


def _secret_box(variable: str | None) -> SecretBox | None:
    if variable is None:
        return None
    key = os.environ.get(variable)
    if not key:
        raise UsageError(f"--secret-key-env {variable}: the environment variable is not set")
    try:
        return SecretBox(key)
    except SecretError as exc:
        raise UsageError(f"--secret-key-env {variable}: {exc}") from None


# -- rekey -------------------------------------------------------------------------------


def _add_rekey(commands: Commands) -> None:
    sub = _command(commands, "rekey", REKEY_SUMMARY, _run_rekey, REKEY_EPILOG)
    add_rekey_arguments(sub)
    _add_store_options(sub)


def _run_rekey(args: argparse.Namespace) -> int:
    box = rekey_box(args.new_key_env, args.old_key_env)

    async def work(store: SessionBase) -> int:
        return OK if await rekey_sessions(store, args.session_ids, args.user, box, dry_run=args.dry_run) else INVALID

    return _with_store(args, work)


# -- import-agentscope -------------------------------------------------------------------


def _add_import_agentscope(commands: Commands) -> None:
    sub = _command(
        commands,
        "import-agentscope",
        "Copy an AgentScope 1.x JSONSession folder into statekit's layout (docs/agentscope.md).",
        _run_import_agentscope,
        "examples:\n  statekit import-agentscope old_sessions sessions\n"
        "  statekit import-agentscope old_sessions sessions --user-id alice --user-id bob --user-id ''\n\n"
        "AgentScope names files {user_id}_{session_id}.json: a name with '_' is copied only when\n"
        "exactly one --user-id fits it (--user-id '': a name no other --user-id fits has no user).\n"
        "Every file copied and every name that cannot be split is reported; old files are only read;\n"
        "a session already there with the same data is left as it is (a rerun succeeds).\n"
        "Exit status 1 if any file was neither copied nor already there.",
    )
    sub.add_argument("old_dir", metavar="OLD_DIR", help="the folder AgentScope's JSONSession saved into")
    sub.add_argument("new_dir", metavar="NEW_DIR", help="the folder of statekit's JSONSession")
    sub.add_argument("--user-id", action="append", default=[], metavar="USER", help="a user whose files to split off (repeatable)")
    sub.add_argument("--overwrite", action="store_true", help="replace sessions already in NEW_DIR")
    sub.add_argument(
        "--replace-invalid",
        action="store_true",
        help="copy files holding NaN, Infinity or lone surrogates (JSON holds none) with null and U+FFFD instead, reporting each",
    )


def _run_import_agentscope(args: argparse.Namespace) -> int:
    old_dir, new_dir = Path(args.old_dir), Path(args.new_dir)
    if not old_dir.is_dir():  # as --dir of the other commands: a failed operation, not a usage error
        raise StatekitError(f"{old_dir}: there is no such folder")
    if new_dir.exists() and not new_dir.is_dir():  # else every copy fails with "File exists"
        raise UsageError(f"{new_dir} is not a folder")
    done = asyncio.run(
        import_folder(
            old_dir, new_dir, args.user_id, overwrite=args.overwrite, out=sys.stdout, err=sys.stderr, replace_invalid=args.replace_invalid
        )
    )
    return OK if done else INVALID

