"""How the sandbox describes an exception of the sandboxed code (imported by ``_child.py``
inside the sandbox; standard library only): ``Type: message``, a note naming the limit that caused
it if any, and a traceback of the sandboxed code's own frames."""

from __future__ import annotations

import errno
import os

MYPY = False
if MYPY:  # for the type checker only: ``typing`` is slow to import
    from typing import Any

    Config = dict[str, Any]

FILENAME = "<sandbox>"
MAX_FRAMES = 8


class CpuTimeLimitExceeded(BaseException):
    """The process used up its CPU time (``SIGXCPU``)."""


def summary(exc: BaseException) -> str:
    name, module = type(exc).__qualname__, type(exc).__module__
    if module not in ("builtins", "__main__", __name__):
        name = f"{module}.{name}"
    return f"{name}: {exc}" if str(exc) else name


def describe(exc: BaseException, note: str, code: str) -> str:
    """``Type: message (note)`` and a traceback of the sandboxed code's frames only."""
    import linecache
    import traceback

    linecache.cache[FILENAME] = (len(code), None, code.splitlines(True), FILENAME)
    head = summary(exc) + (f" ({note})" if note else "")
    if isinstance(exc, SyntaxError) and exc.filename == FILENAME:
        lines = "".join(traceback.format_exception_only(type(exc), exc)).splitlines()
        return "\n".join([f"{type(exc).__name__}: {exc.msg} (line {exc.lineno})", *lines[1:-1]])
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == FILENAME]
    if not frames:
        return head
    skipped = f"  ... {len(frames) - MAX_FRAMES} more frames\n" if len(frames) > MAX_FRAMES else ""
    listing = "".join(traceback.format_list(frames[-MAX_FRAMES:]))
    return f"{head}\nTraceback (most recent call last):\n{skipped}{listing}".rstrip()


def sandbox_tasks() -> int:
    """Threads of every process in the sandbox (its ``/proc`` shows only its own)."""
    total = 0
    for name in os.listdir("/proc"):
        try:
            total += len(os.listdir(f"/proc/{name}/task")) if name.isdigit() else 0
        except OSError:
            continue
    return total


def classify(exc: BaseException, config: Config) -> tuple[str | None, str]:
    """``(limit, note)`` when ``exc`` comes from one of the sandbox's limits."""
    if isinstance(exc, CpuTimeLimitExceeded):
        return "cpu_time", f"CPU time limit of {config['cpu_time_s']} s exceeded"
    if isinstance(exc, MemoryError):
        return "memory", f"memory limit of {config['memory_mb']} MB per process exceeded"
    fork_failed = isinstance(exc, BlockingIOError) and exc.errno == errno.EAGAIN
    thread_failed = isinstance(exc, RuntimeError) and "can't start new thread" in str(exc)
    limit = config["max_processes"]
    if (fork_failed or thread_failed) and sandbox_tasks() >= limit - 2:
        return "processes", f"process limit of {limit} processes and threads reached"
    return None, ""
