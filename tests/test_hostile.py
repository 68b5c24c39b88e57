"""Hostile and careless input: limits, odd files, symlinks, duplicate keys.

Each test feeds statekit something an attacker or a hurried person could
produce and checks that a clear :class:`~statekit.errors.StatekitError` comes
out, naming what and where, and that nothing was changed.
"""

from __future__ import annotations

from typing import Any

import pytest

from statekit._limits import MAX_DEPTH, path_too_deep, too_deep


def nested(levels: int, leaf: Any = 1) -> Any:
    """``levels`` lists inside one another around ``leaf``."""
    for _ in range(levels):
        leaf = [leaf]
    return leaf


@pytest.mark.parametrize("levels", [1, MAX_DEPTH - 1, MAX_DEPTH])
def test_data_within_the_depth_limit_passes(levels: int) -> None:
    assert not too_deep(nested(levels))
    assert path_too_deep(nested(levels)) is None


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 254, 255, 5_000])
def test_data_past_the_depth_limit_is_found_with_its_path(levels: int) -> None:
    assert too_deep(nested(levels))
    assert path_too_deep(nested(levels)) == (0,) * MAX_DEPTH


def test_depth_check_walks_data_orjson_cannot_write() -> None:
    deep = {"big": 1 << 70, "deep": nested(MAX_DEPTH)}
    assert too_deep(deep)
    assert path_too_deep(deep) == ("deep", *(0,) * (MAX_DEPTH - 1))
    assert not too_deep({"big": 1 << 70, "shallow": nested(3)})
