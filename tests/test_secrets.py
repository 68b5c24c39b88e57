"""``state_field(secret=True)``: never written in clear (issue 9, secrets)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, Optional

import attrs
import cattrs

import orjson
import pytest
import redis

from test_depth import nested
from statekit import (
    JSONSession,
    SecretError,
    StateLoadError,
    StateVersionError,
    StateModule,
    StatekitError,
    YAMLSession,
    from_config,
    generate_secret_key,
    state_field,
    stateful,
)
from statekit._limits import MAX_DEPTH
from statekit.values.secrets import SecretBox
from statekit.cli import main
from statekit.errors import StateDefinitionError, StateDumpError
from statekit.session import SessionBase
from statekit.session.redis import RedisSession
from statekit.testing import Counter, RedisServer

TOKEN = "sk-live-7c1e4a9b2f0d-DO-NOT-LEAK"


@stateful
class Client(StateModule):
    name: str = state_field(default="assistant")
    api_key: str = state_field(default="", secret=True)
    turns: int = state_field(default=0)


@stateful
class Agent(StateModule):
    client: Client = state_field(factory=Client)
    notes: list[str] = state_field(factory=list)


def agent_with_token() -> Agent:
    agent = Agent()
    agent.client.api_key = TOKEN
    agent.client.turns = 3
    agent.notes.append("hello")
    return agent


Factory = Callable[..., SessionBase]
"""Makes a session given a key, keys or None (and omit=True to omit secret fields without a key)."""


@attrs.frozen
class Place:
    """One storage: a factory of sessions on it (given a key, keys or None), a reader of every
    stored byte (in a stable order), and the command-line options that name it."""

    make: Factory
    stored: Callable[[], list[bytes]]
    options: list[str]


@pytest.fixture(params=["json", "yaml", pytest.param("redis", marks=pytest.mark.redis)])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    """A storage of each backend (Redis: a real server, a fresh key prefix)."""
    if request.param in ("json", "yaml"):
        kind = JSONSession if request.param == "json" else YAMLSession
        options = ["--dir", str(tmp_path)] + (["--yaml"] if kind is YAMLSession else [])

        def files() -> list[bytes]:
            return [p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()]

        def make_file(key: str | Sequence[str] | None, omit: bool = False) -> SessionBase:
            return kind(tmp_path, secret_key=key, omit_secrets=omit)

        yield Place(make_file, files, options)
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    prefix = f"secrets-{uuid.uuid4().hex}:"
    raw = redis.Redis(host=server.host, port=server.port)

    def make_redis(key: str | Sequence[str] | None, omit: bool = False) -> SessionBase:
        return RedisSession(server.host, server.port, key_prefix=prefix, secret_key=key, omit_secrets=omit)

    yield Place(
        make_redis,
        # the values; not their write ids (random, new at each compare-and-set: see sessions.md's RedisSession)
        lambda: [_as_bytes(raw.get(k)) for k in sorted(raw.keys(f"{prefix}*")) if not _as_bytes(k).endswith(b":write-id")],
        ["--host", server.host, "--port", str(server.port), "--key-prefix", prefix],
    )
    raw.close()


@pytest.fixture
def store(place: Place) -> tuple[Factory, Callable[[], list[bytes]]]:
    """A factory of sessions (given a key or None) on one storage, and a reader of every stored byte."""
    return place.make, place.stored


def _as_bytes(value: object) -> bytes:
    assert isinstance(value, bytes)
    return value


def test_without_a_key_the_secret_is_left_out_when_asked_and_not_required(store: Any) -> None:
    make, stored = store
    with make(None, omit=True) as session:
        session.save("s1", agent=agent_with_token())
        fresh = Agent()
        fresh.client.api_key = "kept"
        session.load("s1", agent=fresh)  # strict: the missing secret is not a problem
    assert (fresh.client.api_key, fresh.client.turns, fresh.notes) == ("kept", 3, ["hello"])
    assert all(TOKEN.encode() not in blob and b"api_key" not in blob for blob in stored())


def test_with_a_key_the_secret_is_encrypted_and_comes_back(store: Any) -> None:
    make, stored = store
    key = generate_secret_key()
    with make(key) as session:
        session.save("s1", agent=agent_with_token())
    with make(key) as session:
        fresh = Agent()
        session.load("s1", agent=fresh)
    assert fresh.client.api_key == TOKEN
    blobs = stored()
    assert blobs and all(TOKEN.encode() not in blob and b"DO-NOT-LEAK" not in blob for blob in blobs)
    assert any(b"__secret__" in blob for blob in blobs)


def test_resaving_unchanged_state_writes_the_same_bytes(store: Any) -> None:
    make, stored = store
    key = generate_secret_key()
    agent = agent_with_token()
    with make(key) as session:
        session.save("s1", agent=agent)
        first = stored()
        session.save("s1", agent=agent)
        assert stored() == first


def test_a_wrong_key_is_a_clear_error_that_changes_nothing(store: Any) -> None:
    make, _ = store
    with make(generate_secret_key()) as session:
        session.save("s1", agent=agent_with_token())
    target = Agent()
    target.client.turns = 9
    for key in (generate_secret_key(), None):
        with make(key) as session, pytest.raises(StateLoadError) as caught:
            session.load("s1", agent=target)
        (problem,) = caught.value.problems
        assert problem.dotted == "agent.client.api_key"
        expected = "wrong secret_key" if key else "give the session the secret_key it was saved with"
        assert expected in problem.message
        assert TOKEN not in str(caught.value)
    assert (target.client.api_key, target.client.turns, target.notes) == ("", 9, [])


def test_an_altered_token_or_clear_text_is_refused_with_a_key(tmp_path: Path) -> None:
    key = generate_secret_key()
    session = JSONSession(tmp_path, secret_key=key)
    session.save("s1", agent=agent_with_token())
    path = session.session_path("s1")
    document = orjson.loads(path.read_bytes())
    sealed = document["agent"]["client"]["api_key"]["__secret__"]
    for forged in ({"__secret__": sealed[:-4] + "AAAA"}, "sk-attacker"):
        document["agent"]["client"]["api_key"] = forged
        path.write_bytes(orjson.dumps(document))
        target = Agent()
        with pytest.raises(StateLoadError, match=r"agent\.client\.api_key: (cannot decrypt|expected an encrypted)"):
            session.load("s1", agent=target)
        assert target.client.api_key == ""
    session.close()


def test_the_problems_read_as_the_table_of_docs_secrets_md(tmp_path: Path) -> None:
    """Each row of the page's "Failures change nothing" table, word for word ("..." stands for any text)."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "secrets.md").read_text(encoding="utf-8")
    shown = re.findall(r"^\| [^|`]+ \| [^|`]+ \| `([^`]+)` \|$", page, re.MULTILINE)
    key = generate_secret_key()
    JSONSession(tmp_path, secret_key=key).save("s1", agent=agent_with_token())
    path = JSONSession(tmp_path).session_path("s1")
    sealed = path.read_bytes()
    document = orjson.loads(sealed)
    situations: list[tuple[str | None, bytes]] = [(None, sealed), (generate_secret_key(), sealed)]
    for stored in ("sk-in-clear", SecretBox(key).seal(42)):  # a value in clear; an encrypted int for a str field
        document["agent"]["client"]["api_key"] = stored
        situations.append((key, orjson.dumps(document)))
    problems = []
    for session_key, raw in situations:
        path.write_bytes(raw)
        with pytest.raises(StateLoadError) as caught:
            JSONSession(tmp_path, secret_key=session_key).load("s1", agent=Agent())
        (problem,) = caught.value.problems
        problems.append(problem.message)
    assert len(shown) == len(problems) == 4
    for text, message in zip(shown, problems, strict=True):
        assert re.fullmatch(".*".join(map(re.escape, text.split("..."))), message), (text, message)


