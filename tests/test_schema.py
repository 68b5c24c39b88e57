"""json_schema() / session_schema(): files statekit writes validate, broken ones do not."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from pathlib import Path
from typing import Any, Literal

import attrs
import jsonschema  # type: ignore[import-untyped]
import orjson
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from statekit import StatekitError, StateModule, from_config, state_field, stateful
from statekit.state.schema import DRAFT, json_schema, session_schema
from statekit.errors import StateDefinitionError

from strategies import data_for, examples, json_data, made_once, record_type, value_types


class Role(enum.Enum):
    USER = "user"
    ASSISTANT = "assistant"


@stateful
class Message:
    """One turn of a conversation.

    Attributes:
        role: Who speaks.
        content: Plain text, or a list of blocks
            (text, tool use, tool result).
    """

    role: Role
    content: str | list[dict[str, Any]]
    at: dt.datetime | None = None
    id: uuid.UUID | None = None


@dataclasses.dataclass
class Step:
    title: str
    done: bool = False
    substeps: list[Step] = dataclasses.field(default_factory=list)


@stateful
class Memory(StateModule):
    content: list[Message] = state_field(factory=list)


@stateful
class Agent(StateModule):
    """An agent with a memory, a plan and a few settings."""

    name: str = state_field()
    turns: int = state_field(default=0)
    temperature: float = state_field(default=0.7)
    plan: list[Step] = state_field(factory=list)
    tags: frozenset[str] = state_field(factory=frozenset)
    bounds: tuple[int, int] = state_field(default=(0, 10))
    workdir: Path = state_field(default=Path("."))
    started: dt.date | None = state_field(default=None)
    scores: dict[str, float] = state_field(factory=dict)
    color: tuple[int, int, int] = state_field(
        default=(0, 0, 0),
        to_json=lambda rgb: "#%02x%02x%02x" % rgb,
        from_json=lambda text: (int(text[1:3], 16), int(text[3:5], 16), int(text[5:7], 16)),
        metadata={"json_schema": {"type": "string", "pattern": "^#[0-9a-f]{6}$"}},
    )
    opaque: object = state_field(default=None, from_json=lambda data: data, to_json=lambda v: v)
    memory: Memory = attrs.field(factory=Memory)
    client: object = attrs.field(default=None)  # not state


@stateful
class Tree:
    label: str
    children: list[Tree] = state_field(factory=list)


@dataclasses.dataclass
class Choices:
    """Types the schema knows but the default converter does not load (yet)."""

    mode: Literal["fast", "careful"] = "fast"
    level: Literal[3] = 3
    weights: dict[Literal["a", "b"], float] = dataclasses.field(default_factory=dict)
    by_role: dict[Role, int] = dataclasses.field(default_factory=dict)


def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def errors_of(schema: dict[str, Any], data: Any) -> list[str]:
    return [e.message for e in validator(schema).iter_errors(data)]


def busy_agent() -> Agent:
    agent = Agent(name="Friday", turns=3, tags=frozenset({"web", "math"}), started=dt.date(2025, 8, 15))
    agent.plan += [Step("search"), Step("answer", done=True)]
    agent.scores["accuracy"] = 0.9
    agent.color = (255, 16, 0)
    agent.memory.content += [
        Message(Role.USER, "Hello, agent!", at=dt.datetime(2025, 8, 15, 9, 50, 59, 264000)),
        Message(
            Role.ASSISTANT,
            [{"type": "tool_use", "id": "x1", "name": "search", "input": {"q": "héllo"}}],
            at=dt.datetime(2025, 8, 15, 9, 51, tzinfo=dt.timezone.utc),
            id=uuid.UUID(int=7),
        ),
    ]
    return agent


def test_schema_is_valid_draft_2020_12_with_root_fields() -> None:
    schema = json_schema(Agent)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == DRAFT
    assert schema["title"] == "Agent"
    assert schema["description"] == "An agent with a memory, a plan and a few settings."
    assert schema["required"] == ["name"]
    assert schema["additionalProperties"] is False
    assert "client" not in schema["properties"]
    assert list(schema["properties"])[:3] == ["name", "turns", "temperature"]


def test_field_types_map_to_json_schema() -> None:
    props = json_schema(Agent)["properties"]
    assert props["turns"] == {"type": "integer", "default": 0}
    assert props["temperature"] == {"type": "number", "default": 0.7}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    assert props["bounds"]["prefixItems"] == [{"type": "integer"}, {"type": "integer"}]
    assert props["workdir"] == {"type": "string"}
    assert props["started"]["anyOf"] == [{"type": "string", "format": "date"}, {"type": "null"}]
    assert props["scores"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["memory"] == {"$ref": "#/$defs/Memory"}


def test_literal_fields_become_enum_or_const() -> None:
    schema = json_schema(Choices)
    props = schema["properties"]
    assert props["mode"] == {"enum": ["fast", "careful"], "default": "fast"}
    assert props["level"] == {"const": 3, "default": 3}
    assert props["weights"]["propertyNames"] == {"enum": ["a", "b"]}
    assert props["by_role"]["propertyNames"] == {"$ref": "#/$defs/Role"}
    assert errors_of(schema, {"mode": "slow"}) == ["'slow' is not one of ['fast', 'careful']"]
    assert errors_of(schema, {"by_role": {"robot": 1}}) == ["'robot' is not one of ['user', 'assistant']"]


def test_named_classes_go_to_defs_with_docstring_descriptions() -> None:
    defs = json_schema(Agent)["$defs"]
    message = defs["Message"]
    assert message["required"] == ["role", "content"]
    assert message["properties"]["role"] == {"$ref": "#/$defs/Role", "description": "Who speaks."}
    assert message["properties"]["content"]["description"] == (
        "Plain text, or a list of blocks (text, tool use, tool result)."
    )
    assert defs["Role"] == {"title": "Role", "enum": ["user", "assistant"]}
    assert defs["Step"]["properties"]["substeps"]["items"] == {"$ref": "#/$defs/Step"}


def test_custom_codec_field_uses_the_given_schema_or_accepts_anything() -> None:
    props = json_schema(Agent)["properties"]
    assert props["color"] == {"type": "string", "pattern": "^#[0-9a-f]{6}$"}
    assert props["opaque"] == {}


def test_recursive_root_refers_to_itself() -> None:
    schema = json_schema(Tree)
    assert schema["properties"]["children"]["items"] == {"$ref": "#"}
    data = {"label": "a", "children": [{"label": "b", "children": [{"label": 3}]}]}
    assert errors_of(schema, data) == ["3 is not of type 'string'"]


def test_state_dict_of_a_busy_agent_validates() -> None:
    agent = busy_agent()
    state = orjson.loads(orjson.dumps(agent.state_dict()))
    assert errors_of(json_schema(Agent), state) == []
    assert errors_of(json_schema(Agent), Agent(name="fresh").state_dict()) == []


def test_yaml_dump_of_state_validates() -> None:
    text = yaml.safe_dump(busy_agent().state_dict(), allow_unicode=True, sort_keys=False)
    assert errors_of(json_schema(Agent), yaml.safe_load(text)) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: s.update(turns="three"), "'three' is not of type 'integer'"),
        (lambda s: s.update(tunrs=3), "Additional properties are not allowed ('tunrs' was unexpected)"),
        (lambda s: s.pop("name"), "'name' is a required property"),
        (lambda s: s["memory"]["content"][0].update(role="robot"), "'robot' is not one of ['user', 'assistant']"),
        (lambda s: s["memory"]["content"][1].pop("content"), "'content' is a required property"),
        (lambda s: s["plan"][1].update(done="yes"), "'yes' is not of type 'boolean'"),
        (lambda s: s.update(bounds=[1, 2, 3]), "[1, 2, 3] is too long"),
        (lambda s: s.update(color="red"), "'red' does not match '^#[0-9a-f]{6}$'"),
        (lambda s: s["memory"]["content"][0].update(at="yesterday"), "'yesterday' is not valid under any"),
        (lambda s: s["memory"]["content"][1].update(id="not-a-uuid"), "'not-a-uuid' is not valid under any"),
    ],
)
def test_broken_state_does_not_validate(change: Any, expected: str) -> None:
    state = orjson.loads(orjson.dumps(busy_agent().state_dict()))
    change(state)
    messages = errors_of(json_schema(Agent), state)
    assert len(messages) == 1
    assert messages[0].startswith(expected)


def test_session_schema_describes_each_module() -> None:
    schema = session_schema(agent=Agent, memory=Memory())
    assert schema["required"] == ["agent", "memory"]
    assert schema["properties"]["agent"] == {"$ref": "#/$defs/Agent"}
    document = {"agent": busy_agent().state_dict(), "memory": Memory().state_dict(), "other": {}}
    assert errors_of(schema, orjson.loads(orjson.dumps(document))) == []
    del document["memory"]
    assert errors_of(schema, document) == ["'memory' is a required property"]


def test_title_can_be_given() -> None:
    assert json_schema(Memory, title="agent memory")["title"] == "agent memory"


def test_plain_attrs_records_and_dataclasses_are_accepted() -> None:
    schema = json_schema(Step)
    assert schema["required"] == ["title"]
    assert errors_of(schema, {"title": "x", "substeps": [{"title": "y", "done": 1}]}) == [
        "1 is not of type 'boolean'"
    ]


@pytest.mark.parametrize("bad", [int, dict, "Agent", Agent(name="x")])
def test_not_a_stateful_class_is_refused(bad: Any) -> None:
    with pytest.raises(StateDefinitionError, match="is not a @stateful class"):
        json_schema(bad)


def test_module_with_run_time_state_only_is_refused_with_a_hint() -> None:
    class Imperative(StateModule):
        pass

    with pytest.raises(StateDefinitionError, match="registered at run time: it has no static schema"):
        json_schema(Imperative)


def _ints_for_whole_floats(data: Any) -> Any:
    """``data`` with ``3.0`` written ``3``: JSON Schema's ``integer`` takes both, statekit's ``int`` only ``3``."""
    if type(data) is float and data.is_integer():
        return int(data)
    if type(data) is list:
        return [_ints_for_whole_floats(v) for v in data]
    if type(data) is dict:
        return {k: _ints_for_whole_floats(v) for k, v in data.items()}
    return data


@settings(max_examples=examples(500), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_the_schema_accepts_what_from_config_loads(data: st.DataObject) -> None:
    tp = data.draw(value_types)
    record = record_type([tp])
    assume(isinstance(record, type))
    document = {"f0": data.draw(st.one_of(data_for(tp, noisy=True), json_data))}
    try:
        from_config(record, _ints_for_whole_floats(document))
    except StatekitError as refused:
        loads, reason = False, str(refused)
    else:
        loads, reason = True, ""
    assert schema_validator(record).is_valid(document) == loads, reason


@made_once
def schema_validator(record: type) -> jsonschema.Draft202012Validator:
    """A validator of ``record``'s schema, made once per drawn record (checking the schema is the costly part)."""
    return validator(json_schema(record))


