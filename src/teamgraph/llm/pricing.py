"""USD per million tokens, per model; the table is configurable and the offline model is free."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from teamgraph.errors import SpecError


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


# Public list prices (USD / 1M tokens) at the time of writing; override with a prices file.
DEFAULT_PRICES: dict[str, Price] = {
    "offline": Price(0.0, 0.0),
    "openai:gpt-4o": Price(2.50, 10.00),
    "openai:gpt-4o-mini": Price(0.15, 0.60),
    "openai:gpt-4.1": Price(2.00, 8.00),
    "openai:gpt-4.1-mini": Price(0.40, 1.60),
    "openai:o4-mini": Price(1.10, 4.40),
    "anthropic:claude-sonnet-4-5": Price(3.00, 15.00),
    "anthropic:claude-opus-4-1": Price(15.00, 75.00),
    "anthropic:claude-haiku-4-5": Price(1.00, 5.00),
}


class PriceTable:
    """Looks a model up by its full ``provider:model`` name, then by its bare model name;
    ``ollama:*`` models are free; unknown models cost 0 (and are reported as unpriced)."""

    def __init__(self, prices: dict[str, Price] | None = None) -> None:
        self.prices = dict(DEFAULT_PRICES if prices is None else prices)

    @classmethod
    def load(cls, path: Path | None) -> PriceTable:
        table = cls()
        if path is not None:
            table.prices.update(_read_prices(path))
        return table

    def price(self, model: str) -> Price | None:
        if model in self.prices:
            return self.prices[model]
        if model.startswith("ollama:") or model.startswith("offline"):
            return Price(0.0, 0.0)
        bare = model.split(":", 1)[-1]
        for name, price in self.prices.items():
            if name.split(":", 1)[-1] == bare:
                return price
        return None

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float:
        price = self.price(model)
        return price.cost(input_tokens, output_tokens) if price else 0.0


def _read_prices(path: Path) -> dict[str, Price]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SpecError(f"{path}: cannot read price table: {exc}") from None
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: expected a mapping of model name to prices")
    prices: dict[str, Price] = {}
    for model, entry in raw.items():
        try:
            prices[str(model)] = Price(
                float(entry["input_per_mtok"]), float(entry["output_per_mtok"])
            )
        except (KeyError, TypeError, ValueError):
            raise SpecError(
                f"{path}: {model}: expected input_per_mtok and output_per_mtok numbers, "
                f"got {entry!r}"
            ) from None
    return prices
