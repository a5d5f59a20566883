"""Ending a sandbox: wait for it with a deadline, and kill it without leaving zombies."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from teamgraph.sandbox._spawn import ChildProcess

STOP_GRACE_S = 2.0  # after SIGKILL to its PID 1, how long bwrap may take to exit


async def wait(proc: ChildProcess, seconds: float) -> bool:
    """Wait for the sandbox to end; ``True`` when it had to be killed at the wall-clock limit."""
    try:
        await asyncio.wait_for(proc.wait(), seconds)
        return False
    except TimeoutError:
        await stop(proc)
        return True


async def stop(proc: ChildProcess) -> None:
    """SIGKILL the sandbox's PID 1: the kernel kills the rest of its PID namespace, and bwrap
    reaps it and exits. Failing that, SIGKILL bwrap (``--die-with-parent`` takes PID 1 along)."""
    kill_pid1(proc.pid)
    try:
        await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


def kill_pid1(bwrap_pid: int) -> None:
    """SIGKILL bwrap's child (the sandbox's PID 1, and with it every process of the sandbox)
    through a pidfd, after checking it is still bwrap's child."""
    try:
        children = Path(f"/proc/{bwrap_pid}/task/{bwrap_pid}/children").read_text()
    except OSError:
        return
    for pid in (int(text) for text in children.split()):
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            if _parent(pid) == bwrap_pid:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        finally:
            os.close(pidfd)


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
