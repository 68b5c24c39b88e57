"""pydantic (v2) models as state values: saved with model_dump, loaded with model_validate, problems with paths."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import attrs
import jsonschema  # type: ignore[import-untyped]
import pytest
from pydantic import BaseModel, ConfigDict, Field, RootModel, SecretStr, field_serializer, model_validator

from statekit import StateModule, from_config, json_schema, session_schema, state_field, stateful
from statekit.errors import StateDefinitionError, StateDumpError, StateLoadError
from statekit.session import JSONSession, YAMLSession


class Block(BaseModel):
    type: str
    text: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class Msg(BaseModel):
    name: str
    role: str
    content: list[Block] = Field(default_factory=list)


class AgentState(BaseModel):
    step: int = 0
    memory: list[Msg] = Field(default_factory=list)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = 0


class Extra(BaseModel):
    model_config = ConfigDict(extra="allow")
    n: int = 0


class Aliased(BaseModel):
    user_name: str = Field(alias="userName")


class Loose(BaseModel):
    value: Any = None
    ratio: float = 0.0


class Counted(BaseModel):
    calls: ClassVar[list[int]] = []
    n: int = 0

    @model_validator(mode="before")
    @classmethod
    def _count(cls, data: Any) -> Any:
        cls.calls.append(1)
        return data


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)
    role: str
    text: str


class Subclassed(Msg):
    pass


@stateful
class Note:
    """A value record holding a model."""

    title: str
    msg: Msg


@stateful
class Agent(StateModule):
    state: AgentState = state_field(factory=AgentState)
    last: Msg | None = state_field(default=None)
    inbox: list[Msg] = state_field(factory=list)
    by_name: dict[str, Msg] = state_field(factory=dict)
    notes: list[Note] = state_field(factory=list)
    turns: int = state_field(default=0)


def _msg(name: str, text: str) -> Msg:
    return Msg(name=name, role="assistant", content=[Block(type="text", text=text, data={"k": [1, None]})])


def _busy() -> Agent:
    return Agent(
        state=AgentState(step=2, memory=[_msg("a", "hi"), _msg("b", "ho")]),
        last=_msg("c", "last"),
        inbox=[_msg("d", "in")],
        by_name={"e": _msg("e", "by")},
        notes=[Note("t", _msg("f", "note"))],
        turns=3,
    )


def test_state_dict_holds_model_dump_json_and_loads_back_equal() -> None:
    agent = _busy()
    state = agent.state_dict()
    assert state["state"] == agent.state.model_dump(mode="json")
    assert state["last"] == {"name": "c", "role": "assistant", "content": [{"type": "text", "text": "last", "data": {"k": [1, None]}}]}
    assert state["notes"] == [{"title": "t", "msg": _msg("f", "note").model_dump(mode="json")}]
    fresh = Agent()
    fresh.load_state_dict(state)
    assert fresh == agent
    assert type(fresh.state) is AgentState and type(fresh.notes[0].msg) is Msg


def test_state_dict_is_a_copy_and_load_copies_the_data() -> None:
    agent = _busy()
    state = agent.state_dict()
    state["state"]["memory"][0]["content"][0]["data"]["k"].append(2)
    assert agent.state.memory[0].content[0].data == {"k": [1, None]}
    fresh = Agent()
    fresh.load_state_dict(state)
    state["state"]["memory"][0]["content"][0]["data"]["k"].append(3)
    assert fresh.state.memory[0].content[0].data == {"k": [1, None, 2]}


@pytest.mark.parametrize("session_class", [JSONSession, YAMLSession])
def test_sessions_round_trip_models(tmp_path: Path, session_class: type[JSONSession]) -> None:
    agent = _busy()
    session_class(tmp_path).save("s", user_id="u", agent=agent)
    loaded = Agent()
    session_class(tmp_path).load("s", user_id="u", agent=loaded)
    assert loaded == agent


def test_json_session_file_holds_the_models_json(tmp_path: Path) -> None:
    agent = _busy()
    JSONSession(tmp_path).save("s", agent=agent)
    (path,) = tmp_path.glob("*.json")
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["agent"]["state"] == agent.state.model_dump(mode="json")
    assert document["agent"]["by_name"] == {"e": _msg("e", "by").model_dump(mode="json")}


def test_validation_errors_are_problems_with_the_field_path_and_pydantic_loc() -> None:
    agent = _busy()
    state = agent.state_dict()
    state["state"]["memory"][1]["content"][0]["type"] = 3
    state["by_name"]["e"]["role"] = None
    del state["last"]["name"]
    state["notes"][0]["msg"]["content"] = "text"
    state["turns"] = "many"
    before = agent.state_dict()
    with pytest.raises(StateLoadError) as caught:
        agent.load_state_dict(state)
    assert sorted((p.path, p.message) for p in caught.value.problems) == sorted(
        [
            (("state", "memory", 1, "content", 0, "type"), "Input should be a valid string"),
            (("by_name", "e", "role"), "Input should be a valid string"),
            (("last", "name"), "Field required"),
            (("notes", 0, "msg", "content"), "Input should be a valid list"),
            (("turns",), "expected an integer, got a string"),
        ]
    )
    assert agent.state_dict() == before  # all or nothing


class Said(BaseModel):
    content: str | list[dict[str, Any]]
    ids: dict[int, str] = Field(default_factory=dict)


@stateful
class Speaker(StateModule):
    said: Said = state_field(factory=lambda: Said(content=""))


def test_loc_steps_that_are_not_in_the_data_go_into_the_message() -> None:
    with pytest.raises(StateLoadError) as caught:
        Speaker().load_state_dict({"said": {"content": 5, "ids": {"one": "a"}}})
    assert [(p.path, p.message) for p in caught.value.problems] == [
        (("said", "content"), "Input should be a valid string (in str)"),
        (("said", "content"), "Input should be a valid list (in list[dict[str,any]])"),
        (("said", "ids", "one"), "Input should be a valid integer, unable to parse string as an integer (in [key])"),
    ]


def test_a_session_load_reports_model_problems_with_positions(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    session.save("s", agent=_busy())
    (path,) = tmp_path.glob("*.json")
    document = json.loads(path.read_text(encoding="utf-8"))
    document["agent"]["state"]["step"] = "two"
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    with pytest.raises(StateLoadError) as caught:
        session.load("s", agent=Agent())
    (problem,) = caught.value.problems
    assert problem.path == ("agent", "state", "step")
    assert problem.message == "Input should be a valid integer, unable to parse string as an integer"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert problem.line is not None and '"step": "two"' in lines[problem.line - 1]


def test_a_model_that_is_not_an_object_is_a_problem_at_the_field() -> None:
    with pytest.raises(StateLoadError) as caught:
        Agent().load_state_dict({**Agent().state_dict(), "state": [1]})
    assert [p.path for p in caught.value.problems] == [("state",)]
    assert "valid dictionary or instance of AgentState" in caught.value.problems[0].message


@dataclasses.dataclass
class Pair:
    left: Msg
    right: Msg | None = None


@stateful
class Pairs(StateModule):
    pairs: tuple[Pair, ...] = state_field(default=())


def test_dataclasses_and_tuples_hold_models_too() -> None:
    pairs = Pairs(pairs=(Pair(_msg("a", "x")), Pair(_msg("b", "y"), _msg("c", "z"))))
    state = pairs.state_dict()
    assert state["pairs"][1] == {"left": _msg("b", "y").model_dump(mode="json"), "right": _msg("c", "z").model_dump(mode="json")}
    fresh = Pairs()
    fresh.load_state_dict(state)
    assert fresh == pairs
    state["pairs"][0]["left"]["content"][0]["text"] = 5
    with pytest.raises(StateLoadError) as caught:
        fresh.load_state_dict(state)
    assert [p.path for p in caught.value.problems] == [("pairs", 0, "left", "content", 0, "text")]


@stateful
class Configs(StateModule):
    strict: Strict = state_field(factory=Strict)
    extra: Extra = state_field(factory=Extra)
    plain: Block = state_field(factory=lambda: Block(type="t"))


def test_unknown_keys_follow_the_models_own_config() -> None:
    data = {"strict": {"n": 1, "m": 2}, "extra": {"n": 1, "kept": [1]}, "plain": {"type": "t", "dropped": 1}}
    with pytest.raises(StateLoadError) as caught:
        Configs().load_state_dict(data)
    assert [(p.path, p.message) for p in caught.value.problems] == [(("strict", "m"), "Extra inputs are not permitted")]
    with pytest.raises(StateLoadError):
        Configs().load_state_dict(data, strict=False)  # the model's config decides, not strict=
    configs = Configs()
    configs.load_state_dict({**data, "strict": {"n": 1}})
    assert configs.extra.model_extra == {"kept": [1]}  # extra="allow": kept, and saved again
    assert configs.state_dict()["extra"] == {"n": 1, "kept": [1]}
    assert configs.state_dict()["plain"] == {"type": "t", "text": "", "data": {}}  # extra="ignore": dropped


@stateful
class Odd(StateModule):
    aliased: Aliased = state_field(factory=lambda: Aliased(userName="x"))
    loose: Loose = state_field(factory=Loose)
    root: RootModel[list[int]] = state_field(factory=lambda: RootModel[list[int]]([1, 2]))


def test_aliases_and_root_models_round_trip() -> None:
    odd = Odd(aliased=Aliased(userName="ann"), root=RootModel[list[int]]([3]))
    state = odd.state_dict()
    assert state["aliased"] == {"userName": "ann"} and state["root"] == [3]
    fresh = Odd()
    fresh.load_state_dict(state)
    assert fresh == odd


def test_what_is_not_json_is_a_dump_error_with_its_path(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    cases: list[tuple[Odd, tuple[Any, ...], str]] = [
        (Odd(loose=Loose(value=object())), ("loose",), "model_dump raised PydanticSerializationError: Unable to serialize unknown type"),
        (Odd(loose=Loose(value={"a": [math.nan]})), ("loose", "value", "a", 0), "nan (not a finite number): JSON has no form for it"),
        (Odd(loose=Loose(ratio=math.inf)), ("loose", "ratio"), "inf (not a finite number)"),
    ]
    for odd, path, text in cases:
        with pytest.raises(StateDumpError) as caught:
            odd.state_dict()
        assert [p.path for p in caught.value.problems] == [path]
        assert text in caught.value.problems[0].message
        with pytest.raises(StateDumpError) as saved:
            session.save("s", odd=odd)
        assert [p.path for p in saved.value.problems] == [("odd", *path)]
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_value_that_does_not_match_its_model_field_is_refused_on_save() -> None:
    odd = Odd()
    odd.aliased.user_name = 5  # type: ignore[assignment]  # no validate_assignment: pydantic keeps it
    with pytest.raises(StateDumpError) as caught:
        odd.state_dict()
    (problem,) = caught.value.problems
    assert problem.path == ("aliased",)
    assert "Expected `str`" in problem.message and "field_name='user_name'" in problem.message


def test_a_subclass_or_another_class_is_refused_on_save() -> None:
    agent = Agent(last=Subclassed(name="s", role="r"))
    with pytest.raises(StateDumpError) as caught:
        agent.state_dict()
    assert [(p.path, p.message) for p in caught.value.problems] == [(("last",), "expected a Msg, got a Subclassed")]
    agent = Agent(inbox=[_msg("a", "x"), {"name": "b"}])  # type: ignore[list-item]
    with pytest.raises(StateDumpError) as caught:
        agent.state_dict()
    assert [(p.path, p.message) for p in caught.value.problems] == [(("inbox", 1), "expected a Msg, got an object")]


@stateful
class CountedHolder(StateModule):
    counted: Counted = state_field(factory=Counted)
    turns: int = state_field(default=0, validator=attrs.validators.ge(0))


def test_model_validators_run_once_per_session_load(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    session.save("s", m=CountedHolder(counted=Counted(n=2), turns=1))
    holder = CountedHolder()
    Counted.calls.clear()
    session.load("s", m=holder)
    assert (holder.counted.n, Counted.calls) == (2, [1])
    (path,) = tmp_path.glob("*.json")
    document = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**document, "m": {**document["m"], "turns": -1}}), encoding="utf-8")
    Counted.calls.clear()
    with pytest.raises(StateLoadError):
        session.load("s", m=holder)
    assert Counted.calls == [1]


def test_models_work_in_configs(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("state:\n  step: 4\n  memory:\n    - {name: a, role: user}\nturns: 1\n", encoding="utf-8")
    agent = from_config(Agent, config)
    assert agent.state == AgentState(step=4, memory=[Msg(name="a", role="user")])


def test_json_schema_comes_from_model_json_schema_and_validates_saved_state() -> None:
    schema = json_schema(Agent)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["state"] == {"$ref": "#/$defs/AgentState"}
    assert schema["properties"]["last"] == {"anyOf": [{"$ref": "#/$defs/Msg"}, {"type": "null"}], "default": None}
    assert schema["$defs"]["AgentState"]["properties"]["memory"]["items"] == {"$ref": "#/$defs/AgentState.Msg"}
    assert schema["$defs"]["AgentState.Block"] == Block.model_json_schema()
    jsonschema.validate(_busy().state_dict(), schema)
    broken = _busy().state_dict()
    broken["state"]["memory"][0]["content"][0]["type"] = 3
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
    session = session_schema(agent=Agent, configs=Configs)
    jsonschema.validate({"agent": _busy().state_dict(), "configs": Configs().state_dict()}, session)
    assert session["$defs"]["Strict"]["additionalProperties"] is False


class Node(BaseModel):
    label: str = ""
    kids: list[Node] = Field(default_factory=list)


@stateful
class Tree(StateModule):
    root: Node = state_field(factory=Node)


def test_recursive_models_round_trip_and_have_a_schema() -> None:
    tree = Tree(root=Node(label="a", kids=[Node(label="b", kids=[Node()])]))
    fresh = Tree()
    fresh.load_state_dict(tree.state_dict())
    assert fresh == tree
    schema = json_schema(Tree)
    jsonschema.validate(tree.state_dict(), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"root": {"kids": [{"label": 1}]}}, schema)


def test_unions_of_models_are_refused_when_the_class_is_defined() -> None:
    with pytest.raises(StateDefinitionError, match=r"Bad\.item: .*hold the union in a model .*RootModel\[A \| B\]"):

        @stateful
        class Bad(StateModule):
            item: Msg | Block = state_field(factory=lambda: Block(type="t"))


def test_masked_secrets_are_refused_when_the_class_is_defined() -> None:
    class Keyed(BaseModel):
        key: SecretStr

    class Holder(BaseModel):
        keys: list[Keyed] = Field(default_factory=list)

    with pytest.raises(StateDefinitionError, match=r"Bad\.holder: .*pydantic writes Keyed\.key as '\*{10}' in JSON"):

        @stateful
        class Bad(StateModule):
            holder: Holder = state_field(factory=Holder)

    class Served(BaseModel):
        key: SecretStr

        @field_serializer("key", when_used="json")
        def _reveal(self, value: SecretStr) -> str:
            return value.get_secret_value()

    @stateful
    class Good(StateModule):
        served: Served = state_field(factory=lambda: Served(key=SecretStr("sk-1")))

    good = Good()
    fresh = Good(served=Served(key=SecretStr("")))
    fresh.load_state_dict(good.state_dict())
    assert fresh.served.key.get_secret_value() == "sk-1"


def test_a_secret_field_may_hold_a_model(tmp_path: Path) -> None:
    @stateful
    class Vault(StateModule):
        creds: Block = state_field(factory=lambda: Block(type="key", text="sk-1"), secret=True)

    JSONSession(tmp_path, secret_key=b"k" * 32).save("s", v=Vault())
    assert "sk-1" not in next(tmp_path.glob("*.json")).read_text(encoding="utf-8")
    vault = Vault(creds=Block(type="none"))
    JSONSession(tmp_path, secret_key=b"k" * 32).load("s", v=vault)
    assert vault.creds == Block(type="key", text="sk-1")


@stateful
class Memory(StateModule):
    content: list[Frozen] = state_field(factory=list, append_only=True)


def test_append_only_lists_of_frozen_models_save_only_new_items(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    memory = Memory(content=[Frozen(role="user", text="hi")])
    session.save("s", memory=memory)
    memory.content.append(Frozen(role="assistant", text="ho"))
    session.save("s", memory=memory)
    (log,) = tmp_path.glob("*.json.log")
    # each delta line: [[sequence, checksum], [path, items], ...] (issue 26)
    assert json.loads(log.read_text(encoding="utf-8").splitlines()[1])[1:] == [
        [["memory", "content"], [{"role": "assistant", "text": "ho"}]]
    ]
    other = JSONSession(tmp_path)
    loaded = Memory()
    other.load("s", memory=loaded)
    assert loaded == memory
    loaded.content.append(Frozen(role="user", text="again"))
    other.save("s", memory=loaded)  # after a load too: only the new item
    assert json.loads(log.read_text(encoding="utf-8").splitlines()[2])[1:] == [
        [["memory", "content"], [{"role": "user", "text": "again"}]]
    ]
    again = Memory()
    JSONSession(tmp_path).load("s", memory=again)
    assert again == loaded


def test_append_only_lists_of_mutable_models_are_refused() -> None:
    with pytest.raises(StateDefinitionError, match=r"Bad\.items: the items of an append_only list must be frozen .*Msg is not"):

        @stateful
        class Bad(StateModule):
            items: list[Msg] = state_field(factory=list, append_only=True)


def test_statekit_never_imports_pydantic_when_no_model_is_used(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from statekit import StateModule, json_schema, state_field, stateful
        from statekit.session import JSONSession, YAMLSession

        @stateful
        class Rec:
            text: str

        @stateful
        class Agent(StateModule):
            items: list[Rec] = state_field(factory=list)
            last: Rec | None = state_field(default=None)
            meta: dict = state_field(factory=dict)

        agent = Agent(items=[Rec("a")], last=Rec("b"), meta={{"k": [1]}})
        for session in (JSONSession({str(tmp_path)!r}), YAMLSession({str(tmp_path)!r})):
            session.save("s", agent=agent)
            loaded = Agent()
            session.load("s", agent=loaded)
            assert loaded == agent
        copy = Agent()
        copy.load_state_dict(agent.state_dict())
        assert copy == agent and json_schema(Agent)
        try:
            copy.load_state_dict({{"items": [{{"text": 1}}], "last": None, "meta": {{}}}})
        except Exception as exc:
            assert type(exc).__name__ == "StateLoadError"
        loaded_pydantic = sorted(name for name in sys.modules if name.split(".")[0] in ("pydantic", "pydantic_core"))
        assert loaded_pydantic == [], loaded_pydantic
        print("no pydantic")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "no pydantic"), done.stderr
