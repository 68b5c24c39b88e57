"""A bytecode folder for the interpreters tests start, where Python writes none (``PYTHONDONTWRITEBYTECODE``).

Without bytecode on disk, every interpreter a test starts (crash savers, worker
processes, examples, ``python -m statekit``) compiles statekit from its source
again. :func:`share_bytecode` fills a folder with the bytecode of every module
the test runner has imported and points those interpreters at it
(``PYTHONPYCACHEPREFIX``): each is still a fresh interpreter, and nothing is
written in the tree.

They keep ``PYTHONDONTWRITEBYTECODE`` and write nothing there themselves: a
child that may not write past 4 KiB (the full-disk test) would leave truncated
bytecode for the next one, and workers forked from one interpreter name their
temporary bytecode files alike.
"""

from __future__ import annotations

import os
import py_compile
import sys
from importlib.util import cache_from_source
from pathlib import Path

PREFIX = "PYTHONPYCACHEPREFIX"


def share_bytecode(folder: Path) -> None:
    """Fill ``folder`` with the bytecode of the modules imported so far and set :data:`PREFIX` to it.

    Once a prefix is set, Python looks for bytecode under it only: a module's
    own ``__pycache__`` file is linked there, a module without one (statekit
    and the tests' helpers, under ``PYTHONDONTWRITEBYTECODE``) compiled there.
    Test modules are left out: pytest rewrites their asserts, children do not
    import them.
    """
    sources = []
    for module in list(sys.modules.values()):
        spec = getattr(module, "__spec__", None)
        origin = getattr(spec, "origin", None)
        if spec is None or not spec.has_location or not isinstance(origin, str) or not origin.endswith(".py"):
            continue
        if Path(origin).name.startswith(("test_", "conftest")):
            continue
        sources.append((origin, spec.cached))
    previous, sys.pycache_prefix = sys.pycache_prefix, str(folder)
    try:
        targets = [(origin, cached, cache_from_source(origin)) for origin, cached in sources]
    finally:
        sys.pycache_prefix = previous
    for origin, cached, target in targets:
        if os.path.lexists(target):  # one file imported under two names
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if cached and os.path.exists(cached):
            os.symlink(cached, target)
        else:
            py_compile.compile(origin, cfile=target, doraise=False, quiet=2)
    os.environ[PREFIX] = str(folder)


def stop_sharing_bytecode() -> None:
    """Unset :data:`PREFIX`: interpreters started from now on compile as before."""
    os.environ.pop(PREFIX, None)
