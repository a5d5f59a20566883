"""The run's journal: every model reply and tool result, recorded once and replayed after a crash
or a pause instead of being asked or executed again.

A :class:`JournalKey` names one recorded value. It is built from the graph task's scope (stable
when LangGraph re-executes the task) and a typed path — the n-th model call, its i-th tool call,
a code run, a sandboxed tool call, a supervisor decision — so no call site spells keys itself.
:class:`Journal` reads and writes typed entries over the ledger's raw key/value storage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, message_to_dict, messages_from_dict
from pydantic import BaseModel

from teamgraph.events import TokenUsage
from teamgraph.ledger import StepLedger


@dataclass(frozen=True)
class JournalKey:
    """Where one value lives in the journal. Build keys with the methods, never by hand."""

    text: str

    @classmethod
    def task(cls, scope: str) -> JournalKey:
        """The key prefix of one graph task working for one step or agent."""
        return cls(scope)

    def model_call(self, n: int) -> JournalKey:
        """The ``n``-th model call (from 1) of this task."""
        return JournalKey(f"{self.text}/m{n}")

    def decision(self, n: int) -> JournalKey:
        """The ``n``-th supervisor decision of this task."""
        return JournalKey(f"{self.text}/d{n}")

    def retry(self, n: int) -> JournalKey:
        """The ``n``-th retry of a structured call whose reply failed validation."""
        return JournalKey(f"{self.text}.r{n}")

    def tool(self, i: int) -> JournalKey:
        """The ``i``-th tool call a model call asked for."""
        return JournalKey(f"{self.text}.t{i}")

    def code(self) -> JournalKey:
        """The sandboxed code run a model call asked for (``codeact``)."""
        return JournalKey(f"{self.text}.code")

    def announced(self) -> JournalKey:
        """The mark that the call under this key was announced (``tool_called``)."""
        return JournalKey(f"{self.text}.a")

    def reply(self, interrupt_id: str) -> JournalKey:
        """A human's reply (answer, decisions) to the pause ``interrupt_id`` of a run."""
        return JournalKey(f"{self.text}/reply:{interrupt_id}")

    def input_plan(self) -> JournalKey:
        """The explicit plan a run was given (its run id's key): kept so that a run stopped
        before its first checkpoint starts again with it."""
        return JournalKey(f"{self.text}/input-plan")

    def begun(self) -> JournalKey:
        """The mark that the approved call under this key was started (run at most once)."""
        return JournalKey(f"{self.text}.b")

    def sandboxed_tool(self, name: str, n: int) -> JournalKey:
        """The ``n``-th call of tool ``name`` made by sandboxed code."""
        return JournalKey(f"{self.text}.{name}{n}")

    @property
    def leaf(self) -> str:
        """The call's own part of the key (``m2``, ``m2.t0``, ``d1.r1``), without its scope."""
        return self.text.rsplit("/", 1)[-1]

    def __str__(self) -> str:
        return self.text


class ModelEntry(BaseModel):
    """A model reply as recorded: the message, its parsed structured value (if any) and what it
    cost, charged to whom."""

    reply: dict[str, Any]  # the AIMessage, as message_to_dict writes it
    parsed: Any = None
    error: str = ""  # a structured reply that failed validation: why
    agent: str = ""
    step_id: str | None = None
    steps: list[str] = []  # the usage keys it was charged to (its step and enclosing steps)
    model: str = ""
    usage: TokenUsage = TokenUsage()

    def message(self) -> AIMessage:
        restored = messages_from_dict([self.reply])[0]
        assert isinstance(restored, AIMessage)
        return restored

    @classmethod
    def of(cls, reply: AIMessage, **fields: Any) -> ModelEntry:
        return cls(reply=message_to_dict(reply), **fields)


@dataclass(frozen=True)
class ToolEntry:
    """A tool call's (or a code run's) result as the agent saw it; ``goto``: a handoff target."""

    content: str
    is_error: bool = False
    goto: str | None = None


