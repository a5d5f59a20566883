"""The supervisor pattern: structured decisions, handoffs in the transcript, parallel picks joined,
errors fed back, max_turns, output modes, approvals inside a member, the offline example."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from teamgraph import prompts
from teamgraph.events import BaseEvent
from teamgraph.patterns.supervisor import SupervisorDecision
from teamgraph.result import RunResult
from teamgraph.runtime.team_api import Team
from teamgraph.testing import FunctionChatModel, ScriptedChatModel, transient

from .helpers import CEILING_S, FAST_RETRY, by_type

REPO = Path(__file__).resolve().parents[1]
QUESTION = "What is the combined headcount of Acme and Globex, and of Initech and Umbrella?"
FACTS = "Acme has 100 employees, Globex 250, Initech 30 and Umbrella 70."
FINAL = "Acme and Globex employ 350 people together; Initech and Umbrella employ 100."


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def pick(*picks: tuple[str, str], reasoning: str = "") -> dict[str, Any]:
    return {
        "picks": [{"agent": a, "instructions": i} for a, i in picks],
        "finish": False,
        "answer": "",
        "reasoning": reasoning,
    }


def finish(answer: str) -> dict[str, Any]:
    return {"picks": [], "finish": True, "answer": answer, "reasoning": "answered"}


def spec(members: list[dict[str, Any]], **supervisor: Any) -> dict[str, Any]:
    return {
        "name": "t",
        "pattern": "supervisor",
        "members": members,
        "supervisor": supervisor,
        "retry": FAST_RETRY,
    }


RESEARCHER = {"name": "researcher", "description": "Finds facts such as company headcounts."}
MATH = {"name": "math", "description": "Does arithmetic with its add tool.", "tools": ["add"]}


async def run_team(
    team: Team, request: str, thread_id: str = "th", run_id: str = "run-1"
) -> tuple[RunResult, list[BaseEvent], list[BaseMessage]]:
    """Run to the end; the result, the events and the thread's transcript."""
    async with team.runner() as runner:
        events: list[BaseEvent] = [
            e async for e in runner.stream(request, run_id=run_id, thread_id=thread_id)
        ]
        result = await runner.result(run_id)
        state = await runner.graph.aget_state(runner.thread_config(thread_id))
    return result, events, list(state.values.get("messages", []))


def texts(messages: Sequence[BaseMessage]) -> list[str]:
    return [m.text for m in messages]


def handoffs(events: list[BaseEvent]) -> list[tuple[str, str, list[str]]]:
    return [(e.from_agent, e.to_agent, e.path) for e in by_type(events, "handoff")]


def supervisor_prompt_of(call: list[BaseMessage]) -> str:
    return str(call[-1].content)


def math_model() -> ScriptedChatModel:
    parallel_adds = AIMessage(
        content="",
        tool_calls=[
            {"name": "add", "args": {"a": 100, "b": 250}, "id": "add-1"},
            {"name": "add", "args": {"a": 30, "b": 70}, "id": "add-2"},
        ],
    )
    return ScriptedChatModel(responses=[parallel_adds, "100 + 250 = 350 and 30 + 70 = 100."])


def acceptance_team(settings: Any, output_mode: str = "full_history") -> tuple[Team, Any]:
    supervisor = ScriptedChatModel(
        responses=[
            pick(("researcher", "Find the headcounts of Acme, Globex, Initech and Umbrella.")),
            pick(("math", "Add 100 + 250 and 30 + 70.")),
            finish(FINAL),
        ]
    )
    models = {
        "supervisor": supervisor,
        "researcher": ScriptedChatModel(responses=[FACTS]),
        "math": math_model(),
    }
    team = Team.from_dict(
        spec([RESEARCHER, MATH], output_mode=output_mode),
        settings=settings,
        models=models,
        tools=[add],
    )
    return team, models


