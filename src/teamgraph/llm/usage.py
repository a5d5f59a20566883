"""Counting tokens and dollars per step, per agent and per run."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from langchain_core.messages import AIMessage

from teamgraph.errors import BudgetExceeded
from teamgraph.events import TokenUsage
from teamgraph.llm.pricing import PriceTable
from teamgraph.specs.team import Budget


class UsageTracker:
    """Adds up usage from model replies; attributes it to agents and steps. Steps are keyed by
    their path through nested teams (``delegate/answer``: step ``answer`` of the team working for
    step ``delegate``), so a nested team's work counts for the step it works for too."""

    def __init__(self, prices: PriceTable, budget: Budget | None = None) -> None:
        self.prices = prices
        self.budget = budget or Budget()
        self.by_agent: dict[str, TokenUsage] = defaultdict(TokenUsage)
        self.by_step: dict[str, TokenUsage] = defaultdict(TokenUsage)
        self.total = TokenUsage()
        self.model_calls = 0  # calls admitted so far (counted when they start)
        self.exceeded: BudgetExceeded | None = None

    def admit(self) -> None:
        """Count one model call about to start, or raise :class:`BudgetExceeded` if the run has
        reached a limit (calls are counted when admitted, so parallel branches cannot overrun
        ``max_model_calls``; tokens and dollars are known only after a call returns)."""
        b, t = self.budget, self.total
        if b.max_model_calls is not None and self.model_calls >= b.max_model_calls:
            self._over("max_model_calls", b.max_model_calls, self.model_calls)
        if b.max_tokens is not None and t.total_tokens >= b.max_tokens:
            self._over("max_tokens", b.max_tokens, t.total_tokens)
        if b.max_usd is not None and t.cost_usd >= b.max_usd:
            self._over("max_usd", b.max_usd, round(t.cost_usd, 6))
        self.model_calls += 1

    def _over(self, limit: str, allowed: float, reached: float) -> None:
        self.exceeded = BudgetExceeded(limit, allowed, reached)
        raise self.exceeded

    def measure(self, model: str, reply: AIMessage) -> TokenUsage:
        """What ``reply`` cost: the provider's token counts, priced by the price table."""
        meta = reply.usage_metadata
        i = meta["input_tokens"] if meta else 0
        o = meta["output_tokens"] if meta else 0
        return TokenUsage(input_tokens=i, output_tokens=o, cost_usd=self.prices.cost(model, i, o))

    def add(self, agent: str, steps: Sequence[str], usage: TokenUsage) -> None:
        """Charge ``usage`` to ``agent``, to every step in ``steps`` (a step and the steps that
        enclose it, for a nested team's work) and to the run."""
        self.by_agent[agent] = self.by_agent[agent] + usage
        for step in steps:
            self.by_step[step] = self.by_step[step] + usage
        self.total = self.total + usage
