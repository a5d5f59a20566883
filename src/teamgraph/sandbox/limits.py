"""What one sandboxed execution may use, and the ``setrlimit`` values that enforce it."""

from __future__ import annotations

import resource
from dataclasses import dataclass, fields

MIB = 1024 * 1024
MAX_OPEN_FILES = 256

# The names ``ExecResult.limit`` can take.
LIMIT_NAMES = ("wall_time", "cpu_time", "memory", "processes", "output")


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one ``Sandbox.run``.

    * ``wall_time_s``: wall-clock time of the whole run, tool calls included; then every process of
      the sandbox is killed.
    * ``cpu_time_s``: CPU seconds per process (``RLIMIT_CPU``), killed one second later for good.
    * ``memory_mb``: address space per process (``RLIMIT_AS``); allocations beyond it fail.
    * ``max_processes``: processes and threads alive at once in the sandbox (``RLIMIT_NPROC``,
      counted in the sandbox's own user namespace), its first process included.
    * ``max_output_bytes``: stdout and stderr together; the rest is cut off.
    * ``max_file_mb``: size of one file written (``RLIMIT_FSIZE``), and of each of the ``/tmp``
      and ``/work`` tmpfs.
    """

    wall_time_s: float = 10.0
    cpu_time_s: int = 5
    memory_mb: int = 512
    max_processes: int = 32
    max_output_bytes: int = 64_000
    max_file_mb: int = 50

    def __post_init__(self) -> None:
        for field in fields(self):
            if not getattr(self, field.name) > 0:
                raise ValueError(f"SandboxLimits.{field.name} must be positive")
        if self.max_processes < 3:
            raise ValueError("SandboxLimits.max_processes must be at least 3")


def process_rlimits(limits: SandboxLimits) -> list[tuple[int, tuple[int, int]]]:
    """``(resource, (soft, hard))`` pairs set on the sandbox's first process before ``exec``.

    ``RLIMIT_NPROC`` is not among them: the sandboxed program sets it itself, first thing, inside
    the sandbox's user namespace, where the kernel counts only the sandbox's own processes.
    """
    return [
        (resource.RLIMIT_CPU, (limits.cpu_time_s, limits.cpu_time_s + 1)),
        (resource.RLIMIT_AS, (limits.memory_mb * MIB, limits.memory_mb * MIB)),
        (resource.RLIMIT_FSIZE, (limits.max_file_mb * MIB, limits.max_file_mb * MIB)),
        (resource.RLIMIT_NOFILE, (MAX_OPEN_FILES, MAX_OPEN_FILES)),
        (resource.RLIMIT_CORE, (0, 0)),
    ]
