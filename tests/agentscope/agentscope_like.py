"""Small stand-ins for the AgentScope 1.0.21 classes its state tests use.

Written the way AgentScope writes them (imperative ``register_state`` calls,
``state_dict()`` / ``load_state_dict()`` overrides that call ``super()``,
tuples in memory), on statekit's ``StateModule``, so that the ported tests
exercise statekit exactly as AgentScope code would. They keep only what the
tests touch; the behaviour follows AgentScope 1.0.21 (``memory/``, ``plan/``,
``tool/_toolkit.py``, ``agent/_react_agent.py``), not its code.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from copy import deepcopy
from datetime import datetime
from typing import Any, Literal

from statekit import StateModule

State = Literal["todo", "in_progress", "done", "abandoned"]


def _timestamp() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


class Msg:
    """A chat message, as ``agentscope.message.Msg``."""

    def __init__(
        self,
        name: str,
        content: str | list[dict[str, Any]],
        role: Literal["user", "assistant", "system"],
        metadata: dict[str, Any] | None = None,
        timestamp: str | None = None,
        invocation_id: str | None = None,
    ) -> None:
        self.name = name
        self.content = content
        self.role = role
        self.metadata = metadata or {}
        self.id = uuid.uuid4().hex[:22]
        self.timestamp = timestamp or _timestamp()
        self.invocation_id = invocation_id

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "role": self.role,
            "content": self.content,
            "metadata": self.metadata,
            "timestamp": self.timestamp,
        }

    @classmethod
    def from_dict(cls, json_data: dict[str, Any]) -> Msg:
        new_obj = cls(
            name=json_data["name"],
            content=json_data["content"],
            role=json_data["role"],
            metadata=json_data.get("metadata", None),
            timestamp=json_data.get("timestamp", None),
            invocation_id=json_data.get("invocation_id", None),
        )
        new_obj.id = json_data.get("id", new_obj.id)
        return new_obj


class MemoryBase(StateModule):
    """``agentscope.memory.MemoryBase``: a compressed summary, registered."""

    def __init__(self) -> None:
        super().__init__()
        self._compressed_summary: str = ""
        self.register_state("_compressed_summary")

    async def update_compressed_summary(self, summary: str) -> None:
        self._compressed_summary = summary


class InMemoryMemory(MemoryBase):
    """``agentscope.memory.InMemoryMemory``: (message, marks) tuples, with overrides."""

    def __init__(self) -> None:
        super().__init__()
        self.content: list[tuple[Msg, list[str]]] = []
        self.register_state("content")

    async def get_memory(
        self, mark: str | None = None, exclude_mark: str | None = None, prepend_summary: bool = True, **kwargs: Any
    ) -> list[Msg]:
        if not (mark is None or isinstance(mark, str)):
            raise TypeError(f"The mark should be a string or None, but got {type(mark)}.")
        if not (exclude_mark is None or isinstance(exclude_mark, str)):
            raise TypeError(f"The exclude_mark should be a string or None, but got {type(exclude_mark)}.")
        found = [(msg, marks) for msg, marks in self.content if mark is None or mark in marks]
        if exclude_mark is not None:
            found = [(msg, marks) for msg, marks in found if exclude_mark not in marks]
        if prepend_summary and self._compressed_summary:
            return [Msg("user", self._compressed_summary, "user"), *[msg for msg, _ in found]]
        return [msg for msg, _ in found]

    async def add(
        self,
        memories: Msg | list[Msg] | None,
        marks: str | list[str] | None = None,
        allow_duplicates: bool = False,
        **kwargs: Any,
    ) -> None:
        if memories is None:
            return
        if isinstance(memories, Msg):
            memories = [memories]
        if marks is None:
            marks = []
        elif isinstance(marks, str):
            marks = [marks]
        if not allow_duplicates:
            existing_ids = {msg.id for msg, _ in self.content}
            memories = [msg for msg in memories if msg.id not in existing_ids]
        for msg in memories:
            self.content.append((deepcopy(msg), deepcopy(marks)))

    async def delete(self, msg_ids: list[str], **kwargs: Any) -> int:
        initial_size = len(self.content)
        self.content = [(msg, marks) for msg, marks in self.content if msg.id not in msg_ids]
        return initial_size - len(self.content)

    async def delete_by_mark(self, mark: str | list[str], **kwargs: Any) -> int:
        if isinstance(mark, str):
            mark = [mark]
        initial_size = len(self.content)
        for m in mark:
            self.content = [(msg, marks) for msg, marks in self.content if m not in marks]
        return initial_size - len(self.content)

    async def clear(self) -> None:
        self.content.clear()

    async def size(self) -> int:
        return len(self.content)

    async def update_messages_mark(
        self, new_mark: str | None, old_mark: str | None = None, msg_ids: list[str] | None = None
    ) -> int:
        updated_count = 0
        for idx, (msg, marks) in enumerate(self.content):
            if msg_ids is not None and msg.id not in msg_ids:
                continue
            if old_mark is not None and old_mark not in marks:
                continue
            if new_mark is None:
                if old_mark in marks:
                    marks.remove(old_mark)
                    updated_count += 1
            else:
                if old_mark is not None and old_mark in marks:
                    marks.remove(old_mark)
                if new_mark not in marks:
                    marks.append(new_mark)
                    updated_count += 1
            self.content[idx] = (msg, marks)
        return updated_count

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "content": [[msg.to_dict(), marks] for msg, marks in self.content],
        }

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:  # type: ignore[override]
        if strict and "content" not in state_dict:
            raise KeyError("The state_dict does not contain 'content' keys required for InMemoryMemory.")
        self._compressed_summary = state_dict.get("_compressed_summary", "")
        self.content = []
        for item in state_dict.get("content", []):
            if isinstance(item, (tuple, list)) and len(item) == 2:
                msg_dict, marks = item
                self.content.append((Msg.from_dict(msg_dict), marks))
            elif isinstance(item, dict):
                self.content.append((Msg.from_dict(item), []))
            else:
                raise ValueError("Invalid item format in state_dict for InMemoryMemory.")


class ToolGroup:
    """A named group of tools that can be switched on and off."""

    def __init__(self, name: str, active: bool = False) -> None:
        self.name = name
        self.active = active


class Toolkit(StateModule):
    """``agentscope.tool.Toolkit``: only the active groups are state (overrides)."""

    def __init__(self) -> None:
        super().__init__()
        self.tools: dict[str, Any] = {}
        self.groups: dict[str, ToolGroup] = {}

    def create_tool_group(self, group_name: str, active: bool = False) -> None:
        self.groups[group_name] = ToolGroup(group_name, active)

    def state_dict(self) -> dict[str, Any]:
        return {"active_groups": [name for name, group in self.groups.items() if group.active]}

    def load_state_dict(self, state_dict: Any, strict: bool = True) -> None:  # type: ignore[override]
        if (
            not isinstance(state_dict, dict)
            or "active_groups" not in state_dict
            or not isinstance(state_dict["active_groups"], list)
        ):
            raise ValueError(
                "The state_dict for toolkit must be a dictionary with active_groups key and its value "
                f"must be a list, but got {type(state_dict)}."
            )
        if strict and list(state_dict.keys()) != ["active_groups"]:
            raise ValueError(
                f'Get additional keys in the state_dict: {list(state_dict.keys())}, but only "active_groups" '
                "is expected."
            )
        for group_name, group in self.groups.items():
            group.active = group_name in state_dict["active_groups"]


class DashScopeChatModel:
    """A model client: not state."""

    def __init__(self, model_name: str, api_key: str | None = None, **kwargs: Any) -> None:
        self.model_name = model_name
        self.api_key = api_key


class DashScopeChatFormatter:
    """A prompt formatter: not state."""


class AgentBase(StateModule):
    """``agentscope.agent.AgentBase``: subclasses set attributes and register them."""

    def __init__(self) -> None:
        super().__init__()

    async def reply(self, msg: Msg) -> Msg | None:
        raise NotImplementedError

    async def observe(self, msg: Msg) -> None:
        raise NotImplementedError


class ReActAgent(AgentBase):
    """``agentscope.agent.ReActAgent``, as far as its state goes."""

    def __init__(
        self,
        name: str,
        sys_prompt: str,
        model: DashScopeChatModel,
        formatter: DashScopeChatFormatter,
        toolkit: Toolkit | None = None,
        memory: MemoryBase | None = None,
        plan_notebook: PlanNotebook | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self._sys_prompt = sys_prompt
        self.model = model
        self.formatter = formatter
        self.memory: Any = memory or InMemoryMemory()
        self.toolkit = toolkit or Toolkit()
        self.plan_notebook = None
        if plan_notebook:
            self.plan_notebook = plan_notebook
        self.register_state("name")
        self.register_state("_sys_prompt")


class SubTask:
    """``agentscope.plan.SubTask`` (a pydantic model there)."""

    _fields = ("name", "description", "expected_outcome", "outcome", "state", "created_at", "finished_at")

    def __init__(
        self,
        name: str,
        description: str,
        expected_outcome: str,
        outcome: str | None = None,
        state: State = "todo",
        created_at: str | None = None,
        finished_at: str | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.expected_outcome = expected_outcome
        self.outcome = outcome
        self.state: State = state
        self.created_at = created_at or _timestamp()
        self.finished_at = finished_at

    def finish(self, outcome: str) -> None:
        self.state = "done"
        self.outcome = outcome
        self.finished_at = _timestamp()

    def model_dump(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._fields}

    @classmethod
    def model_validate(cls, data: dict[str, Any]) -> SubTask:
        return cls(**data)


class Plan:
    """``agentscope.plan.Plan`` (a pydantic model there)."""

    def __init__(
        self,
        name: str,
        description: str,
        expected_outcome: str,
        subtasks: list[SubTask],
        id: str | None = None,  # noqa: A002 - the model's field name
        created_at: str | None = None,
        state: State = "todo",
        finished_at: str | None = None,
        outcome: str | None = None,
    ) -> None:
        self.id = id or uuid.uuid4().hex[:22]
        self.name = name
        self.description = description
        self.expected_outcome = expected_outcome
        self.subtasks = subtasks
        self.created_at = created_at or _timestamp()
        self.state: State = state
        self.finished_at = finished_at
        self.outcome = outcome

    def refresh_plan_state(self) -> str:
        if self.state in ["done", "abandoned"]:
            return ""
        any_in_progress = any(_.state == "in_progress" for _ in self.subtasks)
        if any_in_progress and self.state == "todo":
            self.state = "in_progress"
            return "The plan state has been updated to 'in_progress'."
        if not any_in_progress and self.state == "in_progress":
            self.state = "todo"
            return "The plan state has been updated to 'todo'."
        return ""

    def finish(self, state: Literal["done", "abandoned"], outcome: str) -> None:
        self.state = state
        self.outcome = outcome
        self.finished_at = _timestamp()

    def model_dump(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "expected_outcome": self.expected_outcome,
            "subtasks": [subtask.model_dump() for subtask in self.subtasks],
            "created_at": self.created_at,
            "state": self.state,
            "finished_at": self.finished_at,
            "outcome": self.outcome,
        }

    @classmethod
    def model_validate(cls, data: dict[str, Any]) -> Plan:
        return cls(**{**data, "subtasks": [SubTask.model_validate(s) for s in data["subtasks"]]})


class ToolResponse:
    """What a tool function returns: text blocks."""

    def __init__(self, text: str) -> None:
        self.content = [{"type": "text", "text": text}]


class InMemoryPlanStorage(StateModule):
    """``agentscope.plan.InMemoryPlanStorage``: finished plans, registered with codecs."""

    def __init__(self) -> None:
        super().__init__()
        self.plans: OrderedDict[str, Plan] = OrderedDict()
        self.register_state(
            "plans",
            lambda plans: {k: v.model_dump() for k, v in plans.items()},
            lambda json_data: OrderedDict((k, Plan.model_validate(v)) for k, v in json_data.items()),
        )

    async def add_plan(self, plan: Plan, override: bool = True) -> None:
        if plan.id in self.plans and not override:
            raise ValueError(f"Plan with id {plan.id} already exists.")
        self.plans[plan.id] = plan

    async def get_plans(self) -> list[Plan]:
        return list(self.plans.values())


class PlanNotebook(StateModule):
    """``agentscope.plan.PlanNotebook``: the storage (a module) and the current plan."""

    def __init__(self, storage: InMemoryPlanStorage | None = None) -> None:
        super().__init__()
        self.storage = storage or InMemoryPlanStorage()
        self.current_plan: Plan | None = None
        self.register_state(
            "current_plan",
            custom_to_json=lambda _: _.model_dump() if _ else None,
            custom_from_json=lambda _: Plan.model_validate(_) if _ else None,
        )

    async def create_plan(self, name: str, description: str, expected_outcome: str, subtasks: list[SubTask]) -> ToolResponse:
        self.current_plan = Plan(name=name, description=description, expected_outcome=expected_outcome, subtasks=subtasks)
        return ToolResponse(f"Plan '{name}' created successfully.")

    def _plan(self) -> Plan:
        if self.current_plan is None:
            raise ValueError("The current plan is None, you need to create a plan by calling create_plan() first.")
        return self.current_plan

    async def update_subtask_state(self, subtask_idx: int, state: State) -> ToolResponse:
        plan = self._plan()
        plan.subtasks[subtask_idx].state = state
        suffix = plan.refresh_plan_state()
        return ToolResponse(
            f"Subtask at index {subtask_idx}, named '{plan.subtasks[subtask_idx].name}' "
            f"is marked as '{state}' successfully. " + suffix
        )

    async def finish_subtask(self, subtask_idx: int, subtask_outcome: str) -> ToolResponse:
        plan = self._plan()
        plan.subtasks[subtask_idx].finish(subtask_outcome)
        if subtask_idx + 1 < len(plan.subtasks):
            plan.subtasks[subtask_idx + 1].state = "in_progress"
        return ToolResponse(f"Subtask (at index {subtask_idx}) named '{plan.subtasks[subtask_idx].name}' is done.")

    async def finish_plan(self, state: Literal["done", "abandoned"], outcome: str) -> ToolResponse:
        if self.current_plan is None:
            return ToolResponse("There is no plan to finish.")
        self.current_plan.finish(state, outcome)
        await self.storage.add_plan(self.current_plan)
        self.current_plan = None
        return ToolResponse(f"The current plan is finished successfully as '{state}'.")
