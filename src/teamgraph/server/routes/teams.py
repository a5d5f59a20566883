"""What the service can run: teams, their agents, workflow templates."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status

from teamgraph.planning.templates import BUILTIN_TEMPLATES_DIR, load_templates
from teamgraph.server.deps import CurrentUser, State
from teamgraph.server.schemas import TeamOut, TemplateOut

router = APIRouter(prefix="/api/v1", tags=["teams"])


@router.get("/teams", response_model=list[TeamOut])
async def list_teams(state: State, _user: CurrentUser) -> list[TeamOut]:
    return [
        TeamOut(
            name=name,
            description=team.spec.description,
            pattern=team.spec.pattern,
            members=[{"name": m.name, "description": m.description} for m in team.spec.members],
            budget=team.spec.budget.model_dump(exclude_none=True) or None,
        )
        for name, team in state.teams.items()
    ]


@router.get("/teams/{team}/agents", response_model=list[dict[str, object]])
async def list_agents(team: str, state: State, _user: CurrentUser) -> list[dict[str, object]]:
    if team not in state.teams:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Team not found")
    return [m.model_dump(mode="json") for m in state.teams[team].spec.members]


@router.get("/templates", response_model=list[TemplateOut])
async def list_templates(state: State, _user: CurrentUser) -> list[TemplateOut]:
    found = load_templates([BUILTIN_TEMPLATES_DIR, *state.settings.templates_dirs])
    return [TemplateOut(name=t.name, description=t.description) for t in found.values()]
