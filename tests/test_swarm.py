"""The swarm pattern: agents hand one conversation to each other; the active agent persists."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolArg, tool

from teamgraph import SpecError
from teamgraph.config import Settings
from teamgraph.runtime.team_api import Team
from teamgraph.testing import FunctionChatModel, ScriptedChatModel, ToolCall
from teamgraph.tools.handoff import handoff_tool_name, make_handoff_tool

from .helpers import by_type, make_team, member

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "teams"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _members(**overrides: Any) -> list[dict[str, Any]]:
    alice = {"name": "Alice", "description": "math expert", "tools": ["add"]}
    bob = {"name": "Bob", "description": "speaks like a pirate"}
    alice["can_handoff_to"], bob["can_handoff_to"] = ["Bob"], ["Alice"]
    return [{**alice, **overrides.get("Alice", {})}, {**bob, **overrides.get("Bob", {})}]


PAIR = {"name": "pair", "pattern": "swarm"}


async def _turn(runner: Any, request: str, run_id: str, thread_id: str = "t") -> Any:
    events = [e async for e in runner.stream(request, run_id=run_id, thread_id=thread_id)]
    return await runner.result(run_id), events


async def _state(runner: Any, thread_id: str = "t") -> dict[str, Any]:
    return dict(await runner.thread_state(thread_id))


async def test_the_active_agent_persists_across_turns_of_a_thread(settings: Settings) -> None:
    alice = ScriptedChatModel(
        responses=[ToolCall("transfer_to_bob"), ToolCall("add", {"a": 5, "b": 7}), "12"]
    )
    bob = ScriptedChatModel(responses=["Arr, Bob here! What be yer question?", _to_alice])
    team = make_team(
        settings, *_members(), **PAIR, models={"Alice": alice, "Bob": bob}, tools=[add]
    )
    async with team.runner() as runner:
        first, events = await _turn(runner, "i'd like to speak to Bob", "r1")
        assert (first.status, first.output) == ("completed", "Arr, Bob here! What be yer question?")
        assert (await _state(runner))["active_agent"] == "Bob"
        assert [(h.from_agent, h.to_agent) for h in by_type(events, "handoff")] == [
            ("Alice", "Bob")
        ]

        second, events = await _turn(runner, "what's 5 + 7?", "r2")
        assert (second.status, second.output) == ("completed", "12")
        state = await _state(runner)
        assert state["active_agent"] == "Alice"
        assert [(h.from_agent, h.to_agent) for h in by_type(events, "handoff")] == [
            ("Bob", "Alice")
        ]
        assert [(e.tool, e.output) for e in by_type(events, "tool_returned")] == [
            ("transfer_to_alice", "Successfully transferred to Alice"),
            ("add", "12"),
        ]
    # turn 2 starts with Bob, who sees turn 1; Alice continues with the whole conversation
    bob_turn2 = bob.calls[1]
    assert _texts(bob_turn2, HumanMessage)[-2:] == ["i'd like to speak to Bob", "what's 5 + 7?"]
    alice_turn2 = alice.calls[1]
    assert "Arr, Bob here! What be yer question?" in _texts(alice_turn2, AIMessage)
    assert "what's 5 + 7?" in _texts(alice_turn2, HumanMessage)[-1]
    # the thread's conversation: both turns, replies labelled with their agent
    spoken = [(m.type, m.name) for m in state["messages"] if m.type in ("human", "ai")]
    assert spoken == [
        ("human", None),
        ("ai", "Alice"),
        ("ai", "Bob"),
        ("human", None),
        ("ai", "Bob"),
        ("ai", "Alice"),
        ("ai", "Alice"),
    ]


def _to_alice(messages: list[BaseMessage]) -> Any:
    return ToolCall("transfer_to_alice", {"reason": "a math question"})


async def test_can_handoff_to_limits_the_targets(settings: Settings) -> None:
    trio = [*_members(), member("Zed", "sleeps")]
    alice = ScriptedChatModel(responses=[ToolCall("transfer_to_zed"), "fine, I answer myself"])
    team = make_team(
        settings, *trio, name="trio", pattern="swarm", models={"Alice": alice}, tools=[add]
    )
    async with team.runner() as runner:
        result, events = await _turn(runner, "wake Zed", "r1")
    assert (result.status, result.output) == ("completed", "fine, I answer myself")
    (returned,) = by_type(events, "tool_returned")
    assert returned.is_error
    assert returned.output == "Tool transfer_to_zed not found. Available: add, transfer_to_bob"
    assert by_type(events, "handoff") == []


async def test_members_without_can_handoff_to_reach_every_other_member(
    settings: Settings,
) -> None:
    members = [member("a", "first"), member("b", "second"), member("c", "third")]
    a = ScriptedChatModel(responses=[ToolCall("transfer_to_c")])
    c = ScriptedChatModel(responses=["c answers"])
    team = make_team(settings, *members, name="abc", pattern="swarm", models={"a": a, "c": c})
    async with team.runner() as runner:
        result, events = await _turn(runner, "hello", "r1")
    assert (result.status, result.output) == ("completed", "c answers")
    assert [(h.from_agent, h.to_agent) for h in by_type(events, "handoff")] == [("a", "c")]


async def test_max_handoffs_stops_the_turn(settings: Settings) -> None:
    members = [
        member(n, f"agent {n}", can_handoff_to=[t]) for n, t in (("a", "b"), ("b", "c"), ("c", "a"))
    ]
    models = {
        "a": FunctionChatModel(fn=lambda m: ToolCall("transfer_to_b")),
        "b": FunctionChatModel(fn=lambda m: ToolCall("transfer_to_c")),
        "c": FunctionChatModel(fn=lambda m: ToolCall("transfer_to_a")),
    }
    team = make_team(
        settings, *members, name="ring", pattern="swarm", swarm={"max_handoffs": 4}, models=models
    )
    async with team.runner() as runner:
        result, events = await _turn(runner, "go round", "r1")
        state = await _state(runner)
    assert result.status == "failed"
    assert result.error == "swarm exceeded max_handoffs=4"
    hops = [(h.from_agent, h.to_agent) for h in by_type(events, "handoff")]
    assert hops == [("a", "b"), ("b", "c"), ("c", "a"), ("a", "b")]
    assert state["active_agent"] == "b"  # who had the conversation when the turn stopped


async def test_ping_pong_stops_early(settings: Settings) -> None:
    alice = FunctionChatModel(fn=lambda m: ToolCall("transfer_to_bob"))
    bob = FunctionChatModel(fn=lambda m: ToolCall("transfer_to_alice"))
    team = make_team(
        settings, *_members(), **PAIR, models={"Alice": alice, "Bob": bob}, tools=[add]
    )
    async with team.runner() as runner:
        result, events = await _turn(runner, "who answers?", "r1")
        # the next turn starts clean: a new handoff counter, and an answer ends it
        alice.fn = lambda m: "Alice answers now"
        again, _ = await _turn(runner, "anyone?", "r2")
    assert result.status == "failed"
    assert result.error == "handoff ping-pong between Alice and Bob"
    hops = [(h.from_agent, h.to_agent) for h in by_type(events, "handoff")]
    assert hops == [("Alice", "Bob"), ("Bob", "Alice")]  # the third handoff is refused
    assert (again.status, again.output, again.error) == ("completed", "Alice answers now", "")


async def test_work_between_handoffs_is_no_ping_pong(settings: Settings) -> None:
    """Alice adds before each handoff: that is work, not ping-pong; max_handoffs still holds."""
    alice = FunctionChatModel(fn=_add_then_transfer)
    bob = FunctionChatModel(fn=lambda m: ToolCall("transfer_to_alice"))
    models = {"Alice": alice, "Bob": bob}
    team = make_team(
        settings, *_members(), **PAIR, swarm={"max_handoffs": 5}, models=models, tools=[add]
    )
    async with team.runner() as runner:
        result, events = await _turn(runner, "sum forever", "r1")
    assert result.error == "swarm exceeded max_handoffs=5"
    assert len(by_type(events, "handoff")) == 5


def _add_then_transfer(messages: list[BaseMessage]) -> Any:
    last = messages[-1]
    if isinstance(last, ToolMessage) and last.name == "add":
        return ToolCall("transfer_to_bob")
    return ToolCall("add", {"a": 1, "b": 2})


async def test_handoff_events_carry_the_reason(settings: Settings) -> None:
    alice = ScriptedChatModel(
        responses=[ToolCall("transfer_to_bob", {"reason": "the user asked for Bob"})]
    )
    bob = ScriptedChatModel(responses=["Ahoy"])
    team = make_team(
        settings, *_members(), **PAIR, models={"Alice": alice, "Bob": bob}, tools=[add]
    )
    async with team.runner() as runner:
        _, events = await _turn(runner, "Bob please", "r1")
    (handoff,) = by_type(events, "handoff")
    assert (handoff.from_agent, handoff.to_agent, handoff.reason) == (
        "Alice",
        "Bob",
        "the user asked for Bob",
    )
    assert handoff.path == ["pair", "Alice"]
    # handoffs are control flow: the default "transfer" approval pattern does not pause them
    assert by_type(events, "approval_requested") == []


@tool
def delete_record(record_id: str) -> str:
    """Delete a record."""
    deleted.append(record_id)
    return f"deleted {record_id}"


deleted: list[str] = []


async def test_a_sensitive_call_pauses_the_swarm_and_resumes_once(settings: Settings) -> None:
    deleted.clear()
    alice = ScriptedChatModel(
        responses=[ToolCall("delete_record", {"record_id": "7"}), ToolCall("transfer_to_bob")]
    )
    bob = ScriptedChatModel(responses=["Arr, record 7 be gone"])
    members = _members(Alice={"tools": ["add", "delete_record"]})
    models = {"Alice": alice, "Bob": bob}
    team = make_team(settings, *members, **PAIR, models=models, tools=[add, delete_record])
    async with team.runner() as runner:
        paused, events = await _turn(runner, "delete record 7", "r1")
        assert paused.status == "interrupted" and deleted == []
        asked = by_type(events, "approval_requested")
        assert [(a.agent, a.tool) for a in asked] == [("Alice", "delete_record")]
        resumed = [e async for e in runner.resume_stream("r1", default={"action": "approve"})]
        result = await runner.result("r1")
        state = await _state(runner)
    assert deleted == ["7"]
    assert (result.status, result.output) == ("completed", "Arr, record 7 be gone")
    assert [(h.from_agent, h.to_agent) for h in by_type(resumed, "handoff")] == [("Alice", "Bob")]
    assert state["active_agent"] == "Bob"


async def test_a_swarm_behind_the_clarification_gate(settings: Settings) -> None:
    alice = ScriptedChatModel(responses=[ToolCall("transfer_to_bob")])
    bob = ScriptedChatModel(responses=["Arr", "Arr again"])
    models = {"Alice": alice, "Bob": bob}
    team = make_team(settings, *_members(), **PAIR, clarify=True, models=models, tools=[add])
    async with team.runner() as runner:
        first, _ = await _turn(runner, "Please put me through to Bob the pirate", "r1")
        second, _ = await _turn(runner, "Tell me about pirate ships and their sails", "r2")
        state = await _state(runner)
    assert (first.status, first.output) == ("completed", "Arr")
    assert (second.status, second.output) == ("completed", "Arr again")
    assert state["active_agent"] == "Bob"


@tool
def remember(key: str, value: str, state: Annotated[dict[str, Any], InjectedToolArg]) -> str:
    """Remember a value in the team's shared state."""
    state[key] = value
    return f"remembered {key}"


