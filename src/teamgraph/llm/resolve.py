"""Turn ``provider:model`` strings into LangChain chat models."""

from __future__ import annotations

import importlib.util
from typing import Any

from langchain_core.language_models import BaseChatModel

from teamgraph.config import DEFAULT_TIMEOUT_S, ProviderSettings, Settings
from teamgraph.errors import ModelConfigError

# provider -> (python module it needs, teamgraph extra that installs it)
PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": ("langchain_openai", "openai"),
    "anthropic": ("langchain_anthropic", "anthropic"),
    "ollama": ("langchain_ollama", "ollama"),
}


def is_offline(name: str) -> bool:
    """Whether the model called ``name`` is the built-in offline model."""
    return name == "offline" or name.startswith("offline:")


def resolve_model(name: str, settings: Settings | None = None, **kwargs: Any) -> BaseChatModel:
    """``offline`` → the built-in offline model; ``openai:gpt-4o``, ``anthropic:…``, ``ollama:…`` →
    LangChain's ``init_chat_model``. For an OpenAI-compatible endpoint use ``openai:<model>`` with
    ``base_url`` in the kwargs or ``OPENAI_BASE_URL`` set."""
    settings = settings or Settings()
    if is_offline(name):
        from teamgraph.llm.offline import OfflineChatModel

        return OfflineChatModel(**kwargs)
    provider, sep, model = name.partition(":")
    if not sep or not model:
        raise ModelConfigError(
            f"model {name!r}: expected 'provider:model' (e.g. 'openai:gpt-4o-mini') or 'offline'"
        )
    if provider not in PROVIDERS:
        raise ModelConfigError(
            f"model {name!r}: unknown provider {provider!r}; "
            f"known providers: {', '.join(sorted(PROVIDERS))}, offline"
        )
    module, extra = PROVIDERS[provider]
    if importlib.util.find_spec(module) is None:
        raise ModelConfigError(
            f"model {name!r} needs the {module.replace('_', '-')} package: "
            f'pip install "teamgraph[{extra}]"'
        )
    options = settings.provider(name)
    return _init_chat_model(f"{provider}:{model}", **{**client_kwargs(provider, options), **kwargs})


def client_kwargs(provider: str, options: ProviderSettings) -> dict[str, Any]:
    """The LangChain chat model's arguments for ``options``. The clients' own retries are off:
    teamgraph's model-call path retries, so one policy (classification, ``Retry-After``,
    backoff, limits) holds for every provider."""
    timeout = options.timeout_s or DEFAULT_TIMEOUT_S
    out: dict[str, Any] = {}
    if options.base_url:
        out["base_url"] = options.base_url
    if provider == "ollama":
        out["client_kwargs"] = {"timeout": timeout}
    else:
        out |= {"timeout": timeout, "max_retries": 0, "stream_usage": True}
        if options.api_key:
            out["api_key"] = options.api_key
    if options.streaming is False:
        out["disable_streaming"] = True
    return {**out, **options.kwargs}


def _init_chat_model(model: str, **kwargs: Any) -> BaseChatModel:
    """The single door to real providers (tests close it in ``conftest.py``)."""
    from langchain.chat_models import init_chat_model

    return init_chat_model(model, **kwargs)  # type: ignore[no-any-return]
