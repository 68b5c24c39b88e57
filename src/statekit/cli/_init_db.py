"""``statekit init-db URL``: create a SQL store's tables (and record their schema version) ahead of first use."""

from __future__ import annotations

import argparse
import asyncio

from statekit.cli._shared import OK, Commands, UsageError, command

_SCHEMES = ("postgresql://", "postgres://")


def add_init_db(commands: Commands) -> None:
    """Add ``statekit init-db`` to ``commands``."""
    sub = command(
        commands,
        "init-db",
        "Create the tables of a PostgreSQL session store, or upgrade older ones in place (idempotent), or print their DDL.",
        _run,
        "examples:\n  statekit init-db postgresql://app@db.example.com/app\n"
        "  statekit init-db postgresql://app@db.example.com/app --table agent_sessions\n"
        "  statekit init-db --print > statekit.sql   (the DDL, for an operator to review and run)\n\n"
        "A password in the URL is never printed; libpq's PGPASSWORD and ~/.pgpass work too.",
    )
    sub.add_argument("url", nargs="?", metavar="URL", help="postgresql://[user[:password]@]host[:port]/dbname")
    sub.add_argument("--table", default="statekit_sessions", help="the sessions table (default: statekit_sessions)")
    sub.add_argument("--timeout", type=float, default=30.0, help="seconds to connect and for each statement (default: 30)")
    sub.add_argument("--print", action="store_true", dest="print_ddl", help="print the DDL instead of running it")


def _run(args: argparse.Namespace) -> int:
    from statekit.session.postgres import PostgresSession  # noqa: PLC0415 - needs the postgres extra (psycopg)

    if args.print_ddl:
        if args.url is not None:
            raise UsageError("give a URL or --print, not both")
        print(PostgresSession.schema_ddl(args.table))
        return OK
    if args.url is None:
        raise UsageError("give the database URL (postgresql://...), or --print for the DDL")
    if not args.url.startswith(_SCHEMES):
        raise UsageError("init-db creates the tables of a PostgreSQL store: give a postgresql:// or postgres:// URL")
    session = PostgresSession.from_url(args.url, table=args.table, timeout=args.timeout)

    async def work() -> int:
        async with session:
            return await session.init_schema()

    version = asyncio.run(work())
    print(f"{session.address} {args.table}: ready, schema version {version}")
    return OK