async def test_shared_state_persists_across_turns_and_handoffs(settings: Settings) -> None:
    alice = ScriptedChatModel(
        responses=[ToolCall("remember", {"key": "city", "value": "Paris"}), "noted"]
    )
    bob = ScriptedChatModel(responses=["Arr, Paris"])
    members = _members(Alice={"tools": ["add", "remember"], "can_handoff_to": ["Bob"]})
    team = make_team(
        settings,
        *members,
        **PAIR,
        initial_state={"city": None},
        state_prompt="STATE={state}\nMSG={msg}",
        models={"Alice": alice, "Bob": bob},
        tools=[add, remember],
    )
    async with team.runner() as runner:
        await _turn(runner, "remember Paris", "r1")
        alice.responses.append(ToolCall("transfer_to_bob"))
        result, _ = await _turn(runner, "where do I live? ask Bob", "r2")
        state = await _state(runner)
    assert result.output == "Arr, Paris"
    assert state["shared_state"] == {"city": "Paris"}
    assert '"city": "Paris"' in _texts(bob.calls[0], HumanMessage)[-1]
    assert "STATE=" not in "".join(_texts(state["messages"], HumanMessage))  # stored as said


async def test_default_agent_takes_a_new_thread(settings: Settings) -> None:
    bob = ScriptedChatModel(responses=["Bob first"])
    team = make_team(
        settings,
        *_members(),
        **PAIR,
        swarm={"default_agent": "Bob"},
        models={"Bob": bob},
        tools=[add],
    )
    async with team.runner() as runner:
        result, _ = await _turn(runner, "hi", "r1")
    assert result.output == "Bob first"


