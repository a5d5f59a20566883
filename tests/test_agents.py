"""Agent kinds end to end with scripted models: tool calls, limits, parsing, structured output,
shared state, failing and sensitive tools."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolArg, tool
from pydantic import BaseModel

from teamgraph import Plan, Step
from teamgraph.agents.base import EMPTY_REPLY_NOTICE
from teamgraph.agents.react import Action, ParseError, parse_react
from teamgraph.testing import FunctionChatModel, ScriptedChatModel, ToolCall

from .helpers import CEILING_S, by_type, make_team, member, run_collect

calls: list[str] = []
together: dict[str, asyncio.Barrier] = {}  # the echoes that must be running at the same time
KNOWLEDGE = str(Path(__file__).resolve().parents[1] / "examples" / "knowledge")


@tool
async def echo(text: str) -> str:
    """Echo the text back, once every echo asked for at the same time is running."""
    async with asyncio.timeout(CEILING_S):
        await together["echoes"].wait()
    calls.append(text)
    return f"echo:{text}"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom because {reason}")


@tool
def delete_record(record_id: str) -> str:
    """Delete a record."""
    calls.append(f"deleted {record_id}")
    return "deleted"


@tool
def remember(key: str, value: str, state: Annotated[dict[str, Any], InjectedToolArg]) -> str:
    """Remember a value in the team's shared state."""
    state[key] = value
    return f"remembered {key}"


TOOLS = [echo, add, explode, delete_record, remember]


WORKER = member("worker", "does the work", kind="function", tools=[t.name for t in TOOLS])


def _one_step(task: str = "do it") -> Plan:
    return Plan(steps=[Step(id="s", worker="worker", task=task)])


async def test_function_agent_calls_a_tool_then_answers(settings: Any) -> None:
    model = ScriptedChatModel(responses=[ToolCall("add", {"a": 2, "b": 3}), "The sum is 5."])
    result, events = await run_collect(
        make_team(settings, WORKER, model=model, tools=TOOLS), "x", plan=_one_step()
    )
    assert result.step("s").output == "The sum is 5."
    tool_message = model.calls[1][-1]
    assert isinstance(tool_message, ToolMessage) and tool_message.content == "5"
    assert [e.tool for e in by_type(events, "tool_returned")] == ["add"]