async def test_research_then_math_then_the_final_answer(settings: Any) -> None:
    team, models = acceptance_team(settings)
    result, events, transcript = await run_team(team, QUESTION)

    assert result.status == "completed" and result.error == ""
    assert result.output == FINAL
    said = texts(transcript)
    for expected in (
        "Successfully transferred to researcher",
        FACTS,
        "Transferring back to supervisor",
        "Successfully transferred to math",
        FINAL,
    ):
        assert expected in said
    add_results = [m.text for m in transcript if isinstance(m, ToolMessage) and m.name == "add"]
    assert add_results == ["350", "100"]
    assert said.count("Transferring back to supervisor") == 2
    # the order of the whole conversation
    order = [
        i
        for i, m in enumerate(transcript)
        if m.text
        in (QUESTION, "Successfully transferred to researcher", FACTS, "Successfully transferred "
            "to math", "350", "100", FINAL)
    ]  # fmt: skip
    assert order == sorted(order) and len(order) == 7
    assert isinstance(transcript[0], HumanMessage) and transcript[0].text == QUESTION
    assert isinstance(transcript[-1], AIMessage) and transcript[-1].name == "supervisor"
    transfer = transcript[1]
    assert isinstance(transfer, AIMessage)
    assert [c["name"] for c in transfer.tool_calls] == ["transfer_to_researcher"]
    assert {m.name for m in transcript if isinstance(m, AIMessage) and m.text == FACTS} == {
        "researcher"
    }

    assert handoffs(events) == [
        ("supervisor", "researcher", ["t", "researcher"]),
        ("researcher", "supervisor", ["t", "researcher"]),
        ("supervisor", "math", ["t", "math"]),
        ("math", "supervisor", ["t", "math"]),
    ]
    adds = by_type(events, "tool_called")
    assert [(e.tool, e.args, e.step_id) for e in adds] == [
        ("add", {"a": 100, "b": 250}, "math-2"),
        ("add", {"a": 30, "b": 70}, "math-2"),
    ]
    # the math agent worked from the transcript; each decision saw everything before it
    assert FACTS in texts(models["math"].calls[0])
    decisions = models["supervisor"].calls
    assert len(decisions) == 3
    assert decisions[0][0].text.startswith(prompts.SUPERVISOR_HEADER)
    assert "- researcher: Finds facts" in decisions[0][0].text
    assert FACTS in supervisor_prompt_of(decisions[1])
    last_prompt = supervisor_prompt_of(decisions[2])
    assert "350" in last_prompt and "100" in last_prompt
    assert "supervisor" in result.usage_by_agent


async def test_the_decision_is_structured_output_of_the_bound_schema(settings: Any) -> None:
    team, models = acceptance_team(settings)
    await run_team(team, QUESTION)
    schema = SupervisorDecision.model_json_schema()
    assert set(schema["properties"]) == {"picks", "finish", "answer", "reasoning"}
    assert len(models["supervisor"].calls) == 3  # one call per decision, no free-text replies


async def test_parallel_picks_run_concurrently_and_join(settings: Any) -> None:
    # both workers must be running at once (run one after the other, the first would wait
    # for the second until the ceiling and fail), and beta finishes first
    started = {"alpha": asyncio.Event(), "beta": asyncio.Event()}
    beta_done = asyncio.Event()

    def worker(name: str, waits_for: list[asyncio.Event]) -> FunctionChatModel:
        async def fn(messages: list[BaseMessage]) -> str:
            started[name].set()
            async with asyncio.timeout(CEILING_S):
                for event in waits_for:
                    await event.wait()
            if name == "beta":
                beta_done.set()
            return f"{name} found {name}-facts"

        return FunctionChatModel(fn=fn)

    supervisor = ScriptedChatModel(
        responses=[
            pick(("alpha", "look into A"), ("beta", "look into B"), reasoning="independent work"),
            finish("A and B are both done."),
        ]
    )
    members = [
        {"name": "alpha", "description": "knows A"},
        {"name": "beta", "description": "knows B"},
    ]
    alpha = worker("alpha", [started["beta"], beta_done])
    models = {"supervisor": supervisor, "alpha": alpha, "beta": worker("beta", [started["alpha"]])}
    team = Team.from_dict(spec(members), settings=settings, models=models)
    result, events, transcript = await run_team(team, "Do A and B.")

    assert result.status == "completed" and result.output == "A and B are both done."
    assert len(supervisor.calls) == 2  # one decision after both finished: the join
    joined = supervisor_prompt_of(supervisor.calls[1])
    assert "alpha found alpha-facts" in joined and "beta found beta-facts" in joined
    transfer = transcript[1]
    assert isinstance(transfer, AIMessage)
    assert [c["name"] for c in transfer.tool_calls] == ["transfer_to_alpha", "transfer_to_beta"]
    said = texts(transcript)
    # answers join the transcript in pick order, though beta finished first
    assert said.index("alpha found alpha-facts") < said.index("beta found beta-facts")
    assert said.count("Transferring back to supervisor") == 2
    assert [(f, t) for f, t, _ in handoffs(events)][:2] == [
        ("supervisor", "alpha"),
        ("supervisor", "beta"),
    ]