def test_handoff_tool_names_are_sanitised() -> None:
    assert handoff_tool_name("Bob") == "transfer_to_bob"
    assert handoff_tool_name("data team.v2") == "transfer_to_data_team_v2"
    assert len(handoff_tool_name("x" * 80)) == 64
    handoff = make_handoff_tool("Bob", "speaks like a pirate")
    assert handoff.description == "Transfer the conversation to Bob: speaks like a pirate."


async def test_handoff_tool_works_in_langgraph_prebuilt_agents() -> None:
    """As nodes of a parent graph, prebuilt agents hand off with the same tool: the Command goes
    to the parent with the conversation, the tool's answer and the new active agent."""
    from langchain.agents import create_agent
    from langgraph.graph import START, StateGraph

    from teamgraph.patterns.swarm import SwarmState

    alice = create_agent(
        ScriptedChatModel(responses=[ToolCall("transfer_to_bob", {}, "c1")]),
        tools=[make_handoff_tool("Bob", "speaks like a pirate")],
        name="Alice",
    )
    bob = create_agent(
        ScriptedChatModel(responses=["Arr"]),
        tools=[make_handoff_tool("Alice", "math expert")],
        name="Bob",
    )
    graph = StateGraph(SwarmState)
    graph.add_node("Alice", alice, destinations=("Bob",))
    graph.add_node("Bob", bob, destinations=("Alice",))
    graph.add_edge(START, "Alice")
    final = await graph.compile().ainvoke({"messages": [HumanMessage("hi")]})
    assert final["active_agent"] == "Bob"
    assert [(type(m).__name__, m.text) for m in final["messages"]] == [
        ("HumanMessage", "hi"),
        ("AIMessage", ""),
        ("ToolMessage", "Successfully transferred to Bob"),
        ("AIMessage", "Arr"),
    ]
    assert final["messages"][2].tool_call_id == "c1"


