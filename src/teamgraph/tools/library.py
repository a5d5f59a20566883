"""teamgraph's general-purpose tool library, registered into a :class:`ToolRegistry`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_core.tools import BaseTool

from teamgraph.tools.calculator import make_calculator_tool
from teamgraph.tools.current_time import make_current_time_tool
from teamgraph.tools.http_get import make_http_get_tool
from teamgraph.tools.stock_quote import make_stock_quote_tool
from teamgraph.tools.weather import make_weather_tool
from teamgraph.tools.web_search import make_web_search_tool

if TYPE_CHECKING:  # no runtime import: registry.py may import this module at its top
    from teamgraph.tools.registry import ToolFactory, ToolRegistry, ToolResources


def _calculator(resources: ToolResources) -> BaseTool:
    return make_calculator_tool()


def _http_get(resources: ToolResources) -> BaseTool:
    return make_http_get_tool()


def _web_search(resources: ToolResources) -> BaseTool:
    return make_web_search_tool()


def _weather(resources: ToolResources) -> BaseTool:
    return make_weather_tool()


def _stock_quote(resources: ToolResources) -> BaseTool:
    return make_stock_quote_tool()


def _current_time(resources: ToolResources) -> BaseTool:
    return make_current_time_tool()


def _python(resources: ToolResources) -> BaseTool:
    from teamgraph.tools.python_tool import make_python_tool

    return make_python_tool()


LIBRARY: dict[str, ToolFactory] = {
    "python": _python,
    "calculator": _calculator,
    "http_get": _http_get,
    "web_search": _web_search,
    "weather": _weather,
    "stock_quote": _stock_quote,
    "current_time": _current_time,
}


def register_library(registry: ToolRegistry) -> None:
    """Register ``python`` (the sandbox), ``calculator``, ``http_get``, ``web_search``,
    ``weather``, ``stock_quote`` and ``current_time`` (each built fresh per request;
    ``http_get`` allows any host)."""
    for name, factory in LIBRARY.items():
        registry.register(name, factory)