async def test_max_turns_stops_a_run_that_does_not_converge(settings: Any) -> None:
    supervisor = FunctionChatModel(fn=lambda messages: pick(("researcher", "once more")))
    answers = iter(f"finding {i}" for i in range(1, 10))
    researcher = FunctionChatModel(fn=lambda messages: next(answers))
    team = Team.from_dict(
        spec([RESEARCHER], max_turns=2),
        settings=settings,
        models={"supervisor": supervisor, "researcher": researcher},
    )
    result, events, transcript = await run_team(team, "Never enough.")

    assert result.status == "failed"
    assert result.error == "supervisor did not finish within max_turns=2"
    assert result.output == "finding 2"  # the last member answer
    assert len(supervisor.calls) == 2
    assert texts(transcript).count("Successfully transferred to researcher") == 2  # kept
    assert by_type(events, "run_completed")[0].status == "failed"


async def test_a_failing_member_is_reported_and_the_run_goes_on(settings: Any) -> None:
    def broken(messages: list[BaseMessage]) -> str:
        raise ValueError("the archive is offline")

    supervisor = ScriptedChatModel(
        responses=[pick(("researcher", "find it")), finish("Sorry: the research failed.")]
    )
    models = {"supervisor": supervisor, "researcher": FunctionChatModel(fn=broken)}
    team = Team.from_dict(spec([RESEARCHER]), settings=settings, models=models)
    result, events, transcript = await run_team(team, "Find it.")

    report = "The researcher specialist encountered an error: ValueError: the archive is offline"
    assert report in texts(transcript)
    assert report in supervisor_prompt_of(supervisor.calls[1])
    assert result.status == "completed" and result.output == "Sorry: the research failed."
    back = [e for e in by_type(events, "handoff") if e.to_agent == "supervisor"]
    assert back[0].reason == "ValueError: the archive is offline"


async def test_an_unknown_member_is_fed_back_not_a_crash(settings: Any) -> None:
    supervisor = ScriptedChatModel(
        responses=[pick(("oracle", "predict")), pick(("researcher", "find it")), finish("done")]
    )
    models = {"supervisor": supervisor, "researcher": ScriptedChatModel(responses=["found"])}
    team = Team.from_dict(spec([RESEARCHER, MATH]), settings=settings, models=models, tools=[add])
    result, events, transcript = await run_team(team, "Find it.")

    assert result.status == "completed" and result.output == "done"
    feedback = supervisor_prompt_of(supervisor.calls[1])
    assert "no member named 'oracle'" in feedback and "Valid members: researcher, math" in feedback
    errors = [m for m in transcript if isinstance(m, ToolMessage) and m.status == "error"]
    assert len(errors) == 1 and "oracle" in errors[0].text
    assert [(f, t) for f, t, _ in handoffs(events)] == [
        ("supervisor", "researcher"),
        ("researcher", "supervisor"),
    ]


@pytest.mark.parametrize("mode", ["last_message", "full_history"])
async def test_output_mode_decides_what_a_member_adds(settings: Any, mode: str) -> None:
    team, _ = acceptance_team(settings, output_mode=mode)
    result, _, transcript = await run_team(team, QUESTION)
    assert result.status == "completed"
    by_math = [m for m in transcript if isinstance(m, AIMessage) and m.name == "math"]
    add_results = [m for m in transcript if isinstance(m, ToolMessage) and m.name == "add"]
    answer = "100 + 250 = 350 and 30 + 70 = 100."
    if mode == "last_message":
        assert add_results == []
        assert texts(by_math) == [answer, "Transferring back to supervisor"]
    else:
        assert [m.text for m in add_results] == ["350", "100"]
        calls = [c["name"] for m in by_math for c in m.tool_calls]
        assert calls == ["add", "add", "transfer_back_to_supervisor"]
        assert texts(by_math)[-2:] == [answer, "Transferring back to supervisor"]
        task = [m for m in transcript if isinstance(m, HumanMessage) and m.name == "supervisor"]
        assert texts(task) == [
            "Find the headcounts of Acme, Globex, Initech and Umbrella.",
            "Add 100 + 250 and 30 + 70.",
        ]
    assert len({m.id for m in transcript}) == len(transcript)  # nothing replaced another


