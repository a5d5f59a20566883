"""Sensitive tool calls pause the run; approve / reject / edit resume it; nothing runs twice."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import tool

from teamgraph import Plan, Step, UsageError
from teamgraph.testing import FunctionChatModel

from .helpers import by_type, make_team, member, task_of

executed: list[str] = []


@tool
def delete_record(record_id: str) -> str:
    """Delete a record."""
    executed.append(record_id)
    return f"deleted {record_id}"


def _model() -> FunctionChatModel:
    """Asks to delete the record named in its task, then reports the tool's answer."""

    def fn(messages: list[BaseMessage]) -> Any:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if results:
            return f"result: {results[-1].content}"
        record = task_of(messages).split()[-1]
        return {"name": "delete_record", "args": {"record_id": record}, "id": f"c{record}"}

    def respond(messages: list[BaseMessage]) -> Any:
        from langchain_core.messages import AIMessage

        reply = fn(messages)
        return AIMessage(content="", tool_calls=[reply]) if isinstance(reply, dict) else reply

    return FunctionChatModel(fn=respond)


CLERK = member("clerk", "keeps records", tools=["delete_record"])


def _deleting(*records: str) -> Plan:
    """A plan of one step per record, ``s<record>``: the clerk deletes that record."""
    return Plan(
        steps=[Step(id=f"s{r}", worker="clerk", task=f"delete record {r}") for r in records]
    )


async def _start(runner: Any, plan: Plan, run_id: str = "r") -> list[Any]:
    return [e async for e in runner.stream("x", run_id=run_id, plan=plan)]


async def test_a_sensitive_call_pauses_and_approval_runs_it_once(settings: Any) -> None:
    executed.clear()
    async with make_team(settings, CLERK, model=_model(), tools=[delete_record]).runner() as runner:
        events = await _start(runner, _deleting("7"))
        asked = by_type(events, "approval_requested")
        assert [(a.tool, a.args) for a in asked] == [("delete_record", {"record_id": "7"})]
        assert (await runner.backend.runs.get("r")).status == "interrupted"
        assert executed == []
        pending = await runner.pending("r")
        resumed = [
            e
            async for e in runner.resume_stream(
                "r", decisions={pending[0]["id"]: {"action": "approve"}}
            )
        ]
        result = await runner.result("r")
    assert executed == ["7"]
    assert result.status == "completed" and result.step("s7").output == "result: deleted 7"
    assert by_type(resumed, "resumed")


async def test_reject_with_a_comment_the_agent_sees(settings: Any) -> None:
    executed.clear()
    async with make_team(settings, CLERK, model=_model(), tools=[delete_record]).runner() as runner:
        await _start(runner, _deleting("8"))
        await _drain(
            runner.resume_stream(
                "r", default={"action": "reject", "comment": "keep it, it is audited"}
            )
        )
        result = await runner.result("r")
    assert executed == []
    assert result.step("s8").output == (
        "result: The user rejected this call to delete_record: keep it, it is audited"
    )


async def test_edit_changes_the_arguments(settings: Any) -> None:
    executed.clear()
    async with make_team(settings, CLERK, model=_model(), tools=[delete_record]).runner() as runner:
        await _start(runner, _deleting("9"))
        edit = {"action": "edit", "args": {"record_id": "9-draft"}}
        events = [e async for e in runner.resume_stream("r", default=edit)]
        result = await runner.result("r")
    assert executed == ["9-draft"]
    assert result.step("s9").output == "result: deleted 9-draft"
    # the stream says what ran: the last announcement of the call carries the edited arguments
    assert by_type(events, "tool_called")[-1].args == {"record_id": "9-draft"}


async def test_an_edit_the_tool_would_reject_is_refused_and_the_run_still_waits(
    settings: Any,
) -> None:
    executed.clear()
    async with make_team(settings, CLERK, model=_model(), tools=[delete_record]).runner() as runner:
        await _start(runner, _deleting("9"))
        wrong = {"action": "edit", "args": {"record": 9}}  # no record_id
        with pytest.raises(UsageError) as refused:
            [e async for e in runner.resume_stream("r", default=wrong)]
        assert "does not fit delete_record" in str(refused.value)
        assert "'record_id' is a required property" in str(refused.value)
        assert (await runner.backend.runs.get("r")).status == "interrupted"
        assert len(await runner.pending("r")) == 1  # still waiting for a decision
        right = {"action": "edit", "args": {"record_id": "9"}}
        [e async for e in runner.resume_stream("r", default=right)]
        assert (await runner.result("r")).status == "completed"
    assert executed == ["9"]


async def test_parallel_approvals_resume_to_the_right_calls(settings: Any) -> None:
    executed.clear()
    async with make_team(settings, CLERK, model=_model(), tools=[delete_record]).runner() as runner:
        events = await _start(runner, _deleting("1", "2", "3"))
        requests = {
            e.args["record_id"]: e.request_id for e in by_type(events, "approval_requested")
        }
        assert set(requests) == {"1", "2", "3"}
        decisions = {
            requests["1"]: {"action": "approve"},
            requests["2"]: {"action": "reject", "comment": "no"},
            requests["3"]: {"action": "edit", "args": {"record_id": "3b"}},
        }
        await _drain(runner.resume_stream("r", decisions=decisions))
        result = await runner.result("r")
    assert sorted(executed) == ["1", "3b"]
    assert result.step("s1").output == "result: deleted 1"
    assert "rejected" in result.step("s2").output
    assert result.step("s3").output == "result: deleted 3b"


async def test_resume_without_a_decision_says_what_it_waits_for(settings: Any) -> None:
    async with make_team(settings, CLERK, model=_model(), tools=[delete_record]).runner() as runner:
        await _start(runner, _deleting("5"))
        with pytest.raises(UsageError, match=r"waits for a decision on delete_record"):
            await _drain(runner.resume_stream("r"))


async def _drain(events: Any) -> None:
    async for _ in events:
        pass


def test_an_edit_nested_too_deep_is_refused_with_why() -> None:
    """Issue 31: edited arguments nested 900 deep were a RecursionError (a 500), not a refusal."""
    from teamgraph.pauses import ApprovalRequest

    schema = {"type": "object", "properties": {"x": {"type": "string"}}}
    request = ApprovalRequest(id="r", agent="a", tool="t", args={}, call_id="c", args_schema=schema)
    for levels in (900, 5000):
        deep: object = "x"
        for _ in range(levels):
            deep = [deep]
        refused = request.edit_errors({"x": deep})
        assert "is not of type 'string'" in refused or "nested too deep" in refused
    assert request.edit_errors({"x": 1}) == "x: 1 is not of type 'string'"
