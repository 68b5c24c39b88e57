# -*- coding: utf-8 -*-
"""The plan module related tests.

Ported from AgentScope 1.0.21's tests/plan_test.py: the serialization test,
with only the imports changed (the agent, model, formatter and plan classes
are the stand-ins of agentscope_like.py). The other tests of that file check
the planning logic itself (hints, revisions, hooks), not state.
"""
import os
from unittest import IsolatedAsyncioTestCase

from agentscope_like import ReActAgent
from agentscope_like import DashScopeChatFormatter
from agentscope_like import DashScopeChatModel
from agentscope_like import SubTask, Plan, PlanNotebook


class PlanTest(IsolatedAsyncioTestCase):
    """Test the plan module."""

    async def asyncSetUp(self) -> None:
        """Set up the test case."""
        self.subtask1 = SubTask(
            name="Task 1",
            description="Description 1",
            expected_outcome="Expected outcome 1",
            state="done",
        )

        self.subtask2 = SubTask(
            name="Task 2",
            description="Description 2",
            expected_outcome="Expected outcome 2",
            state="in_progress",
        )

        self.subtask3 = SubTask(
            name="Task 3",
            description="Description 3",
            expected_outcome="Expected outcome 3",
            state="todo",
        )

        self.plan = Plan(
            name="Create website",
            description="Create a personal portfolio website.",
            expected_outcome="A new personal portfolio website is created on "
            "GitHub.",
            subtasks=[self.subtask1, self.subtask2, self.subtask3],
        )

    async def test_serialization(self) -> None:
        """Test the serialization and deserialization of plan and subtask."""
        plan_notebook = PlanNotebook()
        agent = ReActAgent(
            name="Friday",
            sys_prompt="You are a helpful assistant named Friday. ",
            model=DashScopeChatModel(
                model_name="qwen-max",
                api_key=os.environ.get("DASH_API_KEY"),
            ),
            formatter=DashScopeChatFormatter(),
            plan_notebook=plan_notebook,
        )

        await plan_notebook.create_plan(
            name="text",
            description="abc",
            expected_outcome="edf",
            subtasks=[
                SubTask(
                    name="1",
                    description="1",
                    expected_outcome="1",
                ),
                SubTask(
                    name="2",
                    description="2",
                    expected_outcome="2",
                ),
            ],
        )

        self.assertIsNotNone(plan_notebook.current_plan)

        # Check the exported state
        state = agent.state_dict()
        subtasks = plan_notebook.current_plan.subtasks

        self.assertDictEqual(
            state,
            {
                "memory": {"_compressed_summary": "", "content": []},
                "toolkit": {"active_groups": []},
                "plan_notebook": {
                    "storage": {
                        "plans": {},
                    },
                    "current_plan": {
                        "id": plan_notebook.current_plan.id,
                        "name": "text",
                        "description": "abc",
                        "expected_outcome": "edf",
                        "subtasks": [
                            {
                                "name": "1",
                                "description": "1",
                                "expected_outcome": "1",
                                "outcome": None,
                                "state": "todo",
                                "created_at": subtasks[0].created_at,
                                "finished_at": None,
                            },
                            {
                                "name": "2",
                                "description": "2",
                                "expected_outcome": "2",
                                "outcome": None,
                                "state": "todo",
                                "created_at": subtasks[1].created_at,
                                "finished_at": None,
                            },
                        ],
                        "created_at": plan_notebook.current_plan.created_at,
                        "state": "todo",
                        "finished_at": None,
                        "outcome": None,
                    },
                },
                "name": "Friday",
                "_sys_prompt": "You are a helpful assistant named Friday. ",
            },
        )

        # Test finish the plan serialization
        res = await plan_notebook.update_subtask_state(
            0,
            "in_progress",
        )
        self.assertEqual(
            res.content[0]["text"],
            "Subtask at index 0, named '1' is marked as 'in_progress' "
            "successfully. The plan state has been updated to 'in_progress'.",
        )

        self.assertEqual(
            plan_notebook.state_dict(),
            {
                "storage": {
                    "plans": {},
                },
                "current_plan": {
                    "id": plan_notebook.current_plan.id,
                    "name": "text",
                    "description": "abc",
                    "expected_outcome": "edf",
                    "subtasks": [
                        {
                            "name": "1",
                            "description": "1",
                            "expected_outcome": "1",
                            "state": "in_progress",
                            "created_at": subtasks[0].created_at,
                            "outcome": None,
                            "finished_at": None,
                        },
                        {
                            "name": "2",
                            "description": "2",
                            "expected_outcome": "2",
                            "state": "todo",
                            "created_at": subtasks[1].created_at,
                            "outcome": None,
                            "finished_at": None,
                        },
                    ],
                    "state": "in_progress",
                    "created_at": plan_notebook.current_plan.created_at,
                    "finished_at": None,
                    "outcome": None,
                },
            },
        )

        # When finish a subtask
        await plan_notebook.finish_subtask(
            0,
            subtask_outcome="abc",
        )
        self.assertDictEqual(
            plan_notebook.state_dict(),
            {
                "storage": {
                    "plans": {},
                },
                "current_plan": {
                    "id": plan_notebook.current_plan.id,
                    "name": "text",
                    "description": "abc",
                    "expected_outcome": "edf",
                    "created_at": plan_notebook.current_plan.created_at,
                    "subtasks": [
                        {
                            "name": "1",
                            "description": "1",
                            "expected_outcome": "1",
                            "state": "done",
                            "created_at": subtasks[0].created_at,
                            "finished_at": plan_notebook.current_plan.subtasks[
                                0
                            ].finished_at,
                            "outcome": "abc",
                        },
                        {
                            "name": "2",
                            "description": "2",
                            "expected_outcome": "2",
                            "state": "in_progress",
                            "created_at": subtasks[1].created_at,
                            "finished_at": None,
                            "outcome": None,
                        },
                    ],
                    "finished_at": None,
                    "outcome": None,
                    "state": "in_progress",
                },
            },
        )

        # Test deserialization
        await plan_notebook.finish_subtask(1, "def")
        self.assertDictEqual(
            plan_notebook.state_dict(),
            {
                "storage": {
                    "plans": {},
                },
                "current_plan": {
                    "id": plan_notebook.current_plan.id,
                    "name": "text",
                    "description": "abc",
                    "expected_outcome": "edf",
                    "created_at": plan_notebook.current_plan.created_at,
                    "subtasks": [
                        {
                            "name": "1",
                            "description": "1",
                            "expected_outcome": "1",
                            "state": "done",
                            "created_at": subtasks[0].created_at,
                            "finished_at": plan_notebook.current_plan.subtasks[
                                0
                            ].finished_at,
                            "outcome": "abc",
                        },
                        {
                            "name": "2",
                            "description": "2",
                            "expected_outcome": "2",
                            "state": "done",
                            "created_at": subtasks[1].created_at,
                            "finished_at": plan_notebook.current_plan.subtasks[
                                1
                            ].finished_at,
                            "outcome": "def",
                        },
                    ],
                    "finished_at": None,
                    "outcome": None,
                    "state": "in_progress",
                },
            },
        )

        # Finish the plan
        await plan_notebook.finish_plan("done", "Overall outcome")
        self.assertIsNone(
            plan_notebook.current_plan,
        )

        # Check the finished plan
        plan = (await plan_notebook.storage.get_plans())[0]

        self.assertDictEqual(
            plan_notebook.state_dict(),
            {
                "storage": {
                    "plans": {
                        plan.id: {
                            "id": plan.id,
                            "name": "text",
                            "description": "abc",
                            "expected_outcome": "edf",
                            "subtasks": [
                                {
                                    "name": "1",
                                    "description": "1",
                                    "expected_outcome": "1",
                                    "outcome": "abc",
                                    "state": "done",
                                    "created_at": plan.subtasks[0].created_at,
                                    "finished_at": plan.subtasks[
                                        0
                                    ].finished_at,
                                },
                                {
                                    "name": "2",
                                    "description": "2",
                                    "expected_outcome": "2",
                                    "outcome": "def",
                                    "state": "done",
                                    "created_at": plan.subtasks[1].created_at,
                                    "finished_at": plan.subtasks[
                                        1
                                    ].finished_at,
                                },
                            ],
                            "created_at": plan.created_at,
                            "state": "done",
                            "finished_at": plan.finished_at,
                            "outcome": "Overall outcome",
                        },
                    },
                },
                "current_plan": None,
            },
        )

        # Load the state
        new_plan_notebook = PlanNotebook()
        new_plan_notebook.load_state_dict(
            plan_notebook.state_dict(),
        )
        self.assertDictEqual(
            new_plan_notebook.state_dict(),
            {
                "storage": {
                    "plans": {
                        plan.id: {
                            "id": plan.id,
                            "name": "text",
                            "description": "abc",
                            "expected_outcome": "edf",
                            "subtasks": [
                                {
                                    "name": "1",
                                    "description": "1",
                                    "expected_outcome": "1",
                                    "outcome": "abc",
                                    "state": "done",
                                    "created_at": plan.subtasks[0].created_at,
                                    "finished_at": plan.subtasks[
                                        0
                                    ].finished_at,
                                },
                                {
                                    "name": "2",
                                    "description": "2",
                                    "expected_outcome": "2",
                                    "outcome": "def",
                                    "state": "done",
                                    "created_at": plan.subtasks[1].created_at,
                                    "finished_at": plan.subtasks[
                                        1
                                    ].finished_at,
                                },
                            ],
                            "created_at": plan.created_at,
                            "state": "done",
                            "finished_at": plan.finished_at,
                            "outcome": "Overall outcome",
                        },
                    },
                },
                "current_plan": None,
            },
        )

        plan_notebook.current_plan = None
        self.assertIsNone(
            agent.plan_notebook.current_plan,
        )
        agent.load_state_dict(state)
        self.assertIsNotNone(
            agent.plan_notebook.current_plan,
        )
