"""One sandboxed execution: start bwrap, feed the code, serve tool calls, enforce the wall clock,
and turn what happened into an ``ExecResult``."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from teamgraph.errors import SandboxUnavailable
from teamgraph.sandbox._channel import Messages, OutputCapture, Tool, pipe_reader
from teamgraph.sandbox._host import HostSetup, launch_command
from teamgraph.sandbox._process import kill_pid1, signal_name, stop, wait
from teamgraph.sandbox._spawn import ChildProcess, spawn
from teamgraph.sandbox.bwrap import bwrap_command, child_path, start_failure
from teamgraph.sandbox.exec_result import ExecResult
from teamgraph.sandbox.limits import SandboxLimits

SETTLE_S = 2.0  # after the sandbox has ended, how long its pipes may take to close
CHILD_FILES = ("_child.py", "_child_errors.py")
PIPE_CAPACITY = 65536  # Linux's default: a file this small fits in a pipe without a reader


@functools.cache
def child_files() -> dict[str, bytes]:
    """The program run inside the sandbox, given to bwrap through pipes (``--ro-bind-data``)."""
    here = Path(__file__).parent
    files = {name: (here / name).read_bytes() for name in CHILD_FILES}
    assert all(len(data) < PIPE_CAPACITY for data in files.values())
    return files


def _data_pipe(data: bytes) -> int:
    """The read end of a pipe already holding all of ``data``."""
    read_fd, write_fd = os.pipe()
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view) :]
    finally:
        os.close(write_fd)
    return read_fd


@dataclass
class Execution:
    """The parts of one ``Sandbox.run``."""

    bwrap: str
    limits: SandboxLimits
    setup: HostSetup

    async def run(self, code: str, tools: Mapping[str, Tool]) -> ExecResult:
        read_fd, write_fd = os.pipe()
        files = {name: _data_pipe(data) for name, data in child_files().items()}
        try:
            proc = await self._spawn(write_fd, files)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            for fd in (write_fd, *files.values()):
                os.close(fd)
        try:
            return await self._supervise(proc, read_fd, code, tools)
        finally:
            if proc.returncode is None:  # cancelled or failed: never leave the sandbox running
                await stop(proc)

    async def _supervise(
        self, proc: ChildProcess, read_fd: int, code: str, tools: Mapping[str, Tool]
    ) -> ExecResult:
        reader = await pipe_reader(read_fd, 8 * self.limits.max_output_bytes + 2**20)
        capture = OutputCapture(self.limits.max_output_bytes)
        messages = Messages(reader, proc.stdin, tools, halt=lambda: kill_pid1(proc.pid))
        serve = asyncio.create_task(messages.serve())
        others = [
            asyncio.create_task(capture.drain("stdout", proc.stdout)),
            asyncio.create_task(capture.drain("stderr", proc.stderr)),
            asyncio.create_task(self._send_config(proc.stdin, code, tools)),
        ]
        timed_out = False
        try:
            timed_out = await wait(proc, self.limits.wall_time_s)
        finally:
            if proc.returncode is None:
                await stop(proc)
            await _settle(serve, others, stop_serving=timed_out)
        if messages.signal is not None:  # a tool paused the run: the code was stopped for it
            raise messages.signal
        return self._result(messages, capture, proc.returncode, timed_out)

    async def _spawn(self, message_fd: int, files: dict[str, int]) -> ChildProcess:
        main = child_path(CHILD_FILES[0])
        command = bwrap_command(self.bwrap, self.limits, files, main, str(message_fd))
        try:
            return await spawn(launch_command(self.setup, command), (message_fd, *files.values()))
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxUnavailable(f"cannot start bubblewrap ({self.bwrap}): {exc}") from exc

    async def _send_config(
        self, stdin: asyncio.StreamWriter, code: str, tools: Mapping[str, Tool]
    ) -> None:
        config = {
            "code": code,
            "tools": sorted(tools),
            "max_processes": self.limits.max_processes,
            "cpu_time_s": self.limits.cpu_time_s,
            "memory_mb": self.limits.memory_mb,
            "max_chars": self.limits.max_output_bytes,
        }
        try:
            stdin.write(json.dumps(config).encode() + b"\n")
            await stdin.drain()
        except (ConnectionError, RuntimeError):  # the sandbox ended before reading it
            pass

    def _result(
        self, messages: Messages, capture: OutputCapture, returncode: int | None, timed_out: bool
    ) -> ExecResult:
        if not messages.ready and not timed_out:
            raise start_failure(capture.text("stderr"), returncode)
        report = messages.report or {}
        value, error, limit = report.get("value"), report.get("error"), report.get("limit")
        if timed_out:
            value, limit = None, "wall_time"
            error = f"wall-clock time limit of {self.limits.wall_time_s:g} s exceeded: " + (
                "every process of the sandbox was killed"
                if messages.ready
                else "the sandbox had not even started the code"
            )
        elif messages.report is None:
            limit, error = self._death(returncode or 0)
        if limit is None and capture.cut:
            limit = "output"
        return ExecResult(capture.text("stdout"), capture.text("stderr"), value, error, limit)

    def _death(self, returncode: int) -> tuple[str | None, str | None]:
        """Why the sandbox ended without a report (bwrap exits 128 + n after signal n)."""
        signum = returncode - 128 if returncode > 128 else 0
        if signum in (signal.SIGXCPU, signal.SIGKILL):
            return "cpu_time", (
                f"CPU time limit of {self.limits.cpu_time_s} s exceeded: the process was killed "
                f"({signal_name(signum)})"
            )
        if signum:
            return None, f"the sandboxed process was killed by {signal_name(signum)}"
        if returncode:
            return None, f"the sandboxed process exited with status {returncode} without a result"
        return None, None


async def _settle(
    serve: asyncio.Task[None], others: list[asyncio.Task[None]], stop_serving: bool
) -> None:
    """Let the readers reach end of file; a tool call still running after a kill is cancelled."""
    if stop_serving:
        serve.cancel()
    done, pending = await asyncio.wait([serve, *others], timeout=SETTLE_S)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for task in done:
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error
