"""What makes a run resumable, and the one way a side effect is made exactly-once.

Three records, each with one job (docs/durability.md walks through them boundary by boundary):

=====================  ================================  =======================================
record                 what it keeps                     what a resume does with it
=====================  ================================  =======================================
LangGraph checkpoints  the graph's position and state,   continues from the last node that
                       after every node                  finished; a node cut short runs again
step ledger            each finished workflow step's     a step found ``done`` is not run again;
(:class:`StepLedger`)  result, keyed by step id          its result goes to its dependants
journal                every side effect's result: model a re-run node gets each recorded result
(:class:`Journal`)     replies (with their cost), tool   back instead of calling again; a human
                       results, code runs, the human's   is not asked again
                       replies to a pause
=====================  ================================  =======================================

Every side effect — a model call, a tool call, a code run, a tool called from that code — goes
through :func:`once`, which is the only place that reads and writes results in the journal:

    recall → announce (once, across executions) → do → ``<kind>.done`` → record →
    ``<kind>.journaled`` → settle

A crash before the record loses only the result: the effect is done again on resume — except an
effect fenced by :func:`at_most_once` (an approved tool call), which is never started twice.
The ``<kind>.…`` names are crash points (:mod:`teamgraph.faults`) that the fault-injection tests
kill the process at.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from langchain_core.messages import AIMessage, message_to_dict, messages_from_dict
from pydantic import BaseModel, PrivateAttr

from teamgraph.events import TokenUsage
from teamgraph.faults import point

Kind = Literal["model", "tool"]  # the crash points ``<kind>.done`` and ``<kind>.journaled``
StepOutcome = Literal["running", "done", "failed", "skipped"]  # running: started, announced


# --- keys ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JournalKey:
    """Where one value lives in the journal. Build keys with the methods, never by hand: a key is
    the graph task's scope (stable when LangGraph re-executes the task) and a typed path."""

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

    def code_tool(self, name: str, n: int) -> JournalKey:
        """The ``n``-th call of tool ``name`` made by that code."""
        return JournalKey(f"{self.text}.{name}{n}")

    def announced(self) -> JournalKey:
        """The mark that what this key names was announced (its event went out)."""
        return JournalKey(f"{self.text}.a")

    def begun(self) -> JournalKey:
        """The mark that the effect under this key was started (:func:`at_most_once`)."""
        return JournalKey(f"{self.text}.b")

    def reply(self, interrupt_id: str) -> JournalKey:
        """A human's reply (answer, decisions) to the pause ``interrupt_id`` of a run."""
        return JournalKey(f"{self.text}/reply:{interrupt_id}")

    def cache_lookup(self) -> JournalKey:
        """What the plan cache answered the planner (a reused plan, or none): kept so that a
        re-executed plan node decides as the first execution did."""
        return JournalKey(f"{self.text}/cache")

    def input_plan(self) -> JournalKey:
        """The explicit plan a run was given (its run id's key): kept so that a run stopped
        before its first checkpoint starts again with it."""
        return JournalKey(f"{self.text}/input-plan")

    @property
    def leaf(self) -> str:
        """The call's own part of the key (``m2``, ``m2.t0``, ``d1.r1``), without its scope."""
        return self.text.rsplit("/", 1)[-1]

    def __str__(self) -> str:
        return self.text


def journal_run(key: str) -> str:
    """The run a journal key belongs to: its first segment (keys are scoped by run id)."""
    return key.split("/", 1)[0]


# --- entries -------------------------------------------------------------------------------------
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
    _message: AIMessage | None = PrivateAttr(default=None)  # the reply itself, when made here

    def message(self) -> AIMessage:
        if self._message is None:
            restored = messages_from_dict([self.reply])[0]
            assert isinstance(restored, AIMessage)
            self._message = restored
        return self._message

    @classmethod
    def of(cls, reply: AIMessage, **fields: Any) -> ModelEntry:
        entry = cls(reply=message_to_dict(reply), **fields)
        entry._message = reply
        return entry

    def encode(self) -> str:
        return self.model_dump_json()

    @classmethod
    def decode(cls, saved: str) -> ModelEntry:
        data = json.loads(saved)
        if "reply" in data:
            return cls.model_validate(data)
        return cls(reply=data)  # written before entries carried usage: a bare message