async def test_parallel_tool_calls_run_concurrently_and_return_in_call_order(
    settings: Any,
) -> None:
    calls.clear()
    together["echoes"] = asyncio.Barrier(3)  # run one after another, the first would never end
    many = AIMessage(
        content="",
        tool_calls=[{"name": "echo", "args": {"text": t}, "id": f"c{t}"} for t in ("a", "b", "c")],
    )
    model = ScriptedChatModel(responses=[many, "done"])
    await run_collect(make_team(settings, WORKER, model=model, tools=TOOLS), "x", plan=_one_step())
    results = [m for m in model.calls[1] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == ["ca", "cb", "cc"]
    assert [m.content for m in results] == ["echo:a", "echo:b", "echo:c"]


async def test_max_iterations_error_names_the_agent_and_limit(settings: Any) -> None:
    model = FunctionChatModel(
        fn=lambda m: AIMessage(
            content="", tool_calls=[{"name": "add", "args": {"a": 1, "b": 1}, "id": f"c{len(m)}"}]
        )
    )
    team = make_team(settings, WORKER | {"max_iterations": 3}, model=model, tools=TOOLS)
    result, _ = await run_collect(team, "x", plan=_one_step())
    assert result.step("s").status == "failed"
    assert "agent 'worker' reached max_iterations=3" in result.step("s").error


async def test_max_iterations_generate_answers_without_tools(settings: Any) -> None:
    def fn(messages: list[BaseMessage]) -> Any:
        if "limit of steps" in str(messages[-1].content):
            assert not any(isinstance(m, ToolMessage) for m in messages)
            assert not any(isinstance(m, AIMessage) and m.tool_calls for m in messages)
            return "Best effort: 2"
        return AIMessage(
            content="",
            tool_calls=[{"name": "add", "args": {"a": 1, "b": 1}, "id": f"c{len(messages)}"}],
        )

    worker = WORKER | {"max_iterations": 2, "on_max_iterations": "generate"}
    team = make_team(settings, worker, model=FunctionChatModel(fn=fn), tools=TOOLS)
    result, _ = await run_collect(team, "x", plan=_one_step())
    assert result.step("s").output == "Best effort: 2"


async def test_an_empty_reply_is_fed_back_once(settings: Any) -> None:
    model = ScriptedChatModel(responses=["", "Now an answer."])
    result, _ = await run_collect(
        make_team(settings, WORKER, model=model, tools=TOOLS), "x", plan=_one_step()
    )
    assert result.step("s").output == "Now an answer."
    assert model.calls[1][-1].content == EMPTY_REPLY_NOTICE
    twice = ScriptedChatModel(responses=["", ""])
    result, _ = await run_collect(
        make_team(settings, WORKER, model=twice, tools=TOOLS), "x", plan=_one_step(), run_id="r2"
    )
    assert "empty reply twice" in result.step("s").error


async def test_unknown_and_raising_tools_become_error_results(settings: Any) -> None:
    model = ScriptedChatModel(
        responses=[
            AIMessage(
                content="",
                tool_calls=[
                    {"name": "teleport", "args": {}, "id": "u"},
                    {"name": "explode", "args": {"reason": "test"}, "id": "e"},
                ],
            ),
            "I could not do it.",
        ]
    )
    result, _ = await run_collect(
        make_team(settings, WORKER, model=model, tools=TOOLS), "x", plan=_one_step()
    )
    unknown, raised = [m for m in model.calls[1] if isinstance(m, ToolMessage)]
    assert unknown.status == "error" and unknown.content.startswith("Tool teleport not found.")
    assert "Available: add, delete_record, echo, explode, remember" in unknown.content
    assert raised.status == "error" and "boom because test" in raised.content
    assert result.step("s").status == "done"


def test_react_parser() -> None:
    text = 'Thought: add them\nAction: add\nAction Input: {"a": 2, "b": 3}'
    assert parse_react(text, {}) == Action("add", {"a": 2, "b": 3})
    assert parse_react("Thought: done\nFinal Answer: 5", {}) == "5"
    assert parse_react("Action: search\nAction Input: cats", {"search": "query"}) == Action(
        "search", {"query": "cats"}
    )
    with pytest.raises(ParseError, match="no 'Action:'"):
        parse_react("I think the answer is 5", {})
    with pytest.raises(ParseError, match="not a JSON object"):
        parse_react("Action: add\nAction Input: two and three", {})


async def test_react_agent_recovers_from_a_parse_error(settings: Any) -> None:
    model = ScriptedChatModel(
        responses=[
            "I would like to add numbers",
            'Thought: use add\nAction: add\nAction Input: {"a": 2, "b": 40}',
            "Thought: I know the answer.\nFinal Answer: 42",
        ]
    )
    result, _ = await run_collect(
        make_team(settings, WORKER | {"kind": "react"}, model=model, tools=TOOLS),
        "x",
        plan=_one_step(),
    )
    assert result.step("s").output == "42"
    assert str(model.calls[1][-1].content).startswith("Error while parsing the output:")
    assert model.calls[2][-1].content == "Observation: 42"


class Verdict(BaseModel):
    approved: bool
    score: int


async def test_structured_output_retries_once_then_validates(settings: Any) -> None:
    model = ScriptedChatModel(
        responses=[
            "It looks fine.",
            {"approved": "maybe", "score": 3},
            {"approved": True, "score": 9},
        ]
    )
    team = make_team(settings, WORKER | {"output_schema": Verdict}, model=model, tools=TOOLS)
    result, _ = await run_collect(team, "x", plan=_one_step())
    assert result.step("s").output == '{"approved": true, "score": 9}'
    retry = str(model.calls[2][-1].content)
    assert retry.startswith("Your structured output was invalid") and "approved" in retry


async def test_structured_output_json_schema_fails_clearly_after_one_retry(settings: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"score": {"type": "integer", "maximum": 10}},
        "required": ["score"],
    }
    model = ScriptedChatModel(responses=["Done.", {"score": 11}, {"score": 12}])
    result, _ = await run_collect(
        make_team(settings, WORKER | {"output_schema": schema}, model=model, tools=TOOLS),
        "x",
        plan=_one_step(),
    )
    error = result.step("s").error
    assert "invalid structured output twice" in error and "score" in error


