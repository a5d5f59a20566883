from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from teamgraph import Plan, SpecError, Step
from teamgraph.runtime.team_api import Team
from teamgraph.testing import ScriptedChatModel, ToolCall

from .helpers import by_type, make_team, member, run_collect

HERE = Path(__file__).resolve().parent


PLAN = Plan(steps=[Step(id="s", worker="worker", task="count")])


def _worker(*tools: str) -> dict[str, Any]:
    return member("worker", "works", tools=list(tools))


async def test_module_function_reference(settings: Any) -> None:
    model = ScriptedChatModel(responses=[ToolCall("word_count", {"text": "a b c"}), "three"])
    team = make_team(settings, _worker("tests.custom_tools:word_count"), model=model)
    result, _ = await run_collect(team, "x", plan=PLAN)
    assert model.calls[1][-1].content == "3" and result.step("s").output == "three"


async def test_bad_module_reference_fails_the_step_clearly(settings: Any) -> None:
    nope = _worker("tests.custom_tools:nope")
    team = make_team(settings, nope, model=ScriptedChatModel(responses=[]))
    result, _ = await run_collect(team, "x", plan=PLAN)
    assert "cannot import tool 'tests.custom_tools:nope'" in result.step("s").error


async def test_tools_marked_requires_approval_pause_the_run(settings: Any) -> None:
    model = ScriptedChatModel(responses=[ToolCall("launch", {"target": "moon"}), "stopped"])
    team = make_team(settings, _worker("tests.custom_tools:launch"), model=model)
    result, events = await run_collect(team, "x", plan=PLAN)
    assert result.status == "interrupted"
    assert [e.tool for e in by_type(events, "approval_requested")] == ["launch"]


async def test_name_patterns_are_configurable(settings: Any) -> None:
    model = ScriptedChatModel(responses=[ToolCall("word_count", {"text": "a"}), "ok"])
    counter = _worker("tests.custom_tools:word_count")
    team = make_team(settings, counter, approvals={"patterns": ["count"]}, model=model)
    result, events = await run_collect(team, "x", plan=PLAN)
    assert [e.tool for e in by_type(events, "approval_requested")] == ["word_count"]
    assert result.status == "interrupted"


async def test_mcp_tools_from_a_stdio_server(settings: Any) -> None:
    server = {"command": sys.executable, "args": [str(HERE / "mcp_calc_server.py")]}
    model = ScriptedChatModel(responses=[ToolCall("multiply", {"a": 6, "b": 7}), "42 it is"])
    calc = _worker("mcp:calc/multiply")
    team = make_team(settings, calc, mcp_servers={"calc": server}, model=model)
    result, _ = await run_collect(team, "x", plan=PLAN)
    reply = model.calls[1][-1]
    assert isinstance(reply, ToolMessage) and reply.status == "success" and "42" in reply.text
    assert result.step("s").output == "42 it is"


async def test_unknown_mcp_server_command_is_a_clear_error(settings: Any) -> None:
    server = {"command": "/nonexistent/mcp-server"}
    ghost = _worker("mcp:ghost/x")
    team = make_team(
        settings, ghost, mcp_servers={"ghost": server}, model=ScriptedChatModel(responses=[])
    )
    with pytest.raises(Exception, match="MCP server 'ghost' could not be loaded"):
        await run_collect(team, "x", plan=PLAN)


def test_yaml_mcp_server_fields_are_validated() -> None:
    with pytest.raises(SpecError, match=r"mcp_servers\.calc\.command"):
        Team.from_dict({"name": "t", "members": ["writer"], "mcp_servers": {"calc": {}}})
