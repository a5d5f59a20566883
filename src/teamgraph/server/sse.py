"""The one server-sent-event framer, and the one helper that builds every streamed response.

Every dialect's data is JSON, written on one line (JSON escapes its newlines), so a frame is its
``id``, ``event`` and ``data`` fields as they are — no splitting. The three characters JSON leaves
raw that many line readers still break lines at (U+0085, U+2028, U+2029: Python's
``str.splitlines``, httpx's ``aiter_lines``) are written as JSON escapes. A frame ends with a
blank line (``\\n\\n``).

:func:`streaming_response` is a Starlette ``StreamingResponse``: the body as the adapter writes
it, with the headers a stream needs through proxies (no caching, no buffering). It sends no
keep-alive comments: a stream is silent while its run is (a proxy's read timeout must allow for
the longest silent stretch of a run; a client that lost a stream reconnects with
``Last-Event-ID`` where the dialect has event ids).

A finished stream ends with its last frame: the adapter marks its last write :class:`Final`,
and that write is the body's end (``more_body: false``) — the terminating chunk goes out with
the last frame, not after whatever the server does once it has written it (storing the run's
last events, reading its result). A page that acts on the last event at once (a browser tab
that aborts its fetch, navigates, starts the next turn) then finds the response complete;
when the end came later, Chromium reported each such stream ``net::ERR_ABORTED`` (measured:
29 of 30 streams with 20 ms of server work after the last frame, 1 of 30 once it is
:class:`Final`; issue 31)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Mapping

from starlette.responses import StreamingResponse
from starlette.types import Send

SSE = "text/event-stream"
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_ESCAPES = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_BREAKS = str.maketrans(_ESCAPES)


def one_line(data: str) -> str:
    """JSON text that every line reader reads as one line (the same JSON value). Searching
    for the three characters is cheap; ``translate`` maps every character in Python."""
    if data.isascii() or not any(char in data for char in _ESCAPES):
        return data
    return data.translate(_BREAKS)


def frame(event: str | None, data: str, event_id: int | str | None = None) -> str:
    """One server-sent event; ``data`` is JSON text (``event``: its type, for dialects that name
    their events; ``event_id``: what a reconnecting client sends back as ``Last-Event-ID``)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    if event is not None:
        head += f"event: {event}\n"
    return f"{head}data: {one_line(data)}\n\n"


class Final(str):
    """A stream's last write: it ends the response body (nothing is read from the stream after
    it)."""


class _EndingResponse(StreamingResponse):
    """A ``StreamingResponse`` whose :class:`Final` chunk is sent as the end of the body."""

    async def stream_response(self, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})
        try:
            async for chunk in self.body_iterator:
                data = (
                    chunk if isinstance(chunk, bytes | memoryview) else chunk.encode(self.charset)
                )
                if isinstance(chunk, Final):
                    await send({"type": "http.response.body", "body": data, "more_body": False})
                    return
                await send({"type": "http.response.body", "body": data, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if isinstance(self.body_iterator, AsyncGenerator):
                await self.body_iterator.aclose()


def streaming_response(
    body: AsyncIterable[str | bytes],
    media_type: str = SSE,
    headers: Mapping[str, str] | None = None,
) -> StreamingResponse:
    """A streamed response of ``body`` (what the dialect writes, chunk by chunk; a
    :class:`Final` chunk ends it)."""
    return _EndingResponse(
        body, media_type=media_type, headers={**STREAM_HEADERS, **(headers or {})}
    )
