"""The online tools — ``http_get``, ``web_search``, ``weather``, ``stock_quote`` — and the HTTP
plumbing they share.

Online tools never raise to their caller: failures become a :class:`ToolException` whose message
starts with the reason (``network unavailable: …``, ``timed out after 10 s``, ``HTTP 404 Not
Found …``). The tools are built with ``handle_tool_error=True``, so LangChain returns that
message as the tool's result (a ``ToolMessage`` with ``status="error"`` inside an agent).
"""

from __future__ import annotations

import asyncio
import csv
import importlib
import io
import os
import re
from collections.abc import Awaitable, Callable, Collection, Coroutine
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from typing import Any, NamedTuple, ParamSpec, TypeVar
from urllib.parse import quote

import httpx
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field, ValidationError

# --- the HTTP plumbing the online tools share ----------------------------------------------
USER_AGENT = "teamgraph-tools/0.1 (multi-agent assistant; +https://pypi.org/project/teamgraph/)"
P = ParamSpec("P")
T = TypeVar("T")


def bad_arguments(exc: ValidationError) -> str:
    """The tool message for arguments that do not fit the tool's schema."""
    problems = "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors()
    )
    return f"invalid arguments: {problems}"


# keyword arguments of StructuredTool.from_function: tools report errors as text, never raise
ERROR_HANDLING: dict[str, Any] = {
    "handle_tool_error": True,
    "handle_validation_error": bad_arguments,
}


def http_client(transport: httpx.AsyncBaseTransport | None, timeout_s: float) -> httpx.AsyncClient:
    """An ``AsyncClient`` with teamgraph's User-Agent, a timeout and redirects followed."""
    headers = {"User-Agent": USER_AGENT}
    return httpx.AsyncClient(
        transport=transport, timeout=timeout_s, follow_redirects=True, headers=headers
    )


def describe_failure(exc: BaseException, timeout_s: float) -> str:
    """The tool message for a failed request, starting with its reason."""
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return f"timed out after {timeout_s:g} s"
    if isinstance(exc, httpx.HTTPStatusError):
        response = exc.response
        return f"HTTP {response.status_code} {response.reason_phrase} from {response.url.host}"
    if isinstance(exc, httpx.NetworkError | httpx.ProxyError | OSError):
        return f"network unavailable: {str(exc) or type(exc).__name__}"
    return f"request failed: {str(exc) or type(exc).__name__}"


async def guarded(call: Awaitable[T], timeout_s: float, service: str) -> T:
    """Await ``call`` within ``timeout_s``; turn network and parsing failures into tool errors."""
    try:
        async with asyncio.timeout(timeout_s):
            return await call
    except (httpx.HTTPError, OSError) as exc:  # TimeoutError is an OSError
        raise ToolException(describe_failure(exc, timeout_s)) from None
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ToolException(f"unexpected response from {service}: {exc!r}") from None


async def get_json(client: httpx.AsyncClient, url: str, params: dict[str, Any]) -> Any:
    """GET ``url`` and decode its JSON body, raising ``HTTPStatusError`` on 4xx/5xx."""
    response = await client.get(url, params=params)
    response.raise_for_status()
    return response.json()


def online_tool(
    name: str,
    description: str,
    schema: type[BaseModel],
    coroutine: Callable[P, Coroutine[Any, Any, str]],
) -> BaseTool:
    """An async ``StructuredTool`` (plus a blocking twin for ``invoke``) giving errors as text."""

    def blocking(*args: P.args, **kwargs: P.kwargs) -> str:
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, coroutine(*args, **kwargs)).result()

    return StructuredTool.from_function(
        func=blocking,
        coroutine=coroutine,
        name=name,
        description=description,
        args_schema=schema,
        **ERROR_HANDLING,
    )


# --- http_get: fetch a URL and return its status, content type and readable text.
HTTP_GET_DESCRIPTION = (
    "Fetch a web page or URL (http/https) and return its status, content type and readable "
    "text (HTML converted to plain text, long pages truncated). Use it to read a given link, "
    "article or API endpoint."
)
_SKIP = {"script", "style", "noscript", "template", "svg"}
_BLOCK = set(
    "p div br li tr h1 h2 h3 h4 h5 h6 title section article header footer main aside nav "
    "ul ol dl dt dd table pre blockquote hr form".split()
)
_TEXTUAL = ("text/", "json", "xml", "javascript", "html")


