"""Property: loading old data through the migrations equals migrating it by hand (issue 7)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings

from strategies import agents_v1, examples
from version_models import Agent, AgentV1, by_hand


def tagged(agent: dict[str, Any]) -> dict[str, Any]:
    """Version-3 agent data as state_dict() writes it: each versioned class says its version."""
    agent = {"__version__": 3, **agent}
    agent["memory"] = {"__version__": 2, **agent["memory"]}
    agent["memory"]["notes"] = [{"__version__": 2, **note} for note in agent["memory"]["notes"]]
    return agent


@settings(max_examples=examples(80), deadline=None)
@given(agents_v1)
def test_loading_version_1_data_equals_migrating_it_by_hand(old: AgentV1) -> None:
    data = old.state_dict()
    before = copy.deepcopy(data)
    through_load = Agent()
    through_load.load_state_dict(data)
    migrated = tagged(by_hand(data))
    by_hand_load = Agent()
    by_hand_load.load_state_dict(migrated)
    assert through_load == by_hand_load
    assert through_load.state_dict() == migrated
    assert data == before


@settings(max_examples=examples(40), deadline=None)
@given(agents_v1)
def test_version_1_data_loads_the_same_leniently_and_strictly(old: AgentV1) -> None:
    strict, lenient = Agent(), Agent()
    strict.load_state_dict(old.state_dict())
    assert lenient.load_state_dict(old.state_dict(), strict=False).unexpected_keys == []
    assert strict == lenient
