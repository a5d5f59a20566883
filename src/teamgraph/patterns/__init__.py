"""Orchestration patterns; each module's ``build(team, checkpointer)`` returns a compiled
LangGraph graph with :class:`~teamgraph.run_context.RunContext` as its runtime context."""

from __future__ import annotations

import importlib
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from teamgraph.specs.team import TeamSpec

PATTERNS = ("workflow", "supervisor", "swarm", "collaborative", "single")


def build(
    team: TeamSpec, checkpointer: BaseCheckpointSaver[Any] | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The compiled graph of ``team``'s pattern (a nested team compiles without a checkpointer
    and so inherits its parent's)."""
    module = importlib.import_module(f"teamgraph.patterns.{team.pattern}")
    if not team.clarify:
        graph: CompiledStateGraph[Any, Any, Any, Any] = module.build(team, checkpointer)
        return graph
    from teamgraph.patterns.moderator import gate

    return gate(team, module.build(team, None), checkpointer)