class Journal:
    """Typed reads and writes of the journal, over a :class:`StepLedger`'s key/value storage."""

    def __init__(self, store: StepLedger) -> None:
        self.store = store

    async def model(self, key: JournalKey) -> ModelEntry | None:
        saved = await self.store.recall(key.text)
        return None if saved is None else _model_entry(saved)

    async def record_model(self, key: JournalKey, entry: ModelEntry) -> None:
        await self.store.record(key.text, entry.model_dump_json())

    async def model_entries(self, run_id: str) -> list[ModelEntry]:
        """Every model reply recorded for the run, in any of its executions."""
        entries = []
        for saved in await self.store.journal(run_id):
            data = json.loads(saved)
            if isinstance(data, dict) and "reply" in data:  # tool results are lists
                entries.append(ModelEntry.model_validate(data))
        return entries

    async def was_announced(self, key: JournalKey) -> bool:
        return await self.store.recall(key.announced().text) is not None

    async def announce(self, key: JournalKey) -> None:
        """Record that the call under ``key`` is announced (before its event goes out)."""
        await self.store.record(key.announced().text, "1")

    async def keep_input_plan(self, run_id: str, plan: dict[str, Any]) -> None:
        await self.store.record(JournalKey.task(run_id).input_plan().text, json.dumps(plan))

    async def input_plan(self, run_id: str) -> dict[str, Any] | None:
        saved = await self.store.recall(JournalKey.task(run_id).input_plan().text)
        return None if saved is None else dict(json.loads(saved))

    async def begin(self, key: JournalKey) -> bool:
        """Mark the call under ``key`` as started, durably, before it runs; False when an earlier
        execution had started it already (a crash came before its result was journalled)."""
        if await self.store.recall(key.begun().text) is not None:
            return False
        await self.store.record(key.begun().text, "1")
        return True

    async def replies(self, run_id: str, interrupt_ids: list[str]) -> dict[str, Any] | None:
        """The replies given to these pauses of the run, if every one of them was given."""
        found = {}
        for interrupt_id in interrupt_ids:
            saved = await self.store.recall(JournalKey.task(run_id).reply(interrupt_id).text)
            if saved is None:
                return None
            found[interrupt_id] = json.loads(saved)
        return found

    async def record_replies(self, run_id: str, replies: dict[str, Any]) -> None:
        """Keep the replies a resume brings, so that a crash after it does not ask again."""
        for interrupt_id, value in replies.items():
            await self.store.record(
                JournalKey.task(run_id).reply(interrupt_id).text, json.dumps(value)
            )

    async def record_decision(self, run_id: str, request_id: str, decision: Any) -> None:
        """Keep one tool call's decision until every call of the pause has one (clients that
        decide call by call, as the seeds' approvals page does)."""
        key = JournalKey.task(run_id).reply(f"decision:{request_id}")
        await self.store.record(key.text, json.dumps(decision))

    async def decisions(self, run_id: str, request_ids: list[str]) -> dict[str, Any]:
        """The decisions kept so far for these tool calls of the run."""
        found = {}
        for request_id in request_ids:
            key = JournalKey.task(run_id).reply(f"decision:{request_id}")
            saved = await self.store.recall(key.text)
            if saved is not None:
                found[request_id] = json.loads(saved)
        return found

    async def tool(self, key: JournalKey) -> ToolEntry | None:
        saved = await self.store.recall(key.text)
        if saved is None:
            return None
        content, is_error, *rest = json.loads(saved)
        return ToolEntry(str(content), bool(is_error), rest[0] if rest else None)

    async def record_tool(self, key: JournalKey, entry: ToolEntry) -> None:
        await self.store.record(key.text, json.dumps([entry.content, entry.is_error, entry.goto]))


def _model_entry(saved: str) -> ModelEntry:
    data = json.loads(saved)
    if "reply" in data:
        return ModelEntry.model_validate(data)
    return ModelEntry(reply=data)  # written before entries carried usage: a bare message
