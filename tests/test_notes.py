"""Shared memory through LangGraph's Store: across steps, agents and threads."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from teamgraph import Plan, Step
from teamgraph.testing import FunctionChatModel, ToolCall

from .helpers import make_team, member, task_of


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


NOTE_TOOLS = ["save_note", "search_notes"]
MEMO = [member(name, f"{name} agent", tools=NOTE_TOOLS) for name in ("scribe", "reader")]


async def test_notes_are_shared_across_steps_agents_and_threads(settings: Any) -> None:
    plan = Plan(
        steps=[
            Step(id="save", worker="scribe", task="remember the launch code is orange"),
            Step(id="read", worker="reader", task="recall launch code", depends_on=["save"]),
        ]
    )
    ana = make_team(settings, *MEMO, name="memo", model=_model(), user_id="ana")
    first = await ana.run("x", plan=plan, thread_id="t1")
    assert first.step("read").output == "tool said: - the launch code is orange"
    later = Plan(steps=[Step(id="again", worker="reader", task="recall orange code")])
    ana_again = make_team(settings, *MEMO, name="memo", model=_model(), user_id="ana")
    second = await ana_again.run("y", plan=later, thread_id="t2")
    assert second.step("again").output == "tool said: - the launch code is orange"


async def test_notes_are_namespaced_by_user(settings: Any) -> None:
    save = Plan(steps=[Step(id="s", worker="scribe", task="remember ana's secret is blue")])
    await make_team(settings, *MEMO, name="memo", model=_model(), user_id="ana").run("x", plan=save)
    look = Plan(steps=[Step(id="r", worker="reader", task="recall secret blue")])
    bob = make_team(settings, *MEMO, name="memo", model=_model(), user_id="bob")
    other = await bob.run("y", plan=look)
    assert other.step("r").output == 'tool said: No notes matched "secret blue".'
