"""Server-sent event framing for JSON data: the data is one line (JSON escapes its newlines), so
a frame is its ``id``, ``event`` and ``data`` fields as they are — no splitting, no escaping."""

from __future__ import annotations


def frame(event: str, data: str, event_id: int | None = None) -> str:
    """One server-sent event; ``data`` is JSON text."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n"
