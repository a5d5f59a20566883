"""Shared memory through LangGraph's Store: across steps, agents and threads."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from teamgraph import Plan, Step
from teamgraph.runtime.team import Team
from teamgraph.testing import FunctionChatModel, ToolCall

from .helpers import FAST_RETRY, task_of


def _model() -> FunctionChatModel:
    def fn(messages: list[BaseMessage]) -> Any:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if results:
            return f"tool said: {results[-1].content}"
        task = task_of(messages)
        if task.startswith("remember"):
            return ToolCall("save_note", {"text": task.removeprefix("remember ")})
        return ToolCall("search_notes", {"query": task.removeprefix("recall ")})

    return FunctionChatModel(fn=fn)


def _team(settings: Any, user: str = "ana") -> Team:
    members = [
        {"name": name, "description": f"{name} agent", "tools": ["save_note", "search_notes"]}
        for name in ("scribe", "reader")
    ]
    spec = {"name": "memo", "members": members, "retry": FAST_RETRY}
    return Team.from_dict(spec, settings=settings, model=_model(), user_id=user)


async def test_notes_are_shared_across_steps_agents_and_threads(settings: Any) -> None:
    plan = Plan(
        steps=[
            Step(id="save", worker="scribe", task="remember the launch code is orange"),
            Step(id="read", worker="reader", task="recall launch code", depends_on=["save"]),
        ]
    )
    first = await _team(settings).run("x", plan=plan, thread_id="t1")
    assert first.step("read").output == "tool said: - the launch code is orange"
    later = Plan(steps=[Step(id="again", worker="reader", task="recall orange code")])
    second = await _team(settings).run("y", plan=later, thread_id="t2")
    assert second.step("again").output == "tool said: - the launch code is orange"


async def test_notes_are_namespaced_by_user(settings: Any) -> None:
    save = Plan(steps=[Step(id="s", worker="scribe", task="remember ana's secret is blue")])
    await _team(settings, "ana").run("x", plan=save)
    look = Plan(steps=[Step(id="r", worker="reader", task="recall secret blue")])
    other = await _team(settings, "bob").run("y", plan=look)
    assert other.step("r").output == 'tool said: No notes matched "secret blue".'
