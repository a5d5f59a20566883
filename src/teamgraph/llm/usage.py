"""Counting tokens and dollars per step, per agent and per run."""

from __future__ import annotations

from collections import defaultdict

from langchain_core.messages import AIMessage

from teamgraph.events import TokenUsage
from teamgraph.llm.pricing import PriceTable


class UsageTracker:
    """Adds up usage from model replies; attributes it to agents and steps."""

    def __init__(self, prices: PriceTable) -> None:
        self.prices = prices
        self.by_agent: dict[str, TokenUsage] = defaultdict(TokenUsage)
        self.by_step: dict[str, TokenUsage] = defaultdict(TokenUsage)
        self.total = TokenUsage()

    def record(self, agent: str, step_id: str | None, model: str, reply: AIMessage) -> TokenUsage:
        meta = reply.usage_metadata
        i = meta["input_tokens"] if meta else 0
        o = meta["output_tokens"] if meta else 0
        usage = TokenUsage(input_tokens=i, output_tokens=o, cost_usd=self.prices.cost(model, i, o))
        self.add(agent, step_id, usage)
        return usage

    def add(self, agent: str, step_id: str | None, usage: TokenUsage) -> None:
        self.by_agent[agent] = self.by_agent[agent] + usage
        if step_id is not None:
            self.by_step[step_id] = self.by_step[step_id] + usage
        self.total = self.total + usage