class HttpGetInput(BaseModel):
    """Arguments of the ``http_get`` tool."""

    url: str = Field(description="The full http:// or https:// address to fetch.")


def make_http_get_tool(
    allowed_hosts: Collection[str] | None = None,
    timeout_s: float = 10,
    max_bytes: int = 200_000,
    transport: httpx.AsyncBaseTransport | None = None,
) -> BaseTool:
    """Build ``http_get``. ``allowed_hosts``: exact hosts or ``*.domain`` (the domain and its
    subdomains), checked on every redirect too; ``None`` allows any host. Bodies are read up to
    ``max_bytes``; the whole request must finish within ``timeout_s`` seconds."""
    allowed = None if allowed_hosts is None else [h.strip().lower() for h in allowed_hosts]

    async def check(request: httpx.Request) -> None:
        refusal = _refusal(request.url, allowed)
        if refusal:
            raise ToolException(refusal)

    async def http_get(url: str) -> str:
        try:
            target = httpx.URL(url.strip())
        except httpx.InvalidURL as exc:
            raise ToolException(f"invalid URL {url!r}: {exc}") from None
        async with http_client(transport, timeout_s) as client:
            client.event_hooks["request"] = [check]
            return await guarded(_fetch_page(client, target, max_bytes), timeout_s, target.host)

    return online_tool("http_get", HTTP_GET_DESCRIPTION, HttpGetInput, http_get)


def _refusal(url: httpx.URL, allowed: list[str] | None) -> str | None:
    if url.scheme not in ("http", "https"):
        return f"unsupported URL {str(url)!r}: only http:// and https:// URLs can be fetched"
    host = url.host.lower().rstrip(".")
    if allowed is not None and not any(_host_matches(host, p) for p in allowed):
        return f"host {host} is not in the allow-list ({', '.join(allowed) or 'empty'})"
    return None


def _host_matches(host: str, pattern: str) -> bool:
    if pattern.startswith("*."):
        return host == pattern[2:] or host.endswith(pattern[1:])
    return host == pattern