def test_state_dict_and_repr_never_show_the_secret() -> None:
    agent = agent_with_token()
    assert agent.state_dict() == {"client": {"name": "assistant", "turns": 3}, "notes": ["hello"]}
    assert TOKEN not in repr(agent) and "api_key=<secret>" in repr(agent.client)
    fresh = Agent()
    fresh.load_state_dict({"client": {"name": "x", "turns": 1}, "notes": []})
    assert fresh.client.api_key == ""


def test_errors_about_a_secret_never_quote_it(tmp_path: Path) -> None:
    @stateful
    class Mode(StateModule):
        level: Literal["low", "high"] = state_field(default="low", secret=True)
        blob: Any = state_field(default=None, secret=True)

    key = generate_secret_key()
    session = JSONSession(tmp_path, secret_key=key)
    session.save("s1", mode=Mode())
    path = session.session_path("s1")
    before = path.read_bytes()
    with pytest.raises(StateDumpError) as dumped:
        session.save("s1", mode=Mode(blob={"text": TOKEN, "bad": float("nan")}))
    assert TOKEN not in str(dumped.value) and dumped.value.__cause__ is None
    assert_no_plaintext_reachable(dumped.value)
    assert path.read_bytes() == before
    document = orjson.loads(before)
    document["mode"]["level"] = SecretBox(key).seal(TOKEN)  # well encrypted, but not "low" or "high"
    path.write_bytes(orjson.dumps(document))
    target = Mode()
    with pytest.raises(StateLoadError) as loaded:
        session.load("s1", mode=target)
    assert [(p.dotted, p.message) for p in loaded.value.problems] == [
        ("mode.level", "not a valid value for this secret field (details hidden)")
    ]
    assert TOKEN not in str(loaded.value) and target.level == "low"
    session.close()