@dataclass(frozen=True)
class ToolEntry:
    """A tool call's (or a code run's) result as the agent saw it; ``goto``: a handoff target."""

    content: str
    is_error: bool = False
    goto: str | None = None

    def encode(self) -> str:
        return json.dumps([self.content, self.is_error, self.goto])

    @classmethod
    def decode(cls, saved: str) -> ToolEntry:
        content, is_error, *rest = json.loads(saved)
        return cls(str(content), bool(is_error), rest[0] if rest else None)


Entry = TypeVar("Entry", ModelEntry, ToolEntry)


# --- storage -------------------------------------------------------------------------------------
class JournalStore(Protocol):
    """Where the journal's values are kept: a key/value table (``teamgraph.storage``)."""

    async def recall(self, key: str) -> str | None: ...

    async def record(self, key: str, value: str) -> None: ...

    async def values(self, run_id: str) -> list[str]:
        """Every value recorded for the run (keys start with ``run_id/``)."""
        ...

    async def forget(self, run_ids: Sequence[str]) -> None:
        """Remove every value recorded for these runs (a run compacted or pruned)."""
        ...


class StepRecord(BaseModel):
    """What a workflow step produced — or, ``running``, that it started (and was announced)."""

    step_id: str
    worker: str
    task: str = ""
    status: StepOutcome
    output: str = ""
    error: str = ""
    elapsed_s: float = 0.0
    usage: TokenUsage = TokenUsage()


class StepLedger(Protocol):
    """Durable step results, keyed by run (or nested team) and step id — never by call order:
    a resumed workflow hands every step its own result, whatever order they finished in."""

    async def load(self, run_id: str) -> dict[str, StepRecord]: ...

    async def save(self, run_id: str, record: StepRecord) -> None: ...

    async def forget(self, run_ids: Sequence[str]) -> None:
        """Remove the records of these runs and of their nested teams (a run pruned)."""
        ...


class FirstExecution:
    """The journal and the step ledger as a run's first execution sees them: everything it can
    find there it wrote itself (the run is new: no earlier execution, no other process), so a
    key it never wrote is known absent without a read (a round trip each on PostgreSQL). Writes
    go to the stores as ever (a resume, a takeover, reads the stores); the journal remembers the
    keys it wrote (a node LangGraph runs again reads their values back), the ledger its records.
    A write is remembered only once its store holds it."""

    def __init__(self, journal: JournalStore, ledger: StepLedger) -> None:
        self.journal = _FirstJournal(journal)
        self.ledger = _FirstLedger(ledger)


class _FirstJournal:
    def __init__(self, store: JournalStore) -> None:
        self.store, self.written = store, set[str]()

    async def recall(self, key: str) -> str | None:
        return await self.store.recall(key) if key in self.written else None

    async def record(self, key: str, value: str) -> None:
        await self.store.record(key, value)
        self.written.add(key)

    async def values(self, run_id: str) -> list[str]:
        return await self.store.values(run_id)

    async def forget(self, run_ids: Sequence[str]) -> None:
        await self.store.forget(run_ids)


class _FirstLedger:
    def __init__(self, ledger: StepLedger) -> None:
        self.ledger, self.kept = ledger, dict[str, dict[str, StepRecord]]()

    async def load(self, run_id: str) -> dict[str, StepRecord]:
        return dict(self.kept.get(run_id, {}))

    async def save(self, run_id: str, record: StepRecord) -> None:
        await self.ledger.save(run_id, record)
        self.kept.setdefault(run_id, {})[record.step_id] = record

    async def forget(self, run_ids: Sequence[str]) -> None:
        await self.ledger.forget(run_ids)