async def _fetch_page(client: httpx.AsyncClient, url: httpx.URL, max_bytes: int) -> str:
    async with client.stream("GET", url) as response:
        response.raise_for_status()
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > max_bytes:
                break
    ctype = response.headers.get("content-type", "")
    head = f"status: {response.status_code} {response.reason_phrase}\ncontent-type: {ctype}\n"
    if len(body) > max_bytes:
        head += f"truncated: only the first {max_bytes} bytes were read\n"
    if ctype and not any(kind in ctype.lower() for kind in _TEXTUAL):
        return f"{head}\n(binary content not shown)"
    text = body[:max_bytes].decode(response.encoding or "utf-8", errors="replace")
    return f"{head}\n{html_to_text(text) if 'html' in ctype.lower() else text}"


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skipping += 1
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self._skipping = max(0, self._skipping - 1)
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> str:
    """Readable text of an HTML document: scripts and styles dropped, one block per line."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = (line.strip() for line in "".join(parser.parts).split("\n"))
    return "\n".join(line for line in lines if line)


# --- web_search: Tavily when ``TAVILY_API_KEY`` is set, else DuckDuckGo via ``ddgs``.
TAVILY_URL = "https://api.tavily.com/search"
MAX_RESULTS = 10
MAX_SNIPPET_CHARS = 400
WEB_SEARCH_DESCRIPTION = (
    "Search the web (internet) for the latest information, news, facts, people, products or "
    "pages about a query; returns numbered results with title, URL and snippet."
)


class WebSearchInput(BaseModel):
    """Arguments of the ``web_search`` tool."""

    query: str = Field(description="What to search for, as you would type it into a search box.")
    max_results: int = Field(default=5, description=f"How many results (1 to {MAX_RESULTS}).")


class SearchResult(NamedTuple):
    """One web search hit."""

    title: str
    url: str
    snippet: str


def format_results(query: str, results: list[SearchResult]) -> str:
    """Numbered ``title / url / snippet`` blocks, or a "no results" line."""
    if not results:
        return f"no web results for {query!r}"
    blocks = []
    for number, hit in enumerate(results, start=1):
        snippet = " ".join(hit.snippet.split())
        if len(snippet) > MAX_SNIPPET_CHARS:
            snippet = snippet[:MAX_SNIPPET_CHARS].rsplit(" ", 1)[0] + " …"
        blocks.append(f"{number}. {hit.title.strip() or hit.url}\n   {hit.url}\n   {snippet}")
    return "\n".join(blocks)


def make_web_search_tool(
    api_key: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    timeout_s: float = 10,
) -> BaseTool:
    """Build ``web_search``. ``api_key`` defaults to ``$TAVILY_API_KEY``, read at each call;
    ``transport`` replaces the network for Tavily (tests use ``MockTransport``)."""

    async def web_search(query: str, max_results: int = 5) -> str:
        if not query.strip():
            raise ToolException("give a search query")
        count = max(1, min(max_results, MAX_RESULTS))
        key = api_key or os.environ.get("TAVILY_API_KEY", "").strip()
        if key:
            async with http_client(transport, timeout_s) as client:
                results = await guarded(_tavily(client, query, count, key), timeout_s, "Tavily")
        else:
            results = await _duckduckgo(query, count, timeout_s)
        return format_results(query, results)

    return online_tool("web_search", WEB_SEARCH_DESCRIPTION, WebSearchInput, web_search)


async def _tavily(
    client: httpx.AsyncClient, query: str, count: int, key: str
) -> list[SearchResult]:
    body = {"query": query, "max_results": count, "search_depth": "basic"}
    headers = {"Authorization": f"Bearer {key}"}
    response = await client.post(TAVILY_URL, json=body, headers=headers)
    response.raise_for_status()
    hits: list[dict[str, Any]] = response.json()["results"]
    return [SearchResult(h.get("title", ""), h["url"], h.get("content", "")) for h in hits][:count]


async def _duckduckgo(query: str, count: int, timeout_s: float) -> list[SearchResult]:
    try:
        ddgs = importlib.import_module("ddgs")  # optional dependency, imported on first use
    except ImportError:
        raise ToolException(
            "web search unavailable: set TAVILY_API_KEY or `pip install ddgs` (DuckDuckGo)"
        ) from None

    def search() -> list[dict[str, Any]]:
        return list(ddgs.DDGS(timeout=max(1, round(timeout_s))).text(query, max_results=count))

    try:
        async with asyncio.timeout(timeout_s):
            hits = await asyncio.to_thread(search)
    except TimeoutError:
        raise ToolException(f"timed out after {timeout_s:g} s") from None
    except Exception as exc:  # ddgs raises its own exception types for network failures
        if "no results" in str(exc).lower():
            return []
        raise ToolException(f"network unavailable: DuckDuckGo search failed: {exc}") from None
    hits = hits[:count]
    return [SearchResult(h.get("title", ""), h.get("href", ""), h.get("body", "")) for h in hits]


# --- weather: current conditions and a 3-day forecast from Open-Meteo (no API key needed).
GEOCODING_URL = "https://geocoding-api.open-meteo.com/v1/search"
FORECAST_URL = "https://api.open-meteo.com/v1/forecast"
WEATHER_DESCRIPTION = (
    "Current weather today, tomorrow and the next days for a city or place: temperature (hot "
    "or cold), rain, snow, wind, humidity, clouds or sun, as a 3-day forecast. Give the place "
    "name, optionally with its country, e.g. 'Paris' or 'Paris, France'."
)
CURRENT = "temperature_2m,relative_humidity_2m,wind_speed_10m,weather_code"
DAILY = "weather_code,temperature_2m_max,temperature_2m_min"
# WMO weather interpretation codes, as documented by Open-Meteo
WMO_CODES = {
    0: "clear sky", 1: "mainly clear", 2: "partly cloudy", 3: "overcast", 45: "fog",
    48: "depositing rime fog", 51: "light drizzle", 53: "moderate drizzle", 55: "dense drizzle",
    56: "light freezing drizzle", 57: "dense freezing drizzle", 61: "slight rain",
    63: "moderate rain", 65: "heavy rain", 66: "light freezing rain", 67: "heavy freezing rain",
    71: "slight snow fall", 73: "moderate snow fall", 75: "heavy snow fall", 77: "snow grains",
    80: "slight rain showers", 81: "moderate rain showers", 82: "violent rain showers",
    85: "slight snow showers", 86: "heavy snow showers", 95: "thunderstorm",
    96: "thunderstorm with slight hail", 99: "thunderstorm with heavy hail",
}  # fmt: skip


class WeatherInput(BaseModel):
    """Arguments of the ``weather`` tool."""

    location: str = Field(description="City or place name, e.g. 'Lyon' or 'Springfield, US'.")


def describe_code(code: Any) -> str:
    """Words for a WMO weather code (``"weather code 42"`` when unknown)."""
    return WMO_CODES.get(int(code), f"weather code {code}") if code is not None else "unknown"


def make_weather_tool(
    transport: httpx.AsyncBaseTransport | None = None, timeout_s: float = 10
) -> BaseTool:
    """Build ``weather``; ``transport`` replaces the network (tests use ``MockTransport``)."""

    async def weather(location: str) -> str:
        if not location.strip():
            raise ToolException("give a city or place name")
        async with http_client(transport, timeout_s) as client:
            return await guarded(_weather(client, location), timeout_s, "Open-Meteo")

    return online_tool("weather", WEATHER_DESCRIPTION, WeatherInput, weather)


async def _weather(client: httpx.AsyncClient, location: str) -> str:
    place = await _geocode(client, location)
    params = {"latitude": place["latitude"], "longitude": place["longitude"]}
    params |= {"current": CURRENT, "daily": DAILY, "forecast_days": 3, "timezone": "auto"}
    return format_weather(place, await get_json(client, FORECAST_URL, params))


async def _geocode(client: httpx.AsyncClient, location: str) -> dict[str, Any]:
    """The best place for ``location``; ``"Paris, France"`` searches Paris, prefers France."""
    name, _, hint = (part.strip() for part in location.partition(","))
    params = {"name": name, "count": 10 if hint else 1, "language": "en", "format": "json"}
    places: list[dict[str, Any]] = (await get_json(client, GEOCODING_URL, params)).get("results")
    if not places:
        raise ToolException(f"unknown place {location!r}: no location matches that name")
    wanted = hint.lower()
    fields = ("country", "country_code", "admin1")
    matching = [p for p in places if any(str(p.get(f, "")).lower() == wanted for f in fields)]
    return (matching or places)[0]


def format_weather(place: dict[str, Any], data: dict[str, Any]) -> str:
    """Readable weather report from Open-Meteo's geocoding and forecast answers."""
    where = ", ".join(str(place[k]) for k in ("name", "admin1", "country") if place.get(k))
    now, units = data["current"], data.get("current_units", {})
    lines = [
        f"Weather for {where} (lat {place['latitude']:.2f}, lon {place['longitude']:.2f}), "
        f"local time {now.get('time', '?')}:",
        f"now: {describe_code(now.get('weather_code'))}, "
        f"{now['temperature_2m']} {units.get('temperature_2m', '°C')}, "
        f"humidity {now.get('relative_humidity_2m', '?')} %, "
        f"wind {now.get('wind_speed_10m', '?')} {units.get('wind_speed_10m', 'km/h')}",
    ]
    daily, unit = data.get("daily", {}), data.get("daily_units", {}).get("temperature_2m_max", "°C")
    for day, code, high, low in zip(
        daily.get("time", []),
        daily.get("weather_code", []),
        daily.get("temperature_2m_max", []),
        daily.get("temperature_2m_min", []),
        strict=False,
    ):
        lines.append(f"{day}: {describe_code(code)}, {low} to {high} {unit}")
    return "\n".join(lines)


# --- stock_quote: latest (delayed) stock quote from Stooq's public, keyless CSV endpoint.
STOOQ_URL = "https://stooq.com/q/l/"
STOCK_QUOTE_DESCRIPTION = (
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
            return await guarded(_fetch_quote(client, name), timeout_s, "Stooq")

    return online_tool("stock_quote", STOCK_QUOTE_DESCRIPTION, StockQuoteInput, stock_quote)


async def _fetch_quote(client: httpx.AsyncClient, name: str) -> str:
    response = await client.get(stooq_url(name))
    response.raise_for_status()
    return parse_quote(response.text, name)