@stateful
class _Vault(StateModule):
    quota: int = state_field(default=0, secret=True)
    api_key: str = state_field(default="", secret=True)
    extra: Any = state_field(default=None, secret=True)


@pytest.mark.parametrize(
    ("field", "value"),
    [("quota", 2**70), ("api_key", TOKEN + "\ud800"), ("extra", nested(MAX_DEPTH - 1)), ("extra", nested(300))],
    ids=["65-bit-int", "lone-surrogate", "one-level-too-deep", "past-orjson"],
)
def test_a_secret_json_cannot_hold_is_a_dump_error_naming_the_field(tmp_path: Path, field: str, value: Any) -> None:
    """As for a plain field: named, nothing written; and the depth counts where the value sits."""
    session = JSONSession(tmp_path, secret_key=generate_secret_key())
    with pytest.raises(StateDumpError) as caught:
        session.save("s1", vault=_Vault(**{field: value}))
    assert [p.path for p in caught.value.problems] == [("vault", field)]
    assert TOKEN not in str(caught.value) and caught.value.__cause__ is None
    assert not session.session_path("s1").exists()
    session.save("s1", vault=_Vault(extra=nested(MAX_DEPTH - 2)))  # the deepest that fits, as for a plain field
    session.close()


@stateful
class Guarded(StateModule):
    model: str = state_field(default="gpt")
    api_key: str = state_field(default="sk-ok", secret=True, validator=attrs.validators.matches_re(r"sk-[a-z]+"))


@stateful
class HoldsGuarded(StateModule):
    client: Optional[Guarded] = state_field(default=None)


def test_a_validator_refusing_a_secret_while_a_module_is_built_never_quotes_it(tmp_path: Path) -> None:
    with pytest.raises(StateLoadError) as built:
        from_config(Guarded, {"api_key": TOKEN})
    assert TOKEN not in str(built.value) and "details hidden" in str(built.value)
    key = generate_secret_key()
    holder = HoldsGuarded(client=Guarded())
    object.__setattr__(holder.client, "api_key", TOKEN)  # set before the validator was tightened
    JSONSession(tmp_path, secret_key=key).save("s", holder=holder)
    target = HoldsGuarded()
    with pytest.raises(StateLoadError) as loaded:
        JSONSession(tmp_path, secret_key=key).load("s", holder=target)  # holder.client is built anew
    assert TOKEN not in str(loaded.value) and "details hidden" in str(loaded.value)
    assert target.client is None
    with pytest.raises(StateLoadError, match="details hidden"):  # it could quote a part of one: all hidden
        from_config(Counted, {"count": -1, "token": TOKEN})
    with pytest.raises(StateLoadError, match="must be >= 0"):  # a module without secrets keeps its messages
        from_config(Tally, {"count": -1})


@stateful
class Tally(StateModule):
    count: int = state_field(default=0, validator=attrs.validators.ge(0))


@stateful
class Counted(StateModule):
    count: int = state_field(default=0, validator=attrs.validators.ge(0))
    token: str = state_field(default="", secret=True)


@stateful
class CredentialV1:
    token: str = ""


def _token_to_port(data: dict[str, Any]) -> dict[str, Any]:
    data["port"] = int(data.pop("token"))  # fails on the secret, quoting it
    return data


@stateful(version=2, migrations={1: _token_to_port})
class CredentialV2:
    token: str = ""
    port: int = 0


@stateful
class VaultV1(StateModule):
    cred: CredentialV1 = state_field(factory=CredentialV1, secret=True)


@stateful
class VaultV2(StateModule):
    cred: CredentialV2 = state_field(factory=CredentialV2, secret=True)


def assert_no_plaintext_reachable(error: BaseException) -> None:
    """Neither ``error``, its context and cause (all the way), nor the locals of statekit's frames
    on their tracebacks hold the secret, but in the user's own modules (which hold it by design)."""
    pending = [error]
    while pending:
        exc = pending.pop()
        assert TOKEN not in str(exc), exc
        pending += [chained for chained in (exc.__context__, exc.__cause__) if chained is not None]
        trace = exc.__traceback__
        while trace is not None:
            frame = trace.tb_frame
            if "/statekit/" in frame.f_code.co_filename:
                for name, value in frame.f_locals.items():
                    if not isinstance(value, StateModule) and name not in ("modules", "module", "self", "owner"):
                        assert TOKEN not in repr(value), (frame.f_code.co_name, name)
            trace = trace.tb_next


