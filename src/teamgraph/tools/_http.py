"""HTTP plumbing shared by the online tools (``http_get``, ``web_search``, ``weather``, …).

Online tools never raise to their caller: failures become a :class:`ToolException` whose message
starts with the reason (``network unavailable: …``, ``timed out after 10 s``, ``HTTP 404 Not
Found …``). The tools are built with ``handle_tool_error=True``, so LangChain returns that
message as the tool's result (a ``ToolMessage`` with ``status="error"`` inside an agent).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

import httpx
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, ValidationError

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
