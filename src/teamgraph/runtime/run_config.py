"""How a team is set up to run, bundled once: :class:`RunConfig`; and what plugs into every run
it makes: :class:`RunHooks`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from langchain_core.language_models import BaseChatModel

from teamgraph.config import Settings
from teamgraph.events import BaseEvent
from teamgraph.tools.registry import ToolRegistry, builtin_registry


@dataclass(frozen=True)
class RunConfig:
    """Run-wide settings of a team: settings, model overrides, tools and the user it runs for.

    ``models`` maps a role (an agent's name, ``planner``, ``synthesizer``, ``supervisor``,
    ``moderator``) to a chat model instance; ``model`` replaces every other role's model
    (handy with :mod:`teamgraph.testing`). ``user_id`` owns runs by default and namespaces shared
    notes."""

    settings: Settings = field(default_factory=Settings)
    models: Mapping[str, BaseChatModel] = field(default_factory=dict)
    model: BaseChatModel | None = None
    registry: ToolRegistry = field(default_factory=builtin_registry)
    user_id: str = "default"


class RunHooks(Protocol):
    """What plugs into every run of a runner (the server's event log, metrics, ...)."""

    def on_event(self, event: BaseEvent) -> None:
        """Every event, as it is emitted — also those a run emits after its stream's consumer
        stopped reading (a cancelled run's end)."""
