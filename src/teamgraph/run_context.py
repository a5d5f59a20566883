"""What every node of a running team can reach: identity, event emission, models, tools, usage."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config

from teamgraph.durable import Journal, StepLedger
from teamgraph.events import BaseEvent, TokenUsage
from teamgraph.llm.cassette import Cassette
from teamgraph.llm.provider import ModelProvider
from teamgraph.llm.usage import UsageTracker
from teamgraph.pauses import ApprovalRequest, Decision
from teamgraph.planning.plan_cache import PlanCache
from teamgraph.specs.agent import AgentSpec
from teamgraph.specs.team import RetryOptions, TeamSpec
from teamgraph.tools.registry import ToolRegistry, ToolResources

E = TypeVar("E", bound=BaseEvent)


class Seqs(Protocol):
    """Where an emitter's seqs come from (a run store's :class:`SeqBlock` keeps them durable)."""

    last: int

    def next(self) -> int: ...


class Counter:
    """Seqs from 1, kept nowhere: for an emitter whose events are not stored."""

    def __init__(self) -> None:
        self.last = 0

    def next(self) -> int:
        self.last += 1
        return self.last


class Emitter:
    """Stamps events with the run id, the next ``seq`` and a path, and hands them to a sink."""

    def __init__(
        self,
        run_id: str,
        sink: Callable[[BaseEvent], None],
        seqs: Seqs | None = None,
        parent_id: str | None = None,
        end: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> None:
        self.run_id = run_id
        self.sink = sink
        self.seqs = seqs or Counter()
        self.parent_id = parent_id
        self._end = end

    async def end(self, row: dict[str, Any]) -> None:
        """Store every event emitted so far with ``row``, the fields of the run's row saying
        how this execution ended (when the sink stores events)."""
        if self._end is not None:
            await self._end(row)

    @property
    def seq(self) -> int:
        """The last seq handed out."""
        return self.seqs.last

    def emit(self, cls: type[E], path: list[str], parent_id: str | None = None, **fields: Any) -> E:
        event = cls(
            run_id=self.run_id,
            seq=self.seqs.next(),
            path=path,
            parent_id=parent_id or self.parent_id,
            **fields,
        )
        self.sink(event)
        return event


@dataclass
class RunContext:
    """Run-scoped dependencies, passed to graph nodes as LangGraph's runtime context."""

    run_id: str
    thread_id: str
    team: TeamSpec
    emitter: Emitter
    models: ModelProvider
    tools: ToolRegistry
    tool_resources: ToolResources
    ledger: StepLedger
    journal: Journal
    usage: UsageTracker
    templates: dict[str, Any] = field(default_factory=dict)
    shared_state: dict[str, Any] = field(default_factory=dict)  # see adopt_state
    approvals: bool = True  # sensitive tool calls pause the run for a human decision
    decisions: dict[str, Decision] = field(default_factory=dict)  # by approval request id
    pending: list[ApprovalRequest] = field(default_factory=list)  # approvals asked in this pass
    answers: dict[str, str] = field(default_factory=dict)  # to nested teams' questions, by key
    questions: list[tuple[str, str]] = field(default_factory=list)  # (key, question) this pass
    checkpointer: BaseCheckpointSaver[Any] | None = None  # where nested teams keep their threads
    sandbox: Any = None  # teamgraph.sandbox.Sandbox, created on first use by codeact agents
    store: Any = None  # a LangGraph BaseStore for notes shared across agents and threads
    plan_cache: PlanCache | None = None  # plans reused for similar requests (workflow)
    user_id: str = "default"
    path: tuple[str, ...] = ()  # team → nested team; empty means (team.name,)
    parent_id: str | None = None  # the step or agent a nested team works for
    scope: str = ""  # key prefix of ledger records; empty means run_id
    steps_above: tuple[str, ...] = ()  # the steps of enclosing teams this team works for
    closed: bool = False  # the run row already records how this execution ended
    cassette: Cassette | None = None  # the run's recording (being written, or replayed)
    reported: set[tuple[str, ...]] = field(default_factory=set)  # see outcome_key
    _tool_cache: dict[str, list[BaseTool]] = field(default_factory=dict)

    def emit(self, cls: type[E], *path: str, **fields: Any) -> E:
        base = list(self.path or (self.team.name,))
        return self.emitter.emit(cls, [*base, *path], parent_id=self.parent_id, **fields)

    def outcome_key(self, worker: str, step_id: str) -> tuple[str, ...]:
        """A step's outcome event as ``reported`` holds it: the event's path, the step or agent its
        team works for, then the step. On a resume ``reported`` starts with the outcomes already
        in the run's stored events; each outcome emitted since is added."""
        return (*(self.path or (self.team.name,)), worker, self.parent_id or "", step_id)

    @property
    def retry(self) -> RetryOptions:
        """How transient model errors are retried (one setting for every pattern)."""
        return self.team.retry

    def site(self, name: str) -> str:
        """Where a call is made, stable from run to run: team path, then the step or agent."""
        return "/".join((*(self.path or (self.team.name,)), name))

    def step_keys(self, step_id: str | None) -> tuple[str, ...]:
        """The usage keys of a step of this team: its own and every enclosing step's."""
        chain = (*self.steps_above, step_id) if step_id is not None else self.steps_above
        return tuple("/".join(chain[: i + 1]) for i in range(len(chain)))

    def step_usage(self, step_id: str) -> TokenUsage:
        """What a step of this team has spent, its nested teams' work included."""
        return self.usage.by_step[self.step_keys(step_id)[-1]]

    @property
    def ledger_key(self) -> str:
        return self.scope or self.run_id

    def task_scope(self, name: str) -> str:
        """A journal key prefix unique to this graph task and ``name`` (a step or an agent),
        stable when LangGraph re-executes the task after a crash or a pause."""
        try:
            namespace = str(get_config()["configurable"].get("checkpoint_ns", ""))
        except RuntimeError:  # called outside a graph (tests, direct agent use)
            namespace = ""
        return f"{self.ledger_key}/{namespace}/{name}"

    def child(self, team: TeamSpec, parent_id: str) -> RunContext:
        """The context of a nested team working for ``parent_id`` (a step or an agent): same run,
        emitter, usage and budget; its own team, path, ledger scope and tools."""
        path = (*(self.path or (self.team.name,)), team.name)
        return replace(
            self,
            team=team,
            path=path,
            parent_id=parent_id,
            scope=f"{self.ledger_key}/{parent_id}/{team.name}",
            steps_above=(*self.steps_above, parent_id),
            _tool_cache={},
        )

    def adopt_state(self, saved: dict[str, Any] | None) -> dict[str, Any]:
        """The thread's shared state (from its last checkpoint), else the team's initial state."""
        if saved is not None:
            self.shared_state = saved
        elif self.team.initial_state is not None:
            self.shared_state = copy.deepcopy(self.team.initial_state)
        return self.shared_state

    def tools_for(self, agent: AgentSpec) -> list[BaseTool]:
        if agent.name not in self._tool_cache:
            self._tool_cache[agent.name] = [
                self.tools.build(name, self.tool_resources) for name in agent.tools
            ]
        return self._tool_cache[agent.name]
