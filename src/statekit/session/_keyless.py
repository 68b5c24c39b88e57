"""A save through a session without ``secret_key``: refused when a module holds secret fields, unless they are to be omitted."""

from __future__ import annotations

from collections.abc import Mapping

from statekit.state.foreign import SupportsState
from statekit.state.module import StateModule
from statekit.state.base import plan_of, state_extras
from statekit.errors import SecretError
from statekit.values.fields import secret_fields_declared


def refuse_secret_fields(modules: Mapping[str, SupportsState]) -> None:
    """Refuse to save modules holding ``state_field(secret=True)`` where there is no key to seal them with.

    Leaving them out without a word would lose them at the next load (issue 23):
    the session must be given a key, or be told to omit them (``omit_secrets=True``).
    Runs at every save without a key, so it walks nothing while no secret field was
    declared in the process, and per module it reads what its class's plan decided
    once (``has_secrets``) and follows only the attributes holding modules.

    Raises:
        SecretError: Naming the first secret field found and both ways out; nothing was written.
    """
    if not secret_fields_declared():  # no class in this process declares one (most programs: nothing to walk)
        return
    seen: set[int] = set()
    stack = [(module, name) for name, module in modules.items() if isinstance(module, StateModule)]  # a foreign one's state is its own
    while stack:
        module, path = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        plan = plan_of(module)
        if plan.has_secrets:
            secret = next(field for field in plan.fields if field.secret)
            raise SecretError(
                f"{path}.{secret.name} is a secret field (state_field(secret=True)), but this session has no "
                "secret_key to encrypt it with; nothing was written. Give the session a key "
                "(secret_key=..., made once with statekit.generate_secret_key() and kept outside the code), "
                "or pass omit_secrets=True to the session to leave secret fields out of what it saves"
            )
        # The modules among the state keys (state_keys): a declared field holding one is always a state key.
        names = [*plan.by_name, *state_extras(module)]
        for name in names:
            value = getattr(module, name, None)
            if isinstance(value, StateModule):
                stack.append((value, f"{path}.{name}"))