def _record_made_by_a_factory(field_type: type) -> type:
    @stateful
    class Made:
        value: field_type  # type: ignore[valid-type]

    return Made


def test_classes_with_one_qualified_name_get_their_own_definitions() -> None:
    flag, text, count = (_record_made_by_a_factory(tp) for tp in (bool, str, int))

    @stateful
    class Holder:
        a: flag = attrs.field(factory=lambda: flag(True))  # type: ignore[valid-type]
        b: text = attrs.field(factory=lambda: text("hi"))  # type: ignore[valid-type]
        c: count = attrs.field(factory=lambda: count(1))  # type: ignore[valid-type]

    schema = json_schema(Holder)
    assert len({schema["properties"][name]["$ref"] for name in "abc"}) == 3
    assert errors_of(schema, {"a": {"value": True}, "b": {"value": "hello"}, "c": {"value": 3}}) == []
    assert errors_of(schema, {"b": {"value": 3}}) == ["3 is not of type 'string'"]


@stateful
class Times:
    when: dt.datetime
    at: dt.time


@pytest.mark.parametrize(
    ("when", "at"),
    [
        ("2025-08-15Z", "10:00"),  # a zone after a date with no time
        ("2025-13-01", "10:00"),
        ("2025-02-29", "10:00"),  # not a leap year
        ("1900-02-29", "10:00"),
        ("0000-01-01", "10:00"),
        ("2025-08-15T24:00", "10:00"),
        ("2025-08-15T10:60", "10:00"),
        ("2025-08-15T10:00:00+24:00", "10:00"),
        ("2025-08-15", "10:00:60"),
        ("2025-08-15", "10:00+23:60"),
    ],
)
def test_the_schema_refuses_dates_and_times_from_config_refuses(when: str, at: str) -> None:
    assert errors_of(json_schema(Times), {"when": when, "at": at}) != []
    with pytest.raises(StatekitError):
        from_config(Times, {"when": when, "at": at})


