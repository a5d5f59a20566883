"""``Sandbox``: run untrusted Python under bubblewrap, with limits, tools callable from inside.

Every ``run`` is a new bwrap process tree with its own namespaces (user, PID, network, IPC, UTS,
cgroup, mount) and a fresh in-memory working directory. If isolation is missing,
``SandboxUnavailable`` is raised; code is never run without it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping

from teamgraph.errors import SandboxUnavailable
from teamgraph.sandbox import bwrap as _bwrap
from teamgraph.sandbox._channel import Tool
from teamgraph.sandbox._execution import Execution
from teamgraph.sandbox._host import HostSetup, host_setup, launch_command
from teamgraph.sandbox.exec_result import ExecResult
from teamgraph.sandbox.limits import SandboxLimits, process_rlimits

PROBE = "import sys; sys.stdout.write('sandbox-ok')"
PROBE_TIMEOUT_S = 30.0


class Sandbox:
    """Runs Python code in an isolated, resource-limited process; one process tree per ``run``.

    ``tools`` maps names to async functions; inside the sandbox each is a plain function taking
    keyword arguments (``search_docs(query="x")``) that returns the tool's result, or raises
    ``ToolError`` with the tool's error message. Arguments and results must be JSON values. A
    tool that raises a :class:`~teamgraph.errors.ControlSignal` (it must wait for a human)
    stops the code where it is, and :meth:`run` raises that signal.
    """

    def __init__(self, limits: SandboxLimits = SandboxLimits()) -> None:  # noqa: B008 (frozen)
        self.limits = limits

    @staticmethod
    def check() -> None:
        """Raise ``SandboxUnavailable`` with the reason unless a program runs in the sandbox."""
        bwrap = _bwrap.find_bwrap()
        limits = SandboxLimits()
        command = _bwrap.bwrap_command(bwrap, limits, {}, "-c", PROBE)
        try:
            done = subprocess.run(
                launch_command(_setup(limits), command),
                capture_output=True,
                timeout=PROBE_TIMEOUT_S,
                start_new_session=True,
                cwd="/",
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxUnavailable(f"cannot run bubblewrap ({bwrap}): {exc}") from exc
        if done.stdout != b"sandbox-ok":
            raise _bwrap.start_failure(done.stderr.decode("utf-8", "replace"), done.returncode)

    async def run(self, code: str, tools: Mapping[str, Tool] | None = None) -> ExecResult:
        """Run ``code``; see ``ExecResult`` for what comes back. Raises ``SandboxUnavailable`` (and
        runs nothing) when bubblewrap is missing or cannot create the sandbox."""
        bwrap = _bwrap.find_bwrap()
        execution = Execution(bwrap, self.limits, _setup(self.limits))
        return await execution.run(code, dict(tools or {}))


def _setup(limits: SandboxLimits) -> HostSetup:
    prefix = _bwrap.interpreter().prefix
    return host_setup(prefix, _bwrap.SANDBOX_UID, process_rlimits(limits))
