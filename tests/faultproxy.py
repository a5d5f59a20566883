"""A TCP proxy that breaks the connections passing through it on demand — between teamgraph's
processes and PostgreSQL, for fault tests and ``benchmarks/faults.py``.

    proxy = FaultProxy(("127.0.0.1", 5432))
    await proxy.start()            # clients connect to 127.0.0.1:proxy.port
    proxy.reset()                  # every open connection is cut (RST), as a restart does
    proxy.refuse(2.0)              # ... and new ones are refused for 2 s
    proxy.stall(5.0)               # nothing passes for 5 s; connections stay open
    await proxy.stop()

It runs on the caller's event loop; the processes under test only see a server that misbehaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from typing import Any


class FaultProxy:
    def __init__(self, upstream: tuple[str, int], host: str = "127.0.0.1") -> None:
        self.upstream, self.host = upstream, host
        self.port = 0
        self._server: asyncio.Server | None = None
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._refuse_until = 0.0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self.connections = 0  # accepted in all
        self.cut = 0  # cut by reset()
        self.refused = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self.reset()
            await self._server.wait_closed()

    def url(self, database: str) -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{database}"

    def reset(self) -> int:
        """Cut every open connection at once (the peer sees a reset); how many were cut."""
        pairs, self._pairs = self._pairs, set()
        for client, server in pairs:
            _abort(client)
            _abort(server)
        self.cut += len(pairs)
        return len(pairs)

    def refuse(self, seconds: float) -> None:
        """Close every new connection at once for ``seconds`` (the database is down)."""
        self._refuse_until = time.monotonic() + seconds

    def stall(self, seconds: float) -> None:
        """Pass nothing, either way, for ``seconds``; the connections stay open."""
        self._flowing.clear()
        asyncio.get_running_loop().call_later(seconds, self._flowing.set)

    @property
    def open(self) -> int:
        return len(self._pairs)

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if time.monotonic() < self._refuse_until:
            self.refused += 1
            _abort(client_w)
            return
        try:
            server_r, server_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            _abort(client_w)
            return
        self.connections += 1
        pair = (client_w, server_w)
        self._pairs.add(pair)
        try:
            await asyncio.gather(self._pipe(client_r, server_w), self._pipe(server_r, client_w))
        finally:
            self._pairs.discard(pair)
            _abort(client_w)
            _abort(server_w)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await source.read(65536):
                await self._flowing.wait()
                sink.write(data)
                await sink.drain()
        _abort(sink)


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close with a reset (SO_LINGER 0), not a polite FIN: as a crashed server's peer sees it."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class ProxyThread:
    """A :class:`FaultProxy` on an event loop of its own thread: it keeps passing traffic while
    the test blocks (a synchronous wait, a subprocess), and is driven from any thread."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.proxy = FaultProxy(upstream)
        self._call(self.proxy.start())

    def url(self, database: str) -> str:
        return self.proxy.url(database)

    def reset(self) -> int:
        return int(self._call(_now(self.proxy.reset)))

    def refuse(self, seconds: float) -> None:
        self._call(_now(self.proxy.refuse, seconds))

    def stall(self, seconds: float) -> None:
        self._call(_now(self.proxy.stall, seconds))

    def close(self) -> None:
        self._call(self.proxy.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)


async def _now(function: Any, *args: Any) -> Any:
    """``function(*args)`` called on the proxy's loop (``stall`` schedules on it)."""
    return function(*args)