@pytest.mark.parametrize("strict", [True, False])
def test_a_failing_migration_of_a_secret_never_quotes_it(tmp_path: Path, strict: bool) -> None:
    key = generate_secret_key()
    JSONSession(tmp_path, secret_key=key).save("s", vault=VaultV1(cred=CredentialV1(token=TOKEN)))
    with pytest.raises(StateVersionError) as caught:
        JSONSession(tmp_path, secret_key=key).load("s", vault=VaultV2(), strict=strict)
    assert TOKEN not in str(caught.value) and caught.value.__cause__ is None
    assert_no_plaintext_reachable(caught.value)
    assert caught.value.path == ("vault", "cred") and "details hidden" in str(caught.value)


@stateful
class TokenV1:
    value: str = ""
    legacy: str = ""


@stateful
class TokenV2:
    value: str = ""


@stateful
class TokensV1(StateModule):
    tokens: dict[str, TokenV1] = state_field(factory=dict, secret=True)


@stateful
class TokensV2(StateModule):
    tokens: dict[str, TokenV2] = state_field(factory=dict, secret=True)


def test_keys_a_lenient_load_ignores_inside_a_secret_are_not_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    key = generate_secret_key()
    JSONSession(tmp_path, secret_key=key).save("s", m=TokensV1(tokens={TOKEN: TokenV1("v", "old")}))
    target = TokensV2()
    result = JSONSession(tmp_path, secret_key=key).load("s", m=target, strict=False)
    assert result["m"].unexpected_keys == ["m.tokens"]
    assert target.tokens == {TOKEN: TokenV2("v")}
    assert TOKEN not in caplog.text and "m.tokens" in caplog.text


def test_a_key_that_is_not_ascii_is_refused(tmp_path: Path) -> None:
    for key in ("é" * 32, "ж" * 32):
        with pytest.raises(SecretError, match="must be ASCII") as caught:
            JSONSession(tmp_path, secret_key=key)
        assert key not in str(caught.value)


def test_a_malformed_key_is_refused_without_echoing_it(tmp_path: Path) -> None:
    with pytest.raises(SecretError, match="32 random bytes") as caught:
        JSONSession(tmp_path, secret_key="short-" + TOKEN)
    assert TOKEN not in str(caught.value)


def test_secret_is_for_module_values_only() -> None:
    with pytest.raises(StateDefinitionError, match="secret=True is for fields of a StateModule"):

        @stateful
        class Record:
            token: str = state_field(default="", secret=True)


@pytest.mark.parametrize(
    "holder_type", [list[Client], dict[str, Client], Client | int, tuple[Client, ...]], ids=["list", "dict", "union", "tuple"]
)
def test_a_module_with_secrets_is_refused_where_it_would_be_saved_as_plain_data(holder_type: Any) -> None:
    """Inside a container a module is dumped field by field, so its secret would be written in clear."""
    namespace = {"__annotations__": {"clients": holder_type}, "clients": state_field(default=None)}
    with pytest.raises(StateDefinitionError, match=r"Client has secret fields \(api_key\), so it cannot be held in a list"):
        stateful(type("Pool", (StateModule,), namespace))


def test_a_value_record_holding_a_module_with_secrets_is_refused() -> None:
    with pytest.raises(StateDefinitionError, match=r"Client has secret fields \(api_key\)"):

        @stateful
        class Holder:
            client: Client | None = None


@stateful
class Plain(StateModule):
    n: int = state_field(default=0)


def test_the_refusal_holds_with_a_plain_cattrs_converter_too() -> None:
    with pytest.raises(StateDefinitionError, match=r"Client has secret fields \(api_key\)"):

        @stateful(converter=cattrs.Converter())
        class Pool(StateModule):
            clients: list[Client] = state_field(factory=list)

    with pytest.raises(StateDefinitionError, match=r"Client has secret fields \(api_key\)"):

        @stateful(converter=cattrs.Converter())
        class Pools(StateModule):
            agents: list[Agent] = state_field(factory=list)  # Agent holds a Client in a module field


def test_a_secret_set_only_by_a_load_is_loaded(tmp_path: Path) -> None:
    """A secret field with init=False has no value until a load sets it."""

    @stateful
    class Late(StateModule):
        n: int = state_field(default=0)
        api_key: str = state_field(init=False, secret=True)

    late = Late()
    key = generate_secret_key()
    source = Late(n=5)
    source.api_key = TOKEN
    JSONSession(tmp_path, secret_key=key).save("s", late=source)
    JSONSession(tmp_path, secret_key=key).load("s", late=late)
    assert (late.n, late.api_key) == (5, TOKEN)


