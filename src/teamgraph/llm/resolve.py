"""Turn ``provider:model`` strings into LangChain chat models."""

from __future__ import annotations

import importlib.util
from typing import Any

from langchain_core.language_models import BaseChatModel

from teamgraph.config import Settings
from teamgraph.errors import ModelConfigError

# provider -> (python module it needs, teamgraph extra that installs it)
PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": ("langchain_openai", "openai"),
    "anthropic": ("langchain_anthropic", "anthropic"),
    "ollama": ("langchain_ollama", "ollama"),
}


def resolve_model(name: str, settings: Settings | None = None, **kwargs: Any) -> BaseChatModel:
    """``offline`` → the built-in offline model; ``openai:gpt-4o``, ``anthropic:…``, ``ollama:…`` →
    LangChain's ``init_chat_model``. For an OpenAI-compatible endpoint use ``openai:<model>`` with
    ``base_url`` in the kwargs or ``OPENAI_BASE_URL`` set."""
    settings = settings or Settings()
    if name == "offline" or name.startswith("offline:"):
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
    if provider == "openai":
        kwargs = _openai_defaults(settings, kwargs)
    return _init_chat_model(f"{provider}:{model}", **kwargs)


def _openai_defaults(settings: Settings, kwargs: dict[str, Any]) -> dict[str, Any]:
    out = dict(kwargs)
    if settings.openai_base_url and "base_url" not in out:
        out["base_url"] = settings.openai_base_url
    if settings.openai_api_key and "api_key" not in out:
        out["api_key"] = settings.openai_api_key
    out.setdefault("stream_usage", True)
    return out


def _init_chat_model(model: str, **kwargs: Any) -> BaseChatModel:
    """The single door to real providers (tests close it in ``conftest.py``)."""
    from langchain.chat_models import init_chat_model

    return init_chat_model(model, **kwargs)  # type: ignore[no-any-return]
