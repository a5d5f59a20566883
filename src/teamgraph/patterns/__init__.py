"""Orchestration patterns: each module's :data:`PATTERN` (a
:class:`~teamgraph.patterns.contract.Pattern`) builds a compiled LangGraph graph with
:class:`~teamgraph.run_context.RunContext` as its runtime context, says what a new run's input is,
and folds the graph's state into an :class:`~teamgraph.patterns.contract.Outcome`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from teamgraph.patterns import collaborative, single, supervisor, swarm, workflow
from teamgraph.patterns.contract import Graph, Pattern
from teamgraph.specs.team import TeamSpec

PATTERNS: dict[str, Pattern] = {
    p.name: p
    for p in (
        workflow.PATTERN,
        supervisor.PATTERN,
        swarm.PATTERN,
        collaborative.PATTERN,
        single.PATTERN,
    )
}


def pattern_of(team: TeamSpec) -> Pattern:
    """The team's pattern; with ``clarify``, its graph runs behind the clarification gate."""
    pattern = PATTERNS[team.pattern]
    if not team.clarify:
        return pattern
    from teamgraph.patterns.moderator import behind_clarification

    return replace(
        pattern,
        build=lambda spec, saver: behind_clarification(spec, pattern.build(spec, None), saver),
        supersteps=lambda spec: pattern.supersteps(spec) + 2,
    )


def build(team: TeamSpec, checkpointer: BaseCheckpointSaver[Any] | None = None) -> Graph:
    """The compiled graph of ``team``'s pattern (a nested team compiles without a checkpointer
    and so inherits its parent's)."""
    return pattern_of(team).build(team, checkpointer)