def test_a_module_without_secrets_may_still_be_held_in_a_list() -> None:
    @stateful
    class Pool(StateModule):
        names: list[Plain] = state_field(factory=list)

    assert Pool(names=[Plain(n=2)]).state_dict() == {"names": [{"n": 2}]}

    @dataclasses.dataclass
    class Counted(StateModule):
        n: int = 0

    @stateful
    class Counts(StateModule):
        items: list[Counted] = state_field(factory=list)

    assert Counts(items=[Counted(3)]).state_dict() == {"items": [{"n": 3}]}


def test_statekit_show_masks_the_secret_and_validate_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with JSONSession(tmp_path, secret_key=generate_secret_key()) as session:
        session.save("s1", agent=agent_with_token())
        path = session.session_path("s1")
    assert main(["show", str(path)]) == 0
    out, _ = capsys.readouterr()
    assert "api_key: <secret>" in out and "__secret__" not in out
    monkeypatch.setattr(sys, "path", [str(Path(__file__).parent), *sys.path])
    assert main(["validate", str(path), "--module", "agent=test_secrets:Agent"]) == 0


@stateful
class NeedsKey(StateModule):
    api_key: str = state_field(secret=True)  # no default: a build needs it
    turns: int = state_field(default=0)


def test_validate_does_not_call_a_required_secret_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with JSONSession(tmp_path, secret_key=generate_secret_key()) as session:
        session.save("s1", c=NeedsKey(api_key=TOKEN))
        path = session.session_path("s1")
    monkeypatch.setattr(sys, "path", [str(Path(__file__).parent), *sys.path])
    assert main(["validate", str(path), "--module", "c=test_secrets:NeedsKey"]) == 0
    document = orjson.loads(path.read_bytes())
    del document["c"]["api_key"]  # as a save without a key leaves it: not a problem either
    document["c"]["turns"] = "three"
    path.write_bytes(orjson.dumps(document))
    capsys.readouterr()
    assert main(["validate", str(path), "--module", "c=test_secrets:NeedsKey"]) == 1
    _, err = capsys.readouterr()
    assert "c.turns: expected an integer" in err and "api_key" not in err


def test_key_rotation_is_a_load_with_the_old_key_then_a_save_with_the_new(tmp_path: Path) -> None:
    old, new = generate_secret_key(), generate_secret_key()
    with JSONSession(tmp_path, secret_key=old) as session:
        session.save("s1", agent=agent_with_token())
        agent = Agent()
        session.load("s1", agent=agent)
    with JSONSession(tmp_path, secret_key=new) as session:
        session.save("s1", agent=agent)
        again = Agent()
        session.load("s1", agent=again)
    assert again.client.api_key == TOKEN
    assert again.client == agent.client


def test_the_json_schema_accepts_the_encrypted_form_and_never_requires_it(tmp_path: Path) -> None:
    import jsonschema  # type: ignore[import-untyped]

    from statekit import session_schema

    schema = session_schema(agent=Agent)
    for key in (None, generate_secret_key()):
        with JSONSession(tmp_path, secret_key=key, omit_secrets=key is None) as session:
            session.save("s1", agent=agent_with_token())
            jsonschema.Draft202012Validator(schema).validate(orjson.loads(session.session_path("s1").read_bytes()))


# --- issue 23: key rotation: several keys, and `statekit rekey` ----------------------


def test_several_keys_the_first_encrypts_and_every_one_decrypts(place: Place) -> None:
    old, new = generate_secret_key(), generate_secret_key()
    with place.make(old) as session:
        session.save("s1", agent=agent_with_token())
    for keys in ([new, old], (new, old)):
        with place.make(keys) as session:
            agent = Agent()
            session.load("s1", agent=agent)  # sealed with the second key
            assert agent.client.api_key == TOKEN
            session.save("s2", agent=agent)  # sealed with the first
    for key, opens in ((new, True), (old, False)):
        with place.make(key) as session:
            agent = Agent()
            if opens:
                session.load("s2", agent=agent)
                assert agent.client.api_key == TOKEN
            else:
                with pytest.raises(StateLoadError, match=r"agent\.client\.api_key: cannot decrypt the secret: wrong secret_key"):
                    session.load("s2", agent=agent)
                assert agent.client.api_key == ""


