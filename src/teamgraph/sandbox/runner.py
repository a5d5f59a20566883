"""``Sandbox``: run untrusted Python under bubblewrap, with limits, tools callable from inside.

Every ``run`` is a new bwrap process tree with its own namespaces (user, PID, network, IPC, UTS,
cgroup, mount) and a fresh working directory. If isolation is missing, ``SandboxUnavailable`` is
raised; code is never run without it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from teamgraph.errors import SandboxUnavailable
from teamgraph.sandbox import bwrap as _bwrap
from teamgraph.sandbox._channel import Tool
from teamgraph.sandbox._execution import Execution
from teamgraph.sandbox._host import HostSetup, closed_ancestor, host_setup, make_preexec
from teamgraph.sandbox.limits import SandboxLimits, process_rlimits
from teamgraph.sandbox.result import ExecResult

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
        setup = _setup(limits)
        with _workdir(setup) as workdir:
            command = _bwrap.bwrap_command(bwrap, limits, workdir, {}, "-c", PROBE)
            try:
                done = subprocess.run(
                    command,
                    capture_output=True,
                    timeout=PROBE_TIMEOUT_S,
                    preexec_fn=make_preexec(setup),
                    start_new_session=True,
                    cwd="/",
                    check=False,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise SandboxUnavailable(f"cannot run bubblewrap ({bwrap}): {exc}") from exc
        if done.stdout != b"sandbox-ok":
            raise _bwrap.start_failure(done.stderr.decode("utf-8", "replace"))

    async def run(self, code: str, tools: Mapping[str, Tool] | None = None) -> ExecResult:
        """Run ``code``; see ``ExecResult`` for what comes back. Raises ``SandboxUnavailable`` (and
        runs nothing) when bubblewrap is missing or cannot create the sandbox."""
        bwrap = _bwrap.find_bwrap()
        setup = _setup(self.limits)
        workdir = _make_workdir(setup)
        try:
            execution = Execution(bwrap, self.limits, setup, workdir)
            return await execution.run(code, dict(tools or {}))
        finally:
            await asyncio.to_thread(remove_tree, workdir)


def _setup(limits: SandboxLimits) -> HostSetup:
    prefix = _bwrap.interpreter().prefix
    return host_setup(prefix, _bwrap.SANDBOX_UID, process_rlimits(limits))


def _make_workdir(setup: HostSetup) -> str:
    """A new empty directory, owned by the sandbox's uid, to be bound at ``/work``."""
    base = tempfile.gettempdir()
    if setup.uid is not None and closed_ancestor(os.path.join(base, "x")) is not None:
        base = "/tmp"  # bwrap, run as the sandbox's uid, could not reach it
    path = tempfile.mkdtemp(prefix="teamgraph-sandbox-", dir=base)
    if setup.uid is not None:
        os.chown(path, setup.uid, setup.uid)
    return path


@contextmanager
def _workdir(setup: HostSetup) -> Iterator[str]:
    path = _make_workdir(setup)
    try:
        yield path
    finally:
        remove_tree(path)


def remove_tree(path: str) -> None:
    """Delete a working directory, even where the sandboxed code took permissions away."""
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        return
    except OSError:
        _open_up(path)
        shutil.rmtree(path, ignore_errors=True)


def _open_up(path: str) -> None:
    """``chmod 700`` every directory below ``path``; symlinks are never followed."""
    os.chmod(path, 0o700)
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                os.chmod(full, 0o700)
