"""The ``statekit`` command: look at, check, convert and tidy saved sessions.

Exit status: 0 when all went well, 1 when the data is invalid or an operation
failed (a missing session, a server that is down), 2 for a usage error.
"""

from statekit.cli._main import build_parser, main

__all__ = ["build_parser", "main"]