def test_use_secret_key_and_from_url_take_several_keys_too(tmp_path: Path, redis_server: RedisServer) -> None:
    old, new = generate_secret_key(), generate_secret_key()
    JSONSession(tmp_path, secret_key=old).save("s1", agent=agent_with_token())
    own = JSONSession(tmp_path)
    own.use_secret_key([new, old])
    agent = Agent()
    own.load("s1", agent=agent)
    assert agent.client.api_key == TOKEN
    url, prefix = f"redis://{redis_server.host}:{redis_server.port}/0", f"rotate-{uuid.uuid4().hex}:"
    with RedisSession.from_url(url, key_prefix=prefix, secret_key=old) as session:
        session.save("s1", agent=agent_with_token())
    with RedisSession.from_url(url, key_prefix=prefix, secret_key=[new, old]) as session:
        again = Agent()
        session.load("s1", agent=again)
    assert again.client.api_key == TOKEN


def test_a_secret_none_of_the_keys_opens_is_a_clear_error_that_changes_nothing(place: Place) -> None:
    with place.make(generate_secret_key()) as session:
        session.save("s1", agent=agent_with_token())
    target = Agent()
    target.client.turns = 9
    with place.make([generate_secret_key(), generate_secret_key()]) as session, pytest.raises(StateLoadError) as caught:
        session.load("s1", agent=target)
    (problem,) = caught.value.problems
    assert (problem.dotted, problem.message) == (
        "agent.client.api_key",
        "cannot decrypt the secret with any of the 2 keys of secret_key: it was sealed with another key, "
        "or the stored value was altered",
    )
    assert TOKEN not in str(caught.value)
    assert (target.client.api_key, target.client.turns, target.notes) == ("", 9, [])


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ([], "secret_key is an empty list: give at least one key (the first encrypts, every one decrypts)"),
        (["GOOD", "short-" + TOKEN], "secret_key[1] must be 32 random bytes or their URL-safe base64"),
        (("GOOD", "é" * 44), "secret_key[1] must be ASCII"),
        ({"GOOD"}, "secret_key must be one key or a list of keys in order (the first encrypts), got a set"),
    ],
    ids=["empty", "malformed", "not-ascii", "a-set"],
)
def test_a_bad_list_of_keys_is_refused_without_echoing_a_key(tmp_path: Path, keys: Any, message: str) -> None:
    good = generate_secret_key()
    keys = type(keys)(good if key == "GOOD" else key for key in keys)
    with pytest.raises(SecretError) as caught:
        JSONSession(tmp_path, secret_key=keys)
    assert str(caught.value).startswith(message)
    assert good not in str(caught.value) and TOKEN not in str(caught.value)
    own = JSONSession(tmp_path)
    with pytest.raises(SecretError, match=re.escape(message)):
        own.use_secret_key(keys)


Keys = tuple[str, str]


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> Keys:
    """An old and a new key, in the environment variables OLD_KEY and NEW_KEY."""
    old, new = generate_secret_key(), generate_secret_key()
    monkeypatch.setenv("OLD_KEY", old)
    monkeypatch.setenv("NEW_KEY", new)
    return old, new


REKEY = ["rekey", "--new-key-env", "NEW_KEY", "--old-key-env", "OLD_KEY", "--user", "ada"]


