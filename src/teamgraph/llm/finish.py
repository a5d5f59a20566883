"""Why a model stopped, in one vocabulary whatever the provider said: ``stop``, ``length``
(cut by the output limit), ``tool_calls``, ``content_filter``, ``refusal`` (or the provider's
own word when it is none of these; empty when it said nothing)."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from teamgraph.errors import ModelCallFailed

_WORDS = {
    "stop": "stop",  # OpenAI, Ollama
    "end_turn": "stop",  # Anthropic
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "length": "length",  # OpenAI, Ollama
    "max_tokens": "length",  # Anthropic
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "refusal",
}
DECLINED = ("refusal", "content_filter")


def stop_reason(reply: AIMessage) -> str:
    """Why ``reply`` ended (see the module's docstring)."""
    if reply.additional_kwargs.get("refusal"):
        return "refusal"
    meta = reply.response_metadata
    said = meta.get("finish_reason") or meta.get("stop_reason") or meta.get("done_reason") or ""
    return _WORDS.get(str(said), str(said))


def check_declined(reply: AIMessage, model: str) -> None:
    """Raise :class:`ModelCallFailed` when the model declined to answer (a refusal, a content
    filter) and gave nothing else: the step fails with the model's words, not an empty answer."""
    reason = stop_reason(reply)
    if reason not in DECLINED or reply.tool_calls:
        return
    said = str(reply.additional_kwargs.get("refusal") or reply.text or "").strip()
    raise ModelCallFailed(f"{model} declined to answer ({reason})" + (f": {said}" if said else ""))
