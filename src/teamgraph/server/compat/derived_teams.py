"""Teams derived for the compatibility chats' modes: one agent of a team alone, a subset of its
members, the workflow team. A derived team is served under ``<team>:<how>`` (made once, on the
base team's settings, models and tools)."""

from __future__ import annotations

from teamgraph.server.state import AppState
from teamgraph.specs.agent import AgentSpec
from teamgraph.specs.team import TeamSpec
from teamgraph.storage.models import SessionRow


def workflow_team(state: AppState, session: SessionRow) -> str:
    """The session's team when it is a workflow team, else the first workflow team served."""
    if state.teams[session.team].spec.pattern == "workflow":
        return session.team
    return next(n for n, t in state.teams.items() if t.spec.pattern == "workflow")


def single_team(state: AppState, base: str, agent: str | None = None) -> str:
    """``agent`` of ``base`` alone (default: its first agent)."""
    spec = state.teams[base].spec
    members = [m for m in spec.members if isinstance(m, AgentSpec)]
    chosen = next((m for m in members if m.name == agent), members[0] if members else None)
    if chosen is None or (spec.pattern == "single" and len(spec.members) == 1):
        return base  # already one agent: keep the team as it is (questions, approvals)
    single = spec.model_copy(update={"pattern": "single", "members": [chosen], "clarify": False})
    return _derived(state, base, f"single-{chosen.name}", single)


def filtered_team(state: AppState, base: str, include: list[str], exclude: list[str]) -> str:
    """``base`` with the members of ``include`` (all when empty) but those of ``exclude``."""
    spec = state.teams[base].spec
    members = [
        m for m in spec.members if (not include or m.name in include) and m.name not in exclude
    ]
    if not members or len(members) == len(spec.members):
        return base
    key = "only-" + "-".join(sorted(m.name for m in members))
    workflow = spec.workflow.model_copy(update={"default_worker": None})
    return _derived(
        state, base, key, spec.model_copy(update={"members": members, "workflow": workflow})
    )


def _derived(state: AppState, base: str, suffix: str, spec: TeamSpec) -> str:
    name = f"{base}:{suffix}"
    if name not in state.teams:
        state.teams[name] = state.teams[base].derive(spec.model_copy(update={"name": name}))
    return name