def rekey(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    """Run ``statekit rekey``: the status, the lines printed (paths left out) and standard error."""
    capsys.readouterr()
    status = main([*REKEY, *argv])
    out, err = capsys.readouterr()
    return status, [line.rsplit(": ", 1)[-1] if ": " in line else line for line in out.splitlines()], err


def test_rekey_re_encrypts_old_sessions_and_leaves_current_and_unkeyed_ones(
    place: Place, keys: Keys, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = keys
    with place.make(old) as session:
        session.save("s1", "ada", agent=agent_with_token())
    with place.make(new) as session:
        session.save("s2", "ada", agent=agent_with_token())
    with place.make(None) as session:
        session.save("s3", "ada", counter=Counter(count=4))  # a session without encrypted secrets
    before = place.stored()

    status, lines, err = rekey(capsys, "--dry-run", *place.options)
    assert (status, err) == (0, "")
    assert lines == [
        "would re-encrypt 1 of 1 secret with the new key",
        "1 secret already on the new key; left as it is",
        "no encrypted secret; left as it is",
        "would rekey 1, already on the new key 1, without encrypted secrets 1, failed 0",
    ]
    assert place.stored() == before  # the dry run changed no byte

    with place.make(old) as session:
        untouched = [session.read_document(s, "ada") for s in ("s2", "s3")]
    status, lines, err = rekey(capsys, *place.options)
    assert (status, err) == (0, "")
    assert lines[0] == "re-encrypted 1 of 1 secret with the new key"
    assert lines[-1] == "rekeyed 1, already on the new key 1, without encrypted secrets 1, failed 0"
    with place.make(new) as session:  # the new key alone opens every session; the unchanged ones kept their bytes
        agent = Agent()
        session.load("s1", "ada", agent=agent)
        assert (agent.client.api_key, agent.client.turns, agent.notes) == (TOKEN, 3, ["hello"])
        assert [session.read_document(s, "ada") for s in ("s2", "s3")] == untouched
    with place.make(old) as session, pytest.raises(StateLoadError, match="wrong secret_key"):
        session.load("s1", "ada", agent=Agent())

    after = place.stored()
    assert rekey(capsys, *place.options)[1][-1] == "rekeyed 0, already on the new key 2, without encrypted secrets 1, failed 0"
    assert place.stored() == after


def test_rekey_reports_a_secret_no_key_opens_and_goes_on(
    tmp_path: Path, keys: Keys, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = keys
    JSONSession(tmp_path, secret_key=generate_secret_key()).save("s1", "ada", agent=agent_with_token())
    JSONSession(tmp_path, secret_key=old).save("s2", "ada", agent=agent_with_token())
    stranger = JSONSession(tmp_path).session_path("s1", "ada")
    before = stranger.read_bytes()
    status, lines, err = rekey(capsys, "--dir", str(tmp_path))
    assert status == 1
    assert err == (
        f"{stranger}: not rekeyed: agent.client.api_key: cannot decrypt the secret with any of the 2 keys of "
        "secret_key: it was sealed with another key, or the stored value was altered (if it was sealed with a key "
        "not given here, add that key with --old-key-env VAR)\n"
    )
    assert lines == ["re-encrypted 1 of 1 secret with the new key", "rekeyed 1, already on the new key 0, without encrypted secrets 0, failed 1"]
    assert stranger.read_bytes() == before
    agent = Agent()
    JSONSession(tmp_path, secret_key=new).load("s2", "ada", agent=agent)
    assert agent.client.api_key == TOKEN


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"NEW_KEY": None}, "statekit rekey: error: --new-key-env NEW_KEY: the environment variable is not set\n"),
        ({"OLD_KEY": "short-" + TOKEN}, "statekit rekey: error: --old-key-env OLD_KEY: secret_key must be 32 random bytes"),
    ],
)
def test_rekey_refuses_a_missing_or_malformed_key_and_writes_nothing(
    tmp_path: Path, keys: Keys, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, variables: dict[str, str | None], message: str
) -> None:
    JSONSession(tmp_path, secret_key=keys[0]).save("s1", "ada", agent=agent_with_token())
    path = JSONSession(tmp_path).session_path("s1", "ada")
    before = path.read_bytes()
    for name, value in variables.items():
        if value is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, value)
    status, lines, err = rekey(capsys, "--dir", str(tmp_path))
    assert (status, lines) == (2, [])
    assert err.startswith(message) and TOKEN not in err
    assert path.read_bytes() == before


@pytest.mark.parametrize("writes", [1, 5])
def test_rekey_never_overwrites_a_concurrent_writer(
    tmp_path: Path, keys: Keys, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, writes: int
) -> None:
    """Another process's update lands between rekey's read and its write: rekey reads again
    and redoes its work; a writer that wins every one of its 5 attempts is reported and kept."""
    old, new = keys
    JSONSession(tmp_path, secret_key=old).save("s1", "ada", agent=agent_with_token())
    read = JSONSession.aread_document
    left = [writes]

    async def read_then_race(self: JSONSession, session_id: str, user_id: str | None = None) -> Any:
        stored = await read(self, session_id, user_id)
        if left[0]:
            left[0] -= 1
            agent = Agent()

            def bump() -> None:
                agent.client.turns += 1

            async with JSONSession(tmp_path, secret_key=old) as writer:  # an application not yet on the new key
                await writer.aupdate("s1", bump, user_id="ada", agent=agent)
        return stored

    monkeypatch.setattr(JSONSession, "aread_document", read_then_race)
    status, lines, err = rekey(capsys, "--dir", str(tmp_path))
    monkeypatch.undo()
    final = Agent()
    if writes == 1:
        assert (status, err) == (0, "")
        assert lines == ["re-encrypted 1 of 1 secret with the new key", "rekeyed 1, already on the new key 0, without encrypted secrets 0, failed 0"]
        JSONSession(tmp_path, secret_key=new).load("s1", "ada", agent=final)
    else:
        assert status == 1
        assert err.endswith(
            "s1.json: not rekeyed: " f"{tmp_path}/@ada/s1.json was changed by another writer during each of 5 attempts; "
            "it was left as that writer saved it: run statekit rekey again\n"
        )
        JSONSession(tmp_path, secret_key=old).load("s1", "ada", agent=final)
    assert (final.client.turns, final.client.api_key) == (3 + writes, TOKEN)  # every update kept