@pytest.mark.parametrize(
    "moment",
    [
        dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=dt.timezone(-dt.timedelta(hours=23, minutes=59))),
        dt.datetime(2000, 2, 29),
        dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc),
        dt.datetime(9999, 12, 31, 0, 0, 1),
        dt.datetime(2025, 8, 15, 9, 50, tzinfo=dt.timezone(dt.timedelta(hours=5, seconds=30))),  # +05:00:30
        dt.datetime(2025, 8, 15, tzinfo=dt.timezone(-dt.timedelta(hours=4, microseconds=5))),  # -04:00:00.000005
    ],
)
def test_the_schema_accepts_the_dates_and_times_statekit_writes(moment: dt.datetime) -> None:
    state = Times(moment, moment.timetz())
    data = {"when": moment.isoformat(), "at": moment.timetz().isoformat()}
    assert errors_of(json_schema(Times), data) == []
    assert errors_of(json_schema(Times), {"when": moment.isoformat(" "), "at": "10"}) == []
    assert from_config(Times, data) == state


@stateful
class Keyed(StateModule):
    api_key: str = state_field(secret=True)
    token: str = state_field(default="", secret=True, metadata={"json_schema": {"type": "string", "minLength": 3}})


SEALED = {"__secret__": "v1:abc"}


def test_the_config_schema_of_a_secret_field_is_its_value_in_clear() -> None:
    schema = json_schema(Keyed)
    assert schema["required"] == ["api_key"]
    assert errors_of(schema, {"api_key": "sk-123", "token": "tok"}) == []
    assert errors_of(schema, {"api_key": SEALED}) == [f"{SEALED!r} is not of type 'string'"]
    assert errors_of(schema, {"api_key": "sk-123", "token": "x"}) == ["'x' is too short"]
    assert from_config(Keyed, {"api_key": "sk-123", "token": "tok"}).api_key == "sk-123"
    with pytest.raises(StatekitError, match="the secret is encrypted"):
        from_config(Keyed, {"api_key": SEALED})


def test_the_session_schema_of_a_secret_field_takes_it_sealed_in_clear_or_left_out() -> None:
    schema = session_schema(keyed=Keyed)
    for state in ({"api_key": SEALED, "token": SEALED}, {"api_key": "sk-123", "token": "tok"}, {}):
        assert errors_of(schema, {"keyed": state}) == []
    assert errors_of(schema, {"keyed": {"token": "x"}}) != []
