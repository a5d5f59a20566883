"""Starting the sandbox's process with no Python run in a forked copy of the server.

uvloop (which ``teamgraph serve`` runs on) runs the interpreter's after-fork handling in every
child it forks, before ``exec``; in a server with other threads that copy can die first ('Fatal
Python error: Aborted'), and the sandbox then never starts. ``subprocess.Popen`` without a
``preexec_fn`` forks and ``exec``s in C, so the process is started that way, on any event loop,
and the running loop then watches its pipes and its exit (a pidfd: no thread, no ``SIGCHLD``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Sequence

from teamgraph.sandbox._channel import pipe_reader

STREAM_LIMIT = 2**16  # asyncio's own, for the sandbox's stdout and stderr


class ChildProcess:
    """What the sandbox uses of ``asyncio.subprocess.Process``, over a ``Popen``."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        streams: tuple[asyncio.StreamWriter, asyncio.StreamReader, asyncio.StreamReader],
        exited: asyncio.Future[None],
    ) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin, self.stdout, self.stderr = streams
        self._exited = exited

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def wait(self) -> int:
        """Wait for the process to end, reap it and return its exit status."""
        await asyncio.shield(self._exited)
        return self._popen.wait()


async def spawn(command: Sequence[str], pass_fds: Sequence[int]) -> ChildProcess:
    """Start ``command`` in a new session, its stdin, stdout and stderr piped to this loop."""
    popen = subprocess.Popen(  # noqa: ASYNC220 (fork + exec, as asyncio's own loop does)
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=tuple(pass_fds),
        start_new_session=True,
        cwd="/",
    )
    try:
        return await _watched(popen)
    except BaseException:
        popen.kill()
        popen.wait()
        raise


async def _watched(popen: subprocess.Popen[bytes]) -> ChildProcess:
    assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, popen.stdin
    )
    stdin = asyncio.StreamWriter(transport, protocol, None, loop)
    out = await pipe_reader(popen.stdout, STREAM_LIMIT)
    streams = (stdin, out, await pipe_reader(popen.stderr, STREAM_LIMIT))
    return ChildProcess(popen, streams, _exit_of(popen.pid))


def _exit_of(pid: int) -> asyncio.Future[None]:
    """A future done when process ``pid`` (not yet reaped) has ended."""
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()
    pidfd = os.pidfd_open(pid)

    def ended() -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(pidfd, ended)
    return exited
