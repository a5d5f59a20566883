"""Conversation history handed to agents, trimmed to the team's token budget."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, trim_messages
from langchain_core.messages.utils import count_tokens_approximately


def trimmed_history(messages: Sequence[BaseMessage], budget: int) -> list[BaseMessage]:
    """The latest turns within ``budget`` approximate tokens, starting on a user message (so no
    tool result is cut from its call); system messages are kept."""
    if not messages:
        return []
    kept: list[BaseMessage] = trim_messages(
        list(messages),
        max_tokens=budget,
        strategy="last",
        token_counter=count_tokens_approximately,
        include_system=True,
        start_on="human",
        allow_partial=False,
    )
    return kept
