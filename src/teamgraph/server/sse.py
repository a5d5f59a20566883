"""Server-sent event framing for JSON data: the data is one line (JSON escapes its newlines), so
a frame is its ``id``, ``event`` and ``data`` fields as they are — no splitting. The three
characters JSON leaves raw that many line readers still break lines at (U+0085, U+2028,
U+2029: Python's ``str.splitlines``, httpx's ``aiter_lines``) are written as JSON escapes."""

from __future__ import annotations

_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def one_line(data: str) -> str:
    """JSON text that every line reader reads as one line (the same JSON value)."""
    return data if data.isascii() else data.translate(_BREAKS)


def frame(event: str, data: str, event_id: int | None = None) -> str:
    """One server-sent event; ``data`` is JSON text."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {one_line(data)}\n\n"