def test_members_sharing_a_handoff_tool_name_are_refused(settings: Settings) -> None:
    members = [{"name": "Bob", "description": "one"}, {"name": "bob", "description": "two"}]
    team = Team.from_dict({"name": "bobs", "pattern": "swarm", "members": members})
    from teamgraph.patterns import build

    with pytest.raises(SpecError, match="'Bob' and 'bob' would share the handoff tool"):
        build(team.spec)


async def test_offline_example_runs(settings: Settings) -> None:
    team = Team.from_yaml(EXAMPLES / "swarm.yaml", settings=settings)
    async with team.runner() as runner:
        result, events = await _turn(runner, "Find how PostgreSQL handles MVCC and vacuum", "r1")
        assert (await _state(runner))["active_agent"] == "database_expert"
        second, later = await _turn(runner, "Find how LLM agents use handoffs", "r2")
        assert (await _state(runner))["active_agent"] == "agent_expert"
    assert result.status == "completed", result.error
    assert [(h.from_agent, h.to_agent) for h in by_type(events, "handoff")] == [
        ("triage", "database_expert")
    ]
    assert "search_docs" in [e.tool for e in by_type(events, "tool_called")]
    assert "MVCC" in result.output
    assert second.status == "completed", second.error
    assert [(h.from_agent, h.to_agent) for h in by_type(later, "handoff")] == [
        ("database_expert", "agent_expert")
    ]
    assert "llm-agents.md" in second.output


def _texts(messages: list[BaseMessage], kind: type[BaseMessage]) -> list[str]:
    return [m.text for m in messages if isinstance(m, kind)]


def test_offline_agent_reads_a_handoff_as_the_users_message() -> None:
    """The handoff note's words ("transferred", "conversation", the sender) would match the
    handoff tools; the offline model chooses by the user's message instead."""
    from langchain_core.messages import SystemMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from teamgraph import prompts
    from teamgraph.llm.offline import respond

    tools = [make_handoff_tool("Alice", "math expert"), add]
    handed = prompts.handoff_assignment("Alice", "add 2 and 3")
    messages = [SystemMessage("You are Bob"), HumanMessage(handed.text)]
    reply = respond(messages, [convert_to_openai_tool(t) for t in tools], None, handed.brief)
    assert [c["name"] for c in reply.tool_calls] == ["add"]