async def test_a_second_run_on_the_thread_continues_the_transcript(settings: Any) -> None:
    supervisor = ScriptedChatModel(
        responses=[
            pick(("researcher", "find A")),
            finish("A"),
            pick(("researcher", "find B")),
            finish("B"),
        ]
    )
    researcher = ScriptedChatModel(responses=["fact A", "fact B"])
    models = {"supervisor": supervisor, "researcher": researcher}
    team = Team.from_dict(spec([RESEARCHER], max_turns=2), settings=settings, models=models)
    first, _, _ = await run_team(team, "First?", run_id="run-1")
    second, _, transcript = await run_team(team, "Second?", run_id="run-2")

    assert (first.status, first.output) == ("completed", "A")
    assert (second.status, second.output) == ("completed", "B")  # turns count per run
    assert "fact A" in supervisor_prompt_of(supervisor.calls[2])
    assert "fact A" in texts(researcher.calls[1])
    assert [m.text for m in transcript if isinstance(m, HumanMessage) and not m.name] == [
        "First?",
        "Second?",
    ]


@tool
def delete_record(record_id: str) -> str:
    """Delete a record."""
    return f"deleted {record_id}"


async def test_a_sensitive_call_in_a_member_pauses_and_resumes(settings: Any) -> None:
    def clerk(messages: list[BaseMessage]) -> Any:
        if any(isinstance(m, ToolMessage) and m.name == "delete_record" for m in messages):
            return f"clerk: {messages[-1].text}"
        call = {"name": "delete_record", "args": {"record_id": "7"}, "id": "del-7"}
        return AIMessage(content="", tool_calls=[call])

    supervisor = ScriptedChatModel(responses=[pick(("clerk", "delete record 7")), finish("ok")])
    members = [{"name": "clerk", "description": "keeps records", "tools": ["delete_record"]}]
    models = {"supervisor": supervisor, "clerk": FunctionChatModel(fn=clerk)}
    team = Team.from_dict(spec(members), settings=settings, models=models, tools=[delete_record])
    async with team.runner() as runner:
        events: list[BaseEvent] = [
            e async for e in runner.stream("Delete 7.", run_id="r", thread_id="th")
        ]
        assert by_type(events, "approval_requested")[0].tool == "delete_record"
        assert (await runner.backend.runs.get("r")).status == "interrupted"
        async for _ in runner.resume_stream("r", default={"action": "approve"}):
            pass
        result = await runner.result("r")
        state = await runner.graph.aget_state(runner.thread_config("th"))
    assert result.status == "completed" and result.output == "ok"
    assert "clerk: deleted 7" in texts(state.values["messages"])
    assert len(supervisor.calls) == 2  # the first decision was not made again


async def test_the_offline_example_team_runs_end_to_end(settings: Any) -> None:
    team = Team.from_yaml(REPO / "examples" / "teams" / "supervisor.yaml", settings=settings)
    result, events, transcript = await run_team(team, "How does Redis persist data to disk?")

    assert result.status == "completed", result.error
    assert "Redis" in result.output and "persist" in result.output.lower()
    assert [(f, t) for f, t, _ in handoffs(events)] == [
        ("supervisor", "researcher"),
        ("researcher", "supervisor"),
    ]
    assert [e.tool for e in by_type(events, "tool_called")] == ["search_docs"]
    assert texts(transcript)[-1] == result.output


async def test_transient_errors_retry_and_an_invalid_decision_is_asked_again(
    settings: Any,
) -> None:
    invalid = {"picks": [{"agent": "researcher"}], "finish": False}  # no instructions
    supervisor = ScriptedChatModel(
        responses=[transient(), invalid, pick(("researcher", "find it")), finish("done")]
    )
    models = {"supervisor": supervisor, "researcher": ScriptedChatModel(responses=["found"])}
    team = Team.from_dict(spec([RESEARCHER]), settings=settings, models=models)
    result, _, _ = await run_team(team, "Find it.")

    assert result.status == "completed" and result.output == "done"
    retry = supervisor.calls[2][-1].text
    assert retry.startswith("Your structured output was invalid") and "instructions" in retry


async def test_a_nested_team_can_be_a_member(settings: Any) -> None:
    desk = {
        "name": "desk",
        "pattern": "single",
        "members": [{"name": "clerk", "description": "Answers questions about records."}],
    }
    supervisor = ScriptedChatModel(responses=[pick(("desk", "look up record 7")), finish("")])
    models = {"supervisor": supervisor, "clerk": ScriptedChatModel(responses=["record 7 is ok"])}
    team = Team.from_dict(spec([desk, RESEARCHER]), settings=settings, models=models)
    result, events, _ = await run_team(team, "How is record 7?")

    assert "- desk: a team of clerk" in supervisor.calls[0][0].text
    assert result.status == "completed"
    assert result.output == "record 7 is ok"  # an empty answer falls back to the last report
    assert "record 7 is ok" in supervisor_prompt_of(supervisor.calls[1])
    assert ["t", "desk", "clerk"] in [e.path for e in by_type(events, "agent_message")]
