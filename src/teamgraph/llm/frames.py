"""Token frames: a model's streamed text as few events as a reader needs. The first piece goes
out at once (time to first token is unchanged); later pieces wait at most ``interval`` seconds
and go out together, or as soon as ``chars`` characters wait. The frames join to the text the
model wrote, exactly, so a replay of the events reproduces it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class Frames:
    """Collects streamed text and hands it to ``send`` in frames (``interval`` 0: every piece
    as it comes)."""

    def __init__(self, send: Callable[[str], object], interval: float, chars: int) -> None:
        self.send, self.interval, self.chars = send, interval, chars
        self.waiting: list[str] = []
        self.size = 0
        self.sent_at = float("-inf")
        self.timer: asyncio.TimerHandle | None = None

    def add(self, text: str) -> None:
        self.waiting.append(text)
        self.size += len(text)
        since = time.monotonic() - self.sent_at
        if self.size >= self.chars or since >= self.interval:
            self.flush()
        elif self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(self.interval - since, self.flush)

    def flush(self) -> None:
        """Send what waits now (nothing waits: nothing is sent)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.waiting:
            text, self.waiting, self.size = "".join(self.waiting), [], 0
            self.sent_at = time.monotonic()
            self.send(text)
