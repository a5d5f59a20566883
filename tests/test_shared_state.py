"""Shared state (``initial_state``) in every pattern: agents see it, tools change it, the change
lasts for the thread's next turn, and the run hands it back (RunResult and run_completed)."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolArg, tool

from teamgraph.brief import current_brief
from teamgraph.runtime.team_api import Team
from teamgraph.testing import FunctionChatModel, ToolCall

from .helpers import by_type, plan_json, run_collect

MEMBER = {"name": "keeper", "description": "keeps notes of what the user says", "tools": ["tally"]}


@tool
def tally(word: str, state: Annotated[dict[str, Any], InjectedToolArg]) -> str:
    """Count one more mention of a word in the team's shared state."""
    state["count"] = state.get("count", 0) + 1
    state["last"] = word
    return f"counted {word}"


def keeper_model(seen: list[str]) -> FunctionChatModel:
    """An agent that tallies once per task, then answers; supervisors pick the keeper once."""

    def fn(messages: list[BaseMessage]) -> Any:
        brief = current_brief()
        if brief is not None and brief.role == "planner":
            return plan_json(("keep", "keeper", []))
        if brief is not None and brief.role == "supervisor":
            users = [i for i, (speaker, _) in enumerate(brief.transcript) if speaker == "user"]
            this_turn = brief.transcript[users[-1] :]
            if any(speaker.startswith("supervisor →") for speaker, _ in this_turn):
                return {"picks": [], "finish": True, "answer": "tallied"}
            return {"picks": [{"agent": "keeper", "instructions": "tally"}], "finish": False}
        last = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        seen.append(str(messages[last].content))
        if not any(isinstance(m, ToolMessage) for m in messages[last:]):
            return ToolCall("tally", {"word": "blue"})
        return "tallied"

    return FunctionChatModel(fn=fn)


SPECS = {
    "single": {"pattern": "single", "members": [MEMBER]},
    "supervisor": {"pattern": "supervisor", "members": [MEMBER]},
    "swarm": {"pattern": "swarm", "members": [MEMBER]},
    "workflow": {"pattern": "workflow", "members": [MEMBER]},
}


@pytest.mark.parametrize("pattern", sorted(SPECS))
async def test_shared_state_in_every_pattern(settings: Any, pattern: str) -> None:
    seen: list[str] = []
    spec = {"name": "s", "initial_state": {"count": 0}, **SPECS[pattern]}
    team = Team.from_dict(spec, settings=settings, model=keeper_model(seen), tools=[tally])
    first, events = await run_collect(team, "remember blue", thread_id="t", run_id="r1")
    assert first.status == "completed", first.error
    assert '"count": 0' in seen[0]  # the agent saw the initial state
    assert first.shared_state == {"count": 1, "last": "blue"}
    assert by_type(events, "run_completed")[0].shared_state == {"count": 1, "last": "blue"}

    seen.clear()
    second, _ = await run_collect(team, "remember blue again", thread_id="t", run_id="r2")
    assert '"count": 1' in seen[0]  # the next turn of the thread starts from the last state
    assert second.shared_state == {"count": 2, "last": "blue"}


async def test_a_team_without_shared_state_reports_none(settings: Any) -> None:
    spec = {"name": "s", "pattern": "single", "members": [MEMBER]}
    team = Team.from_dict(spec, settings=settings, model=keeper_model([]), tools=[tally])
    result = await team.run("remember blue")
    assert result.status == "completed" and result.shared_state is None
