"""The built-in tool library: calculator, http_get, web_search, weather, stock_quote, current_time.

No test touches the network: online tools get an ``httpx.MockTransport`` serving recorded-style
bodies (or raising ``ReadTimeout`` / ``ConnectError``), or fetch from a stdlib HTTP server on
127.0.0.1.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import types
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

from teamgraph.planning.routing import overlap_score
from teamgraph.tools.library import (
    evaluate,
    make_calculator_tool,
    make_current_time_tool,
    register_library,
)
from teamgraph.tools.registry import ToolRegistry, ToolResources
from teamgraph.tools.web import (
    html_to_text,
    make_http_get_tool,
    make_stock_quote_tool,
    make_weather_tool,
    make_web_search_tool,
    stooq_symbol,
)

from .helpers import CEILING_S

Handler = Callable[[httpx.Request], httpx.Response]


def mock(handler: Handler) -> httpx.MockTransport:
    return httpx.MockTransport(handler)


def raising(exc_type: type[httpx.TransportError], message: str) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc_type(message, request=request)

    return httpx.MockTransport(handler)


OFFLINE = raising(httpx.ConnectError, "[Errno -3] Temporary failure in name resolution")
TIMEOUT = raising(httpx.ReadTimeout, "The read operation timed out")


async def run(tool: BaseTool, **args: Any) -> str:
    result = await tool.ainvoke(args)
    assert isinstance(result, str)
    return result


# --- calculator ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("7 // 2 + 7 % 3", 4),
        ("2 ** 10", 1024),
        ("-3 + +2", -1),
        ("1.5e3 / 4", 375),
        ("2 ** -1", 0.5),
        ("sqrt(16) + abs(-2)", 6),
        ("log(8, 2) + log10(1000) + log2(8)", 9),
        ("log(e) + exp(0)", 2),
        ("sin(0) + cos(pi) + tan(0)", -1),
        ("asin(1) * 2 - pi", 0),
        ("acos(1) + atan(0)", 0),
        ("atan2(1, 1) * 4 - pi", 0),
        ("degrees(pi) + radians(180) - tau / 2", 180),
        ("floor(2.7) + ceil(2.1)", 5),
        ("round(2.567, 2)", 2.57),
        ("round(2.4)", 2),
        ("min(3, 1, 2) + max(3, 1, 2)", 4),
        ("factorial(10)", 3628800),
        ("hypot(3, 4)", 5),
        ("2 ** 100", 2**100),
    ],
)
def test_calculator_values(expression: str, expected: float) -> None:
    assert evaluate(expression) == pytest.approx(expected, abs=1e-12)


async def test_calculator_tool_shows_the_expression_and_a_tidy_value() -> None:
    tool = make_calculator_tool()
    assert await run(tool, expression="0.1 + 0.2") == "0.1 + 0.2 = 0.3"
    assert await run(tool, expression="10 / 4") == "10 / 4 = 2.5"
    assert await run(tool, expression="10 / 2") == "10 / 2 = 5"
    assert tool.invoke({"expression": "6 * 7"}) == "6 * 7 = 42"  # synchronous entry point too


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("os", "unknown name 'os'"),
        ("os.system('ls')", "unsupported syntax: Attribute"),
        ("__import__('os')", "unknown function '__import__'"),
        ("[1, 2]", "unsupported syntax: List"),
        ("1 < 2", "unsupported syntax: Compare"),
        ("lambda: 1", "unsupported syntax: Lambda"),
        ("'abc'", "unsupported constant 'abc'"),
        ("2 ^ 3", "unsupported operator: BitXor (use ** for powers)"),
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("9**9**9", "result too large"),
        ("10 ** 5000", "result too large"),
        ("2.0 ** 100000", "result too large"),
        ("1e308 * 10", "result too large"),
        ("(-8) ** 0.5", "result is not a real number"),
        ("factorial(5000)", "math error: factorial needs an integer from 0 to 1000"),
        ("factorial(2.5)", "math error: factorial needs an integer"),
        ("sqrt(-1)", "math error: math domain error"),
        ("sqrt(1, 2)", "sqrt() takes 1 positional argument(s)"),
        ("round(x=1)", "round() takes 1 to 2 positional argument(s)"),
        ("log(1, 2, 3)", "log() takes 1 to 2 positional argument(s)"),
        ("2 +", "invalid expression"),
        ("1" * 2000, "expression too long"),
    ],
)
async def test_calculator_errors_are_clear_messages(expression: str, message: str) -> None:
    assert (await run(make_calculator_tool(), expression=expression)).startswith(message)


async def test_calculator_rejects_a_power_tower_without_computing_it() -> None:
    # refused by the size estimate, which names the power it did not compute (computing
    # 9 ** 387420489 would not end, let alone 9 ** that)
    answer = await run(make_calculator_tool(), expression="9**9**9**9")
    assert answer == "result too large: 9 ** 387420489"


async def test_tool_errors_reach_an_agent_as_error_tool_messages() -> None:
    call = {"name": "calculator", "args": {"expression": "1/0"}, "id": "c1", "type": "tool_call"}
    message = await make_calculator_tool().ainvoke(call)
    assert isinstance(message, ToolMessage)
    assert (message.status, message.content) == ("error", "division by zero")
    bad = await make_calculator_tool().ainvoke({"expr": "1"})
    assert bad.startswith("invalid arguments: expression: Field required")


# --- current_time ---------------------------------------------------------------------------

FIXED = datetime(2024, 7, 1, 12, 0, tzinfo=UTC)


async def test_current_time_in_a_zone() -> None:
    tool = make_current_time_tool(clock=lambda: FIXED)
    paris = await run(tool, timezone="Europe/Paris")
    assert paris == "2024-07-01T14:00:00+02:00 (Europe/Paris, Monday, CEST)"
    assert (await run(tool)).startswith("2024-07-01T12:00:00+00:00 (UTC")
    assert (await run(tool, timezone="utc")).startswith("2024-07-01T12:00:00+00:00")


@pytest.mark.parametrize(
    ("city", "key"), [("Tokyo", "Asia/Tokyo"), ("new york", "America/New_York")]
)
async def test_current_time_accepts_a_zone_city(city: str, key: str) -> None:
    answer = await run(make_current_time_tool(clock=lambda: FIXED), timezone=city)
    assert f"({key}, " in answer


async def test_current_time_real_clock_is_iso() -> None:
    stamp = (await run(make_current_time_tool(), timezone="Asia/Tokyo")).split(" ")[0]
    parsed = datetime.fromisoformat(stamp)
    assert parsed.utcoffset() is not None and parsed.utcoffset().total_seconds() == 9 * 3600  # type: ignore[union-attr]
    assert abs((parsed - datetime.now(UTC)).total_seconds()) < 60


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../../etc/passwd", "Europe"])
async def test_current_time_unknown_zone(zone: str) -> None:
    answer = await run(make_current_time_tool(), timezone=zone)
    assert answer.startswith(f"unknown timezone {zone!r}: use an IANA name")


# --- http_get (mock transport) -----------------------------------------------------------

PAGE = """<!doctype html><html><head><title>Tea &amp; Co</title>
<style>body { color: red }</style><script>alert("no")</script></head>
<body><h1>Green   tea</h1><p>Brew at <b>80&nbsp;°C</b>
for two minutes.</p><noscript>enable JS</noscript><ul><li>one</li><li>two</li></ul></body></html>"""


def test_html_to_text_keeps_readable_text_only() -> None:
    assert html_to_text(PAGE) == "Tea & Co\nGreen tea\nBrew at 80 °C for two minutes.\none\ntwo"


async def test_http_get_returns_status_type_and_text() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, html=PAGE)

    answer = await run(make_http_get_tool(transport=mock(handler)), url="https://tea.example/")
    assert answer.startswith("status: 200 OK\ncontent-type: text/html; charset=utf-8\n\n")
    assert answer.endswith("Tea & Co\nGreen tea\nBrew at 80 °C for two minutes.\none\ntwo")
    assert "alert" not in answer and "color" not in answer
    assert seen[0].headers["user-agent"].startswith("teamgraph-tools/")


async def test_http_get_plain_json_and_binary() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/data":
            return httpx.Response(200, json={"ok": True})
        return httpx.Response(200, content=b"\x89PNG...", headers={"content-type": "image/png"})

    tool = make_http_get_tool(transport=mock(handler))
    assert (await run(tool, url="https://api.example/data")).endswith('\n\n{"ok":true}')
    assert (await run(tool, url="https://api.example/logo.png")).endswith(
        "(binary content not shown)"
    )


async def test_http_get_truncates_at_max_bytes() -> None:
    transport = mock(lambda request: httpx.Response(200, text="x" * 5000))
    answer = await run(
        make_http_get_tool(max_bytes=100, transport=transport), url="http://a.example"
    )
    head, _, body = answer.partition("\n\n")
    assert "truncated: only the first 100 bytes were read" in head
    assert body == "x" * 100
    exact = await run(
        make_http_get_tool(max_bytes=5000, transport=transport), url="http://a.example"
    )
    assert "truncated" not in exact


async def test_http_get_allow_list() -> None:
    fetched: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        fetched.append(request.url.host)
        if request.url.path == "/out":
            return httpx.Response(302, headers={"location": "https://evil.example.net/steal"})
        return httpx.Response(200, text="fine")

    tool = make_http_get_tool(["*.example.com", "api.test"], transport=mock(handler))
    assert (await run(tool, url="https://docs.example.com/a")).endswith("fine")
    assert (await run(tool, url="https://example.com/")).endswith("fine")
    assert (await run(tool, url="http://API.test/")).endswith("fine")
    refused = await run(tool, url="https://evil.example.net/")
    assert refused.startswith("host evil.example.net is not in the allow-list")
    assert (await run(tool, url="https://notexample.com/")).startswith("host notexample.com is not")
    redirected = await run(tool, url="https://docs.example.com/out")
    assert redirected.startswith("host evil.example.net is not in the allow-list")
    assert "evil.example.net" not in fetched and "notexample.com" not in fetched


@pytest.mark.parametrize("url", ["ftp://example.com/file", "file:///etc/passwd", "no scheme"])
async def test_http_get_only_http_and_https(url: str) -> None:
    answer = await run(make_http_get_tool(transport=OFFLINE), url=url)
    assert answer.startswith("unsupported URL") or answer.startswith("invalid URL")


async def test_http_get_http_errors_timeouts_and_offline() -> None:
    not_found = mock(lambda request: httpx.Response(404, text="nope"))
    answer = await run(make_http_get_tool(transport=not_found), url="https://x.example/missing")
    assert answer == "HTTP 404 Not Found from x.example"
    timed_out = await run(
        make_http_get_tool(timeout_s=3, transport=TIMEOUT), url="https://x.example"
    )
    assert timed_out == "timed out after 3 s"
    offline = await run(make_http_get_tool(transport=OFFLINE), url="https://x.example")
    assert offline == "network unavailable: [Errno -3] Temporary failure in name resolution"


# --- web_search -------------------------------------------------------------------------------

TAVILY_ANSWER = {
    "query": "langgraph checkpoints",
    "results": [
        {
            "title": "Persistence - LangGraph",
            "url": "https://langchain-ai.github.io/langgraph/concepts/persistence/",
            "content": "LangGraph has a built-in persistence layer, implemented through "
            "checkpointers.",
            "score": 0.93,
        },
        {"title": "", "url": "https://example.org/blog", "content": "A   post\nabout it."},
    ],
    "response_time": 1.2,
}


async def test_web_search_uses_tavily_when_a_key_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test")
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json=TAVILY_ANSWER)

    tool = make_web_search_tool(transport=mock(handler))
    answer = await run(tool, query="langgraph checkpoints", max_results=50)
    assert answer == (
        "1. Persistence - LangGraph\n"
        "   https://langchain-ai.github.io/langgraph/concepts/persistence/\n"
        "   LangGraph has a built-in persistence layer, implemented through checkpointers.\n"
        "2. https://example.org/blog\n   https://example.org/blog\n   A post about it."
    )
    request = requests[0]
    assert (request.method, str(request.url)) == ("POST", "https://api.tavily.com/search")
    assert request.headers["authorization"] == "Bearer tvly-test"
    body = json.loads(request.content)
    assert body["query"] == "langgraph checkpoints" and body["max_results"] == 10


async def test_web_search_tavily_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-bad")
    unauthorized = mock(lambda request: httpx.Response(401, json={"detail": "bad key"}))
    answer = await run(make_web_search_tool(transport=unauthorized), query="x")
    assert answer == "HTTP 401 Unauthorized from api.tavily.com"
    empty = mock(lambda request: httpx.Response(200, json={"results": []}))
    assert (
        await run(make_web_search_tool(transport=empty), query="zzz") == "no web results for 'zzz'"
    )
    garbage = mock(lambda request: httpx.Response(200, text="<html>maintenance</html>"))
    answer = await run(make_web_search_tool(transport=garbage), query="x")
    assert answer.startswith("unexpected response from Tavily")


async def test_web_search_without_key_or_ddgs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    monkeypatch.setitem(sys.modules, "ddgs", None)  # makes `import ddgs` fail
    answer = await run(make_web_search_tool(transport=OFFLINE), query="anything")
    assert answer.startswith("web search unavailable:") and "pip install ddgs" in answer


def fake_ddgs(results: list[dict[str, str]] | Exception) -> types.ModuleType:
    module = types.ModuleType("ddgs")

    class DDGS:
        def __init__(self, timeout: int | None = None) -> None:
            self.timeout = timeout

        def text(self, query: str, max_results: int = 10) -> list[dict[str, str]]:
            if isinstance(results, Exception):
                raise results
            return results

    module.DDGS = DDGS  # type: ignore[attr-defined]
    return module


async def test_web_search_falls_back_to_duckduckgo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    hits = [{"title": f"T{i}", "href": f"https://e.org/{i}", "body": f"b{i}"} for i in range(9)]
    monkeypatch.setitem(sys.modules, "ddgs", fake_ddgs(hits))
    answer = await run(make_web_search_tool(), query="q", max_results=2)
    assert answer == "1. T0\n   https://e.org/0\n   b0\n2. T1\n   https://e.org/1\n   b1"
    monkeypatch.setitem(sys.modules, "ddgs", fake_ddgs(RuntimeError("ConnectError: dns failure")))
    failed = await run(make_web_search_tool(), query="q")
    assert failed.startswith("network unavailable: DuckDuckGo search failed: ConnectError")


# --- weather ---------------------------------------------------------------------------------

PARIS_TX = {
    "name": "Paris",
    "latitude": 33.66,
    "longitude": -95.56,
    "country": "United States",
    "country_code": "US",
    "admin1": "Texas",
}
PARIS_FR = {
    "name": "Paris",
    "latitude": 48.85341,
    "longitude": 2.3488,
    "country": "France",
    "country_code": "FR",
    "admin1": "Île-de-France",
    "timezone": "Europe/Paris",
}
FORECAST = {
    "latitude": 48.86,
    "longitude": 2.3399997,
    "timezone": "Europe/Paris",
    "current_units": {
        "time": "iso8601",
        "temperature_2m": "°C",
        "relative_humidity_2m": "%",
        "wind_speed_10m": "km/h",
        "weather_code": "wmo code",
    },
    "current": {
        "time": "2024-05-01T14:00",
        "interval": 900,
        "temperature_2m": 18.2,
        "relative_humidity_2m": 60,
        "wind_speed_10m": 12.3,
        "weather_code": 2,
    },
    "daily_units": {"time": "iso8601", "temperature_2m_max": "°C", "temperature_2m_min": "°C"},
    "daily": {
        "time": ["2024-05-01", "2024-05-02", "2024-05-03"],
        "weather_code": [2, 61, 95],
        "temperature_2m_max": [19.0, 15.4, 17.1],
        "temperature_2m_min": [10.1, 9.8, 11.0],
    },
}


def open_meteo(places: list[dict[str, Any]], forecast: httpx.Response | None = None) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "geocoding-api.open-meteo.com":
            assert request.url.path == "/v1/search"
            return httpx.Response(200, json={"results": places} if places else {"gtime": 0.1})
        assert (request.url.host, request.url.path) == ("api.open-meteo.com", "/v1/forecast")
        params = request.url.params
        assert (
            params["current"] == "temperature_2m,relative_humidity_2m,wind_speed_10m,weather_code"
        )
        assert params["daily"] == "weather_code,temperature_2m_max,temperature_2m_min"
        assert (params["forecast_days"], params["latitude"]) == ("3", str(PARIS_FR["latitude"]))
        return forecast or httpx.Response(200, json=FORECAST)

    return handler


async def test_weather_report() -> None:
    tool = make_weather_tool(transport=mock(open_meteo([PARIS_FR])))
    assert await run(tool, location="Paris") == (
        "Weather for Paris, Île-de-France, France (lat 48.85, lon 2.35), local time "
        "2024-05-01T14:00:\n"
        "now: partly cloudy, 18.2 °C, humidity 60 %, wind 12.3 km/h\n"
        "2024-05-01: partly cloudy, 10.1 to 19.0 °C\n"
        "2024-05-02: slight rain, 9.8 to 15.4 °C\n"
        "2024-05-03: thunderstorm, 11.0 to 17.1 °C"
    )


async def test_weather_country_hint_picks_the_right_place() -> None:
    seen: list[httpx.Request] = []
    handler = open_meteo([PARIS_TX, PARIS_FR])

    def recording(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    answer = await run(make_weather_tool(transport=mock(recording)), location="Paris, France")
    assert answer.startswith("Weather for Paris, Île-de-France, France")
    assert (seen[0].url.params["name"], seen[0].url.params["count"]) == ("Paris", "10")


async def test_weather_unknown_place_and_failures() -> None:
    unknown = await run(make_weather_tool(transport=mock(open_meteo([]))), location="Atlantis")
    assert unknown == "unknown place 'Atlantis': no location matches that name"
    down = open_meteo([PARIS_FR], httpx.Response(503, text="busy"))
    answer = await run(make_weather_tool(transport=mock(down)), location="Paris")
    assert answer == "HTTP 503 Service Unavailable from api.open-meteo.com"
    broken = open_meteo([PARIS_FR], httpx.Response(200, json={"error": True}))
    answer = await run(make_weather_tool(transport=mock(broken)), location="Paris")
    assert answer.startswith("unexpected response from Open-Meteo: KeyError('current')")
    assert (
        await run(make_weather_tool(transport=OFFLINE), location=" ") == "give a city or place name"
    )


# --- stock_quote -------------------------------------------------------------------------------

AAPL_CSV = (
    "Symbol,Date,Time,Open,High,Low,Close,Volume\r\n"
    "AAPL.US,2024-05-01,22:00:07,169.58,172.71,169.11,169.3,50383147\r\n"
)


@pytest.mark.parametrize(
    ("symbol", "stooq"),
    [("AAPL", "aapl.us"), (" msft ", "msft.us"), ("7203.JP", "7203.jp"), ("^SPX", "^spx")],
)
def test_stooq_symbols(symbol: str, stooq: str) -> None:
    assert stooq_symbol(symbol) == stooq


async def test_stock_quote_parses_the_csv() -> None:
    urls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        urls.append(str(request.url))
        return httpx.Response(200, text=AAPL_CSV, headers={"content-type": "text/csv"})

    answer = await run(make_stock_quote_tool(transport=mock(handler)), symbol="AAPL")
    assert answer == (
        "AAPL.US: last 169.3 (2024-05-01 22:00:07); open 169.58, high 172.71, low 169.11, "
        "volume 50383147. Source: Stooq (delayed quote)."
    )
    assert urls == ["https://stooq.com/q/l/?s=aapl.us&f=sd2t2ohlcv&h&e=csv"]


async def test_stock_quote_unknown_symbol_and_bad_answers() -> None:
    nd = "Symbol,Date,Time,Open,High,Low,Close,Volume\r\nZZZZ.US,N/D,N/D,N/D,N/D,N/D,N/D,N/D\r\n"
    tool = make_stock_quote_tool(transport=mock(lambda request: httpx.Response(200, text=nd)))
    assert await run(tool, symbol="zzzz") == "no quote found for ZZZZ.US"
    assert (await run(tool, symbol="rm -rf /")).startswith("invalid ticker symbol")
    limit = mock(lambda request: httpx.Response(200, text="Exceeded the daily hits limit"))
    answer = await run(make_stock_quote_tool(transport=limit), symbol="AAPL")
    assert answer == "unexpected response from Stooq: 'Exceeded the daily hits limit'"


# --- every online tool, offline ----------------------------------------------------------------

ONLINE_CALLS: list[tuple[Callable[..., BaseTool], dict[str, Any]]] = [
    (lambda transport: make_http_get_tool(transport=transport), {"url": "https://example.com"}),
    (lambda transport: make_web_search_tool("tvly-x", transport=transport), {"query": "news"}),
    (lambda transport: make_weather_tool(transport=transport), {"location": "Oslo"}),
    (lambda transport: make_stock_quote_tool(transport=transport), {"symbol": "AAPL"}),
]


@pytest.mark.parametrize(("factory", "args"), ONLINE_CALLS)
async def test_online_tools_offline_and_timing_out(
    factory: Callable[..., BaseTool], args: dict[str, Any]
) -> None:
    assert (await run(factory(OFFLINE), **args)).startswith("network unavailable: ")
    assert await run(factory(TIMEOUT), **args) == "timed out after 10 s"
    assert factory(OFFLINE).invoke(args).startswith("network unavailable: ")  # sync entry point


# --- http_get against a real server on 127.0.0.1 -----------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    answer_slow = threading.Event()  # /slow answers only once the test is over

    def do_GET(self) -> None:
        if self.path == "/slow":
            self.answer_slow.wait(CEILING_S)
        if self.path == "/redirect-out":
            self.send_response(302)
            self.send_header("Location", "http://blocked.example/")
            self.end_headers()
            return
        status, body = (200, PAGE) if self.path in ("/page", "/slow") else (404, "missing")
        data = body.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (timeout test)
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def local_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Handler.answer_slow.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    _Handler.answer_slow.set()
    server.shutdown()
    server.server_close()


async def test_http_get_fetches_from_a_local_server(local_server: str) -> None:
    tool = make_http_get_tool(allowed_hosts=["127.0.0.1"], timeout_s=5)
    answer = await run(tool, url=f"{local_server}/page")
    assert answer.startswith("status: 200 OK\ncontent-type: text/html; charset=utf-8\n\n")
    assert "Brew at 80 °C for two minutes." in answer
    assert await run(tool, url=f"{local_server}/nothing") == "HTTP 404 Not Found from 127.0.0.1"
    redirected = await run(tool, url=f"{local_server}/redirect-out")
    assert redirected.startswith("host blocked.example is not in the allow-list")


async def test_http_get_times_out_on_a_slow_local_server(local_server: str) -> None:
    # the server answers only after the test: only the tool's own timeout can end the call
    answer = await run(make_http_get_tool(timeout_s=0.3), url=f"{local_server}/slow")
    assert answer == "timed out after 0.3 s"


async def test_http_get_refused_connection_is_network_unavailable() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    answer = await run(make_http_get_tool(timeout_s=5), url=f"http://127.0.0.1:{port}/")
    assert answer.startswith("network unavailable: ")


# --- library registration -----------------------------------------------------------------------

LIBRARY_NAMES = [
    "calculator",
    "current_time",
    "http_get",
    "python",
    "stock_quote",
    "weather",
    "web_search",
]


def test_register_library_builds_every_tool() -> None:
    registry = ToolRegistry()
    register_library(registry)
    assert registry.names() == LIBRARY_NAMES
    for name in LIBRARY_NAMES:
        tool = registry.build(name, ToolResources())
        assert isinstance(tool, BaseTool) and tool.name == name
        assert tool.coroutine is not None and len(tool.description) > 60  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("What's the weather in Paris tomorrow?", "weather"),
        ("What time is it in Tokyo?", "current_time"),
        ("Compute 17 * 23 + sqrt(144)", "calculator"),
        ("What is the stock price of AAPL?", "stock_quote"),
        ("Search the web for the latest LangGraph release", "web_search"),
        ("Fetch https://example.com and summarize it", "http_get"),
    ],
)
def test_descriptions_let_word_overlap_pick_the_tool(task: str, expected: str) -> None:
    registry = ToolRegistry()
    register_library(registry)
    tools = [registry.build(name, ToolResources()) for name in registry.names()]

    def score(tool: BaseTool) -> float:
        return overlap_score(task, f"{tool.name.replace('_', ' ')} {tool.description}")

    ranked = sorted(tools, key=score, reverse=True)
    assert ranked[0].name == expected and score(ranked[0]) > score(ranked[1])
