"""The single pattern: one agent, a multi-turn conversation kept per thread, streamed tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately

from teamgraph.events import BaseEvent
from teamgraph.patterns._members import trimmed_history
from teamgraph.result import RunResult
from teamgraph.runtime.team_api import Team
from teamgraph.testing import FunctionChatModel, ScriptedChatModel

from .helpers import by_type

REPO = Path(__file__).resolve().parents[1]
HISTORY_TOKEN_BUDGET = 3000  # the team default


def spec(**member: Any) -> dict[str, Any]:
    return {
        "name": "solo",
        "pattern": "single",
        "members": [{"name": "assistant", "description": "A helpful assistant.", **member}],
    }


async def run_turn(
    team: Team, request: str, run_id: str, thread_id: str = "th"
) -> tuple[RunResult, list[BaseEvent], list[BaseMessage]]:
    async with team.runner() as runner:
        events: list[BaseEvent] = [
            e async for e in runner.stream(request, run_id=run_id, thread_id=thread_id)
        ]
        result = await runner.result(run_id)
        state = await runner.graph.aget_state(runner.thread_config(thread_id))
    return result, events, list(state.values.get("messages", []))


async def test_the_second_turn_sees_the_first(settings: Any) -> None:
    model = ScriptedChatModel(responses=["Nice to meet you, Ada.", "Your name is Ada."])
    team = Team.from_dict(spec(), settings=settings, model=model)
    first, _, _ = await run_turn(team, "My name is Ada.", "run-1")
    second, _, messages = await run_turn(team, "What is my name?", "run-2")

    assert (first.status, first.output) == ("completed", "Nice to meet you, Ada.")
    assert (second.status, second.output) == ("completed", "Your name is Ada.")
    seen = model.calls[1]
    assert isinstance(seen[0], SystemMessage)
    assert [(type(m).__name__, m.text) for m in seen[1:]] == [
        ("HumanMessage", "My name is Ada."),
        ("AIMessage", "Nice to meet you, Ada."),
        ("HumanMessage", "What is my name?"),
    ]
    assert [(type(m).__name__, m.text) for m in messages] == [
        ("HumanMessage", "My name is Ada."),
        ("AIMessage", "Nice to meet you, Ada."),
        ("HumanMessage", "What is my name?"),
        ("AIMessage", "Your name is Ada."),
    ]
    assert messages[1].name == "assistant"


async def test_threads_do_not_share_a_conversation(settings: Any) -> None:
    model = ScriptedChatModel(responses=["one", "two"])
    team = Team.from_dict(spec(), settings=settings, model=model)
    await run_turn(team, "first thread", "run-1", thread_id="a")
    await run_turn(team, "second thread", "run-2", thread_id="b")
    assert [m.text for m in model.calls[1][1:]] == ["second thread"]


async def test_answers_stream_as_token_events(settings: Any) -> None:
    every_chunk = settings.model_copy(update={"token_frame_ms": 0})  # no frames: word by word
    team = Team.from_dict(spec(), settings=every_chunk)  # the offline model streams by words
    result, events, _ = await run_turn(team, "Explain what a cache is.", "run-1")

    tokens = by_type(events, "token")
    assert result.status == "completed" and result.output
    assert len(tokens) >= 5
    assert {t.agent for t in tokens} == {"assistant"}
    assert "".join(t.text for t in tokens) == result.output
    assert by_type(events, "agent_message")[0].content == result.output


def test_history_is_trimmed_to_the_token_budget() -> None:
    messages: list[AnyMessage] = []
    for i in range(60):
        messages += [HumanMessage(f"question {i} " + "word " * 60), AIMessage(f"answer {i}")]
    kept = trimmed_history(messages, HISTORY_TOKEN_BUDGET)

    assert count_tokens_approximately(kept) <= HISTORY_TOKEN_BUDGET
    assert 0 < len(kept) < len(messages)
    assert isinstance(kept[0], HumanMessage)  # a window starts on a user message
    assert kept[-1].text == "answer 59"  # the latest turns are kept
    assert trimmed_history(messages[:4], HISTORY_TOKEN_BUDGET) == messages[:4]
    assert trimmed_history([], HISTORY_TOKEN_BUDGET) == []


async def test_long_conversations_reach_the_model_trimmed(settings: Any) -> None:
    model = FunctionChatModel(fn=lambda messages: "ok " + "filler " * 400)
    team = Team.from_dict(spec(), settings=settings, model=model)
    for i in range(12):
        await run_turn(team, f"turn {i}", f"run-{i}")
    last = model.calls[-1]
    assert count_tokens_approximately(last[1:-1]) <= HISTORY_TOKEN_BUDGET
    assert last[-1].text == "turn 11" and last[-3].text == "turn 10"
    assert "turn 0" not in [m.text for m in last]


async def test_a_failing_agent_fails_the_run_and_keeps_the_conversation(settings: Any) -> None:
    def fn(messages: list[BaseMessage]) -> str:
        if messages[-1].text == "break":
            raise ValueError("model unavailable")
        return "fine"

    team = Team.from_dict(spec(), settings=settings, model=FunctionChatModel(fn=fn))
    await run_turn(team, "hello", "run-1")
    result, _, messages = await run_turn(team, "break", "run-2")

    assert result.status == "failed"
    assert result.error == "ValueError: model unavailable"
    assert [m.text for m in messages] == ["hello", "fine"]


async def test_the_offline_example_team_runs(settings: Any) -> None:
    team = Team.from_yaml(REPO / "examples" / "teams" / "single.yaml", settings=settings)
    result, events, _ = await run_turn(team, "Find out how Redis persists data to disk.", "run-1")

    assert result.status == "completed", result.error
    assert "Redis" in result.output and "AOF" in result.output
    assert [e.tool for e in by_type(events, "tool_called")] == ["search_docs"]
    tokens = by_type(events, "token")  # the answer streams, in frames that join to it
    assert len(tokens) >= 2 and "".join(t.text for t in tokens) == result.output
    follow_up, _, messages = await run_turn(team, "Find what Redis uses as a cache.", "run-2")
    assert follow_up.status == "completed" and len(messages) == 4
