"""``stock_quote``: latest (delayed) stock quote from Stooq's public, keyless CSV endpoint."""

from __future__ import annotations

import csv
import io
import re
from urllib.parse import quote

import httpx
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, Field

from teamgraph.tools._http import guarded, http_client, online_tool

STOOQ_URL = "https://stooq.com/q/l/"
DESCRIPTION = (
    "Latest stock market price quote (today or the last trading day) for the shares of a "
    "company by ticker symbol, e.g. AAPL, MSFT, or with a market suffix such as 7203.jp or "
    "vod.uk: last price, open, high, low and volume. Symbols without a suffix are US listings."
)
_FIELDS = (("Open", "open"), ("High", "high"), ("Low", "low"), ("Volume", "volume"))
_SYMBOL = re.compile(r"\^?[a-z0-9][a-z0-9.\-_=]{0,19}")


class StockQuoteInput(BaseModel):
    """Arguments of the ``stock_quote`` tool."""

    symbol: str = Field(description="Ticker symbol, e.g. 'AAPL', 'msft', '7203.jp', '^spx'.")


def stooq_symbol(symbol: str) -> str:
    """Stooq's name for ``symbol``: lower case, ``.us`` added unless a market suffix is given
    (indices such as ``^spx`` are kept as they are)."""
    name = symbol.strip().lower()
    if not _SYMBOL.fullmatch(name):
        raise ToolException(f"invalid ticker symbol {symbol!r}")
    return name if "." in name or name.startswith("^") else f"{name}.us"


def stooq_url(symbol: str) -> str:
    """The CSV quote URL (symbol, date, time, open, high, low, close, volume, with a header)."""
    return f"{STOOQ_URL}?s={quote(symbol)}&f=sd2t2ohlcv&h&e=csv"


def parse_quote(text: str, symbol: str) -> str:
    """Render Stooq's CSV answer; ``N/D`` (no data) rows mean the symbol is unknown."""
    rows = list(csv.DictReader(io.StringIO(text.strip())))
    if not rows or "Close" not in rows[0]:
        raise ToolException(f"unexpected response from Stooq: {text.strip()[:120]!r}")
    row = {key: (value or "").strip() for key, value in rows[0].items() if key}
    if row["Close"] in ("", "N/D"):
        raise ToolException(f"no quote found for {symbol.upper()}")
    when = f"{row.get('Date', '')} {row.get('Time', '')}".strip()
    parts = [f"{label} {row[key]}" for key, label in _FIELDS if row.get(key) not in ("", "N/D")]
    return (
        f"{row.get('Symbol') or symbol.upper()}: last {row['Close']} ({when}); "
        + ", ".join(parts)
        + ". Source: Stooq (delayed quote)."
    )


def make_stock_quote_tool(
    transport: httpx.AsyncBaseTransport | None = None, timeout_s: float = 10
) -> BaseTool:
    """Build ``stock_quote``; ``transport`` replaces the network (tests use ``MockTransport``)."""

    async def stock_quote(symbol: str) -> str:
        name = stooq_symbol(symbol)
        async with http_client(transport, timeout_s) as client:
            return await guarded(_fetch(client, name), timeout_s, "Stooq")

    return online_tool("stock_quote", DESCRIPTION, StockQuoteInput, stock_quote)


async def _fetch(client: httpx.AsyncClient, name: str) -> str:
    response = await client.get(stooq_url(name))
    response.raise_for_status()
    return parse_quote(response.text, name)