# --- the journal ---------------------------------------------------------------------------------
class Journal:
    """Typed reads and writes of a run's journal. Results are written by :func:`once` only."""

    def __init__(self, store: JournalStore) -> None:
        self.store = store

    async def get(self, key: JournalKey, kind: type[Entry]) -> Entry | None:
        saved = await self.store.recall(key.text)
        return None if saved is None else kind.decode(saved)

    async def mark(self, key: JournalKey, fresh: bool = False) -> bool:
        """Set the mark ``key`` (an announcement, a start); False when it was set already.
        ``fresh``: nothing can have set it yet (the run's first execution): it is not read."""
        if not fresh and await self.store.recall(key.text) is not None:
            return False
        await self.store.record(key.text, "1")
        return True

    async def model_entries(self, run_id: str) -> list[ModelEntry]:
        """Every model reply recorded for the run, in any of its executions."""
        entries = []
        for saved in await self.store.values(run_id):
            data = json.loads(saved)
            if isinstance(data, dict) and "reply" in data:  # tool results are lists
                entries.append(ModelEntry.model_validate(data))
        return entries

    async def cache_answer(self, key: JournalKey) -> tuple[bool, Any]:
        """What the plan cache answered at ``key`` (:meth:`JournalKey.cache_lookup`): whether
        it was asked, and its answer (JSON values)."""
        saved = await self.store.recall(key.text)
        return (False, None) if saved is None else (True, json.loads(saved))

    async def keep_cache_answer(self, key: JournalKey, answer: Any) -> None:
        await self.store.record(key.text, json.dumps(answer))

    async def keep_input_plan(self, run_id: str, plan: dict[str, Any]) -> None:
        await self.store.record(JournalKey.task(run_id).input_plan().text, json.dumps(plan))

    async def input_plan(self, run_id: str) -> dict[str, Any] | None:
        saved = await self.store.recall(JournalKey.task(run_id).input_plan().text)
        return None if saved is None else dict(json.loads(saved))

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
            key = JournalKey.task(run_id).reply(interrupt_id)
            await self.store.record(key.text, json.dumps(value))

    async def record_decision(self, run_id: str, request_id: str, decision: Any) -> None:
        """Keep one tool call's decision until every call of the pause has one (clients that
        decide call by call, as the approvals page does)."""
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


# --- the primitive -------------------------------------------------------------------------------
async def once(
    journal: Journal,
    key: JournalKey,
    kind: type[Entry],
    do: Callable[[], Awaitable[Entry]],
    *,
    crash: Kind,
    announce: Callable[[], object] | None = None,
    settle: Callable[[Entry], object] | None = None,
) -> Entry:
    """The result of the side effect ``do`` under ``key``, done once across every execution of
    the run that reaches it.

    A result recorded by an earlier execution is returned as it was: nothing is done, announced
    or settled again. Otherwise ``announce`` runs — unless an earlier execution announced this
    key already (it was cut short, or paused, before its result was recorded) — then ``do``,
    whose result is recorded before ``settle`` sees it (counting it, emitting its event). An
    exception from ``do`` (a pause for approval, a failure) records nothing."""
    saved = await journal.get(key, kind)
    if saved is not None:
        return saved
    if announce is not None and await journal.mark(key.announced()):
        announce()
    entry = await do()
    point(f"{crash}.done")
    await journal.store.record(key.text, entry.encode())
    point(f"{crash}.journaled")
    if settle is not None:
        settle(entry)
    return entry


async def at_most_once(
    journal: Journal,
    key: JournalKey,
    do: Callable[[], Awaitable[Entry]],
    lost: Callable[[], Entry],
) -> Entry:
    """``do()`` for an effect that must never be started twice (an approved tool call), inside
    :func:`once`'s ``do``: a start mark is recorded before it runs, and an execution that finds
    the mark — a crash came after the start and before the result was recorded — gets
    ``lost()`` (an honest "effect unknown") instead of doing it again."""
    if not await journal.mark(key.begun()):
        return lost()
    return await do()
