"""The Python API: ``Team.from_yaml(path)``, ``await team.run(...)``, ``team.stream(...)``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool

from teamgraph.config import Settings
from teamgraph.events import Event
from teamgraph.result import RunResult
from teamgraph.runtime.backend import open_backend
from teamgraph.runtime.run_config import RunConfig
from teamgraph.runtime.runner import Runner
from teamgraph.specs.loader import check_tools, load_team_file, team_from_dict
from teamgraph.specs.team import TeamSpec
from teamgraph.tools.registry import ToolRegistry, builtin_registry


class Team:
    """A team spec plus what it needs to run, its :class:`RunConfig`: settings, models, tools
    (``tools`` adds Python tools, e.g. ``@tool`` functions, that members name in their
    ``tools``), and the user it runs for.

    ``models`` maps a role (an agent's name, ``planner``, ``synthesizer``, ``supervisor``,
    ``moderator``) to a chat model instance; ``model`` replaces every other role's model (handy
    with :mod:`teamgraph.testing`)."""

    def __init__(
        self,
        spec: TeamSpec,
        *,
        settings: Settings | None = None,
        models: Mapping[str, BaseChatModel] | None = None,
        model: BaseChatModel | None = None,
        registry: ToolRegistry | None = None,
        tools: Sequence[BaseTool] = (),
        user_id: str = "default",
    ) -> None:
        registry = registry or builtin_registry()
        for tool in tools:  # Python tools (e.g. ``@tool`` functions), referenced by name
            registry.add(tool)
        check_tools(spec, registry.names(), spec.name)
        self.spec = spec
        self.config = RunConfig(settings or Settings(), models or {}, model, registry, user_id)

    @property
    def settings(self) -> Settings:
        return self.config.settings

    @classmethod
    def from_yaml(cls, path: str | Path, **options: Any) -> Team:
        registry = options.get("registry") or builtin_registry()
        known = [*registry.names(), *(t.name for t in options.get("tools", ()))]
        return cls(load_team_file(path, known), **{**options, "registry": registry})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], **options: Any) -> Team:
        return cls(team_from_dict(data), **options)

    def derive(self, spec: TeamSpec) -> Team:
        """Another team set up to run as this one is (same settings, models, tools, user)."""
        derived = Team.__new__(Team)
        derived.spec, derived.config = spec, self.config
        return derived

    @asynccontextmanager
    async def runner(self) -> AsyncIterator[Runner]:
        """A runner with its storage open, for several calls in a row."""
        async with open_backend(self.settings) as backend:
            yield Runner(self.spec, backend, self.config)

    async def run(self, request: str, **options: Any) -> RunResult:
        """Run the team on ``request`` to the end (options: thread_id, run_id, template, plan)."""
        async with self.runner() as runner:
            return await runner.run(request, **options)

    async def stream(self, request: str, **options: Any) -> AsyncIterator[Event]:
        """Run the team and yield every event as it happens."""
        async with self.runner() as runner, aclosing(runner.stream(request, **options)) as events:
            async for event in events:
                yield event

    async def resume(self, run_id: str, **reply: Any) -> RunResult:
        """Finish an interrupted or paused run without re-running its finished steps
        (``reply``: ``answer``, or ``decisions``/``default`` for pending tool calls)."""
        async with self.runner() as runner:
            return await runner.resume(run_id, **reply)