@pytest.mark.redis
def test_rekey_keeps_the_expiry_of_a_redis_key(redis_server: RedisServer, keys: Keys, capsys: pytest.CaptureFixture[str]) -> None:
    """An application's key_ttl is its business: rekey rewrites the value and leaves the expiry as it was."""
    prefix = f"rekey-ttl-{uuid.uuid4().hex}:"
    with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix, key_ttl=300, secret_key=keys[0]) as session:
        session.save("s1", "ada", agent=agent_with_token())
        key = session.session_key("s1", "ada")
    raw = redis.Redis(host=redis_server.host, port=redis_server.port)
    before = raw.get(key)
    options = ["--host", redis_server.host, "--port", str(redis_server.port), "--key-prefix", prefix]
    assert rekey(capsys, *options)[:2] == (0, ["re-encrypted 1 of 1 secret with the new key", "rekeyed 1, already on the new key 0, without encrypted secrets 0, failed 0"])
    assert raw.get(key) != before and 0 < raw.ttl(key) <= 300
    raw.close()


# -- issue 23: no secret lost without a word ---------------------------------------------


@stateful
class Notes(StateModule):
    text: str = state_field(default="")


def test_without_a_key_a_save_of_a_secret_is_refused_and_writes_nothing(place: Place) -> None:
    make, stored = place.make, place.stored
    with make(None) as session:
        session.save("s1", other=Notes(text="no secrets here"))  # a module without secret fields saves as before
        before = stored()
        with pytest.raises(SecretError, match=r"agent\.client\.api_key is a secret field") as caught:
            session.save("s1", agent=agent_with_token())
        calls: list[int] = []
        with pytest.raises(SecretError, match="omit_secrets=True"):
            session.update("s2", lambda: calls.append(1), agent=agent_with_token())
        assert calls == []  # refused before anything was loaded or changed: mutate() never ran
        assert stored() == before and not session.exists("s2")
        assert "secret_key=" in str(caught.value) and TOKEN not in str(caught.value)


def test_without_a_key_a_secret_found_at_any_depth_or_place_is_refused(tmp_path: Path) -> None:
    # the check reads each class's plan once (has_secrets): modules met at run time are still walked
    client = Client(api_key=TOKEN)
    notes = Notes(text="plain")
    notes.helper = client  # type: ignore[attr-defined]  # an undeclared attribute holding a module is state too
    with JSONSession(tmp_path) as session:
        with pytest.raises(SecretError, match=r"^outer\.helper\.api_key is a secret field"):
            session.save("s1", outer=notes)
        session.save("s2", other=Notes(text="still no secret"), more=Notes())
        assert not session.exists("s1") and session.exists("s2")


def test_a_class_declaring_a_secret_after_keyless_saves_is_still_refused(tmp_path: Path) -> None:
    # until a secret field is declared, a save without a key walks nothing (_keyless): a process that
    # declares one later, after such saves, must still be refused (a fresh interpreter: this one has some)
    script = f"""
import pytest
from statekit import JSONSession, SecretError, StateModule, stateful, state_field
from statekit.values.fields import secret_fields_declared

@stateful
class Plain(StateModule):
    text: str = state_field(default="")

session = JSONSession({str(tmp_path)!r})
assert not secret_fields_declared()
session.save("plain", plain=Plain(text="saved"))

@stateful
class Late(StateModule):
    token: str = state_field(default="", secret=True)

holder = Plain()
holder.late = Late(token="t")  # an undeclared attribute holding a module is state too
with pytest.raises(SecretError, match=r"^holder[.]late[.]token is a secret field"):
    session.save("late", holder=holder)
assert secret_fields_declared() and not session.exists("late") and session.exists("plain")
print("refused")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "refused"), done.stderr


def test_omit_secrets_must_be_a_bool(tmp_path: Path) -> None:
    with pytest.raises(StatekitError, match="omit_secrets must be True or False"):
        JSONSession(tmp_path, omit_secrets="yes")  # type: ignore[arg-type]


def test_a_partial_save_keeps_another_modules_sealed_secret_even_without_the_key(place: Place) -> None:
    make, stored = place.make, place.stored
    key = generate_secret_key()
    with make(key) as keyed:
        keyed.save("s1", agent=agent_with_token(), notes=Notes(text="first"))
        sealed = [blob for blob in stored() if b"__secret__" in blob]
        assert sealed
    with make(None) as keyless:
        keyless.save("s1", notes=Notes(text="second"))  # holds no secret of its own: saves, keeps agent as stored
    with make(key) as keyed:
        agent, notes = Agent(), Notes()
        keyed.load("s1", agent=agent, notes=notes)
    assert (agent.client.api_key, agent.client.turns, notes.text) == (TOKEN, 3, "second")
