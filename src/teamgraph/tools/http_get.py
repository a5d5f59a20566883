"""``http_get``: fetch a URL and return its status, content type and readable text."""

from __future__ import annotations

import re
from collections.abc import Collection
from html.parser import HTMLParser

import httpx
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, Field

from teamgraph.tools._http import guarded, http_client, online_tool

DESCRIPTION = (
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
            return await guarded(_fetch(client, target, max_bytes), timeout_s, target.host)

    return online_tool("http_get", DESCRIPTION, HttpGetInput, http_get)


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


async def _fetch(client: httpx.AsyncClient, url: httpx.URL, max_bytes: int) -> str:
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
