"""What the app holds while it runs: settings, the storage backend, the teams it serves."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from teamgraph.config import Settings
from teamgraph.errors import SpecError
from teamgraph.runtime.backend import Backend
from teamgraph.runtime.team_api import Team
from teamgraph.server.credentials import Authenticator

if TYPE_CHECKING:
    from teamgraph.server.ops import Metrics
    from teamgraph.server.run_manager import RunManager


@dataclass
class AppState:
    """The app's services, typed: every route and the run manager reach them here."""

    settings: Settings
    backend: Backend
    teams: dict[str, Team]
    sessions: async_sessionmaker[AsyncSession]
    metrics: Metrics
    runs: RunManager = field(init=False)  # set once the state exists (the manager holds it)
    authenticator: Authenticator = field(init=False)  # who calls: tokens and API keys

    def __post_init__(self) -> None:
        self.authenticator = Authenticator(self.settings.jwt_secret, self.backend.direct)

    def team(self, name: str) -> Team:
        if name not in self.teams:
            raise KeyError(name)
        return self.teams[name]


def load_teams(settings: Settings) -> dict[str, Team]:
    """Every ``*.yaml`` team in ``settings.teams_dirs`` (later folders override earlier)."""
    teams: dict[str, Team] = {}
    for folder in settings.teams_dirs:
        path = Path(folder)
        if not path.is_dir():
            raise SpecError(f"teams folder {folder!r} does not exist")
        for file in sorted(path.glob("*.y*ml")):
            team = Team.from_yaml(file, settings=settings)
            teams[team.spec.name] = team
    return teams
