"""Pure data describing agents and teams (no IO beyond the YAML loader)."""

from teamgraph.specs.agent import AgentSpec
from teamgraph.specs.team import TeamSpec, WorkflowOptions

__all__ = ["AgentSpec", "TeamSpec", "WorkflowOptions"]