async def test_state_prompt_applied_once_and_tool_updates_persist(settings: Any) -> None:
    seen: list[list[BaseMessage]] = []

    def fn(messages: list[BaseMessage]) -> Any:
        seen.append(messages)
        task = str(next(m for m in messages if isinstance(m, HumanMessage)).content)
        if "remember" in task and not any(isinstance(m, ToolMessage) for m in messages):
            return ToolCall("remember", {"key": "city", "value": "Lyon"})
        return "noted"

    team = make_team(
        settings,
        WORKER,
        initial_state={"city": None},
        state_prompt="STATE={state}\nTASK={msg}",
        model=FunctionChatModel(fn=fn),
        tools=TOOLS,
    )
    plan = Plan(
        steps=[
            Step(id="a", worker="worker", task="remember the city"),
            Step(id="b", worker="worker", task="use it", depends_on=["a"]),
        ]
    )
    await run_collect(team, "x", plan=plan, thread_id="T", run_id="r1")
    first_step = seen[0]
    humans = [m for m in first_step if isinstance(m, HumanMessage)]
    assert len(humans) == 1 and humans[0].content.count("STATE=") == 1
    assert '"city": null' in humans[0].content
    step_b = next(s for s in seen if "use it" in str(s[1].content))
    assert '"city": "Lyon"' in str(step_b[1].content)  # updated by a tool in step a
    seen.clear()
    await run_collect(
        team,
        "again",
        plan=Plan(steps=[Step(id="c", worker="worker", task="next turn")]),
        thread_id="T",
        run_id="r2",
    )
    assert '"city": "Lyon"' in str(seen[0][1].content)  # and in the next turn of the thread


async def test_offline_react_agent_searches_the_knowledge_base(settings: Any) -> None:
    team = make_team(settings, {"name": "researcher", "kind": "react"}, knowledge=[KNOWLEDGE])
    plan = Plan(steps=[Step(id="s", worker="researcher", task="Research MongoDB security")])
    result, events = await run_collect(team, "x", plan=plan)
    assert [e.tool for e in by_type(events, "tool_called")] == ["search_docs"]
    output = result.step("s").output
    assert output.startswith("_Offline model") and "mongodb.md" in output


async def test_codeact_agent_runs_code_with_tools_in_the_sandbox(settings: Any) -> None:
    code = "```python\nx = add(a=20, b=22)\nprint('sum is', x)\nx * 2\n```"
    model = ScriptedChatModel(responses=[code, "The sum is 42."])
    result, events = await run_collect(
        make_team(settings, WORKER | {"kind": "codeact"}, model=model, tools=TOOLS),
        "x",
        plan=_one_step("add 20 and 22"),
    )
    assert result.step("s").output == "The sum is 42."
    feedback = str(model.calls[1][-1].content)
    assert feedback.startswith("Execution result:")
    assert "sum is 42" in feedback and "84" in feedback  # stdout and the last expression
    tools = [(e.tool, e.is_error) for e in by_type(events, "tool_returned")]
    assert tools == [("add", False), ("python", False)]


async def test_codeact_errors_go_back_to_the_model(settings: Any) -> None:
    model = ScriptedChatModel(responses=["```python\n1/0\n```", "Cannot divide by zero."])
    await run_collect(
        make_team(settings, WORKER | {"kind": "codeact"}, model=model, tools=TOOLS),
        "x",
        plan=_one_step(),
    )
    assert "ZeroDivisionError" in str(model.calls[1][-1].content)


async def test_offline_codeact_computes_arithmetic(settings: Any) -> None:
    team = make_team(settings, member("calc", "computes", kind="codeact"))
    plan = Plan(steps=[Step(id="s", worker="calc", task="What is 12 * (3 + 4)?")])
    result, _ = await run_collect(team, "x", plan=plan)
    assert "84" in result.step("s").output
