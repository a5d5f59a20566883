"""What every node of a running team can reach: identity, event emission, models, tools, usage."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from langchain_core.tools import BaseTool
from langgraph.config import get_config

from teamgraph.events import BaseEvent
from teamgraph.ledger import StepLedger
from teamgraph.llm.provider import ModelProvider
from teamgraph.llm.usage import UsageTracker
from teamgraph.specs.agent import AgentSpec
from teamgraph.specs.team import TeamSpec
from teamgraph.tools.registry import ToolRegistry, ToolResources

E = TypeVar("E", bound=BaseEvent)


class Emitter:
    """Stamps events with the run id, the next ``seq`` and a path, and hands them to a sink.

    ``seq`` must keep increasing across a crash, so the emitter reserves numbers ahead in blocks
    (``reserve(upto)`` persists the high-water mark, asynchronously, half a block early); a
    resumed run starts above anything the crashed process could have emitted. ``reserved``: a
    high-water mark already persisted (with the run row), so the first events need no write."""

    BLOCK = 1000

    def __init__(
        self,
        run_id: str,
        sink: Callable[[BaseEvent], None],
        start_seq: int = 0,
        parent_id: str | None = None,
        reserve: Callable[[int], None] | None = None,
        reserved: int | None = None,
    ) -> None:
        self.run_id = run_id
        self.sink = sink
        self.seq = start_seq
        self.reserved = max(start_seq, reserved or 0)
        self.parent_id = parent_id
        self.reserve = reserve

    def emit(self, cls: type[E], path: list[str], parent_id: str | None = None, **fields: Any) -> E:
        self.seq += 1
        if self.reserve is not None and self.seq >= self.reserved - self.BLOCK // 2:
            self.reserved = max(self.reserved, self.seq) + self.BLOCK
            self.reserve(self.reserved)
        event = cls(
            run_id=self.run_id,
            seq=self.seq,
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
    usage: UsageTracker
    templates: dict[str, Any] = field(default_factory=dict)
    shared_state: dict[str, Any] = field(default_factory=dict)  # see adopt_state
    approvals: bool = True  # sensitive tool calls pause the run for a human decision
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)  # approval id -> decision
    pending: list[dict[str, Any]] = field(default_factory=list)  # approvals asked in this pass
    sandbox: Any = None  # teamgraph.sandbox.Sandbox, created on first use by codeact agents
    store: Any = None  # a LangGraph BaseStore for notes shared across agents and threads
    user_id: str = "default"
    path: tuple[str, ...] = ()  # team → nested team; empty means (team.name,)
    parent_id: str | None = None  # the step or agent a nested team works for
    scope: str = ""  # key prefix of ledger records; empty means run_id
    closed: bool = False  # the run row already records how this execution ended
    _tool_cache: dict[str, list[BaseTool]] = field(default_factory=dict)

    def emit(self, cls: type[E], *path: str, **fields: Any) -> E:
        base = list(self.path or (self.team.name,))
        return self.emitter.emit(cls, [*base, *path], parent_id=self.parent_id, **fields)

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
