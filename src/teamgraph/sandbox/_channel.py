"""The parent's side of one execution: capped output capture, and the sandbox's messages.

The protocol with ``_child.py``, the program inside:

* its stdin: first a JSON line ``{"code", "tools", "max_processes", "cpu_time_s", "memory_mb",
  "max_chars"}``, then one line per tool call, the reply: ``{"ok": true, "result": ...}`` or
  ``{"ok": false, "error": "..."}`` (the sandboxed code itself gets ``/dev/null`` as stdin);
* an inherited pipe (its fd in ``argv[1]``): JSON lines ``{"type": "ready"}`` before any of the
  code runs, ``{"type": "call", "tool": name, "args": {...}}`` per tool call (it then blocks for
  the reply), and at the end ``{"type": "result", "value", "error", "limit"}``;
* its stdout and stderr: the code's own output.

Everything that comes from the sandbox is untrusted: messages are parsed defensively, only tools
of the mapping can be called, and only with a JSON object of arguments.

A tool that raises a :class:`~teamgraph.errors.ControlSignal` (a call that must wait for a
human's approval) is not an error the code sees: the code is stopped where it is (``halt``) and
the signal is kept (``signal``) for the execution to raise.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import IO, Any

from teamgraph.errors import ControlSignal
from teamgraph.sandbox.limits import LIMIT_NAMES

Tool = Callable[..., Awaitable[Any]]
READ_CHUNK = 65536


class OutputCapture:
    """stdout and stderr of the sandbox, together at most ``limit`` bytes; the rest is dropped
    (but still read, so the sandbox never blocks on a full pipe)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.remaining = limit
        self.data: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self.cut: set[str] = set()

    async def drain(self, name: str, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(READ_CHUNK):
            kept = chunk[: self.remaining]
            self.data[name] += kept
            self.remaining -= len(kept)
            if len(kept) < len(chunk):
                self.cut.add(name)

    def text(self, name: str) -> str:
        text = self.data[name].decode("utf-8", "replace")
        if name in self.cut:
            text += f"\n[... output cut: the limit is {self.limit} bytes of stdout and stderr]"
        return text


class Messages:
    """Reads the sandbox's JSON lines, answers its tool calls, keeps ``ready`` and the report."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        replies: asyncio.StreamWriter,
        tools: Mapping[str, Tool],
        halt: Callable[[], None],
    ) -> None:
        self.reader, self.replies, self.tools, self.halt = reader, replies, tools, halt
        self.ready = False
        self.report: dict[str, str | None] | None = None
        self.signal: ControlSignal | None = None  # a tool's signal that stopped the code

    async def serve(self) -> None:
        while True:
            try:
                line = await self.reader.readline()
            except ValueError:  # a line over the reader's limit (dropped by the reader): skip it
                continue
            if not line:
                return
            message = _parse(line)
            kind = message.get("type")
            if kind == "ready":
                self.ready = True
            elif kind == "result":
                self.report = _report(message)
            elif kind == "call":
                await self._answer(message)

    async def _answer(self, message: dict[str, Any]) -> None:
        try:
            reply = await call_tool(self.tools, message.get("tool"), message.get("args"))
        except ControlSignal as signal:
            self.signal = self.signal or signal
            self.halt()
            return
        try:
            self.replies.write(reply + b"\n")
            await self.replies.drain()
        except (ConnectionError, RuntimeError):  # the sandbox is gone
            pass


async def call_tool(tools: Mapping[str, Tool], name: Any, args: Any) -> bytes:
    """The encoded reply to one tool call: ``{"ok": true, "result": ...}`` or an error."""
    if not isinstance(name, str) or name not in tools:
        return _error(f"unknown tool {name!r} (available: {', '.join(sorted(tools)) or 'none'})")
    if not isinstance(args, dict):
        return _error(f"{name}: the arguments must be a JSON object")
    try:
        result = await tools[name](**args)
    except ControlSignal:
        raise
    except Exception as exc:
        return _error(str(exc) or type(exc).__name__)
    try:
        return json.dumps({"ok": True, "result": result}).encode()
    except (TypeError, ValueError):
        return _error(f"{name} returned a {type(result).__name__}, which is not JSON-serialisable")


def _error(text: str) -> bytes:
    return json.dumps({"ok": False, "error": text}).encode()


def _parse(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def _report(message: dict[str, Any]) -> dict[str, str | None]:
    report = {key: message.get(key) for key in ("value", "error", "limit")}
    clean = {key: value if isinstance(value, str) else None for key, value in report.items()}
    if clean["limit"] not in LIMIT_NAMES:
        clean["limit"] = None
    return clean


async def pipe_reader(pipe: int | IO[bytes], limit: int) -> asyncio.StreamReader:
    """An asyncio reader over the read end of a pipe, a descriptor or a file (taking ownership)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    protocol = asyncio.StreamReaderProtocol(reader)
    source = os.fdopen(pipe, "rb", buffering=0) if isinstance(pipe, int) else pipe
    await loop.connect_read_pipe(lambda: protocol, source)
    return reader
