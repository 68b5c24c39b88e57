"""Harness for the tests ported from AgentScope 1.0.21 (none of their code changes here).

AgentScope's JSONSession test saves into ``./``: each test runs in its own
temporary folder, so that nothing lands in the checkout.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _run_in_a_temporary_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


_REDIS_CLOSE = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")
"""AgentScope's Redis test tears down with redis-py's deprecated ``FakeRedis.close()``
(a warning about the test's own fake server, not about statekit)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if item.path.parent == here:
            item.add_marker(_REDIS_CLOSE)
