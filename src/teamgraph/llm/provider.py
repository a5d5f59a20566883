"""Which chat model each role of a team uses: overrides first, then the spec's model strings."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel

from teamgraph.config import ProviderSettings, Settings
from teamgraph.llm import provider_limits
from teamgraph.llm.resolve import resolve_model
from teamgraph.specs.agent import AgentSpec
from teamgraph.specs.team import TeamSpec
from teamgraph.storage.rates import SharedRates


class ModelProvider:
    """Resolves and caches models. ``overrides`` maps a role (agent name, ``planner``,
    ``synthesizer``) to a model instance; ``default`` replaces every unmapped role's model;
    ``stand_in`` is returned for every model named in a spec (with its name, for prices);
    ``rates``: where the providers' rates are kept when several processes share them."""

    def __init__(
        self,
        settings: Settings,
        overrides: Mapping[str, BaseChatModel] | None = None,
        default: BaseChatModel | None = None,
        stand_in: BaseChatModel | None = None,
        rates: SharedRates | None = None,
    ) -> None:
        self.settings = settings
        self.rates = rates  # the rates every process on the database shares (PostgreSQL)
        self.overrides = dict(overrides or {})
        self.default = default
        self.stand_in = stand_in  # used instead of building a model by name (a replayed run)
        self._cache: dict[str, BaseChatModel] = {}
        self._options: dict[str, ProviderSettings] = {}

    def for_agent(self, team: TeamSpec, agent: AgentSpec) -> tuple[BaseChatModel, str]:
        if agent.model is None:
            return self.for_role(agent.name, team.model, team.model_kwargs)
        return self.for_role(agent.name, agent.model, agent.model_kwargs)

    def for_role(
        self, role: str, name: str | None, kwargs: Mapping[str, Any]
    ) -> tuple[BaseChatModel, str]:
        """The model for ``role`` and the name its price is looked up by."""
        override = self.overrides.get(role) or self.default
        if override is not None:
            return override, str(getattr(override, "model_name", type(override).__name__))
        name = name or self.settings.default_model
        if self.stand_in is not None:
            return self.stand_in, name
        key = name + json.dumps(dict(kwargs), sort_keys=True, default=str)
        if key not in self._cache:
            self._cache[key] = resolve_model(name, self.settings, **dict(kwargs))
        return self._cache[key], name

    def limits_for(self, model: str) -> provider_limits.ProviderLimits | None:
        """The limits a call of ``model`` passes (``None``: none set). A model with an entry of
        its own in ``providers`` has its own limits; others share their provider's."""
        options = self._options.get(model)
        if options is None:
            options = self._options[model] = self.settings.provider(model)
        if options.max_concurrency is None and not (
            options.requests_per_minute or options.tokens_per_minute
        ):
            return None
        shared = model if model in self.settings.providers else model.partition(":")[0]
        return provider_limits.limits_for(shared, options, self.rates)
