"""What the sandbox's first process does before it becomes ``bwrap``: the launcher.

The launcher is this file run as a script by a fresh interpreter (``python -I -S _host.py SETUP
bwrap ...``): it prepares the process, then ``exec``s bubblewrap. No Python runs between ``fork``
and ``exec`` in the server (a ``preexec_fn`` does, and in a process with other threads — a server
always has some — the forked copy can die before it starts: ``Fatal Python error: Aborted``).

When teamgraph runs as root, the sandbox must not: the kernel never applies ``RLIMIT_NPROC`` to
host root, and an escape would land as root. So the process switches to ``SANDBOX_UID`` (uid and
gid, no supplementary groups) and bwrap then builds an unprivileged user namespace.

That uid may be unable to reach the interpreter (pyenv keeps it in ``/root/.pyenv``, and ``/root``
is ``0700``). Then, still as root and only in a private mount namespace of this process, a tmpfs
covers the closed directory and the interpreter's prefix is bind-mounted back into it, so bwrap
can bind it. Nothing changes on the host: the mounts are private and vanish with the process.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import resource
import stat
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NoReturn

LAUNCH_FAILED = 126
_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000


@dataclass(frozen=True)
class HostSetup:
    """``uid``: switch to it (root only). ``hidden``: the closed ancestor of ``prefix`` to cover.
    ``rlimits``: ``(resource, (soft, hard))`` pairs to set last."""

    uid: int | None
    prefix: str
    hidden: str | None
    rlimits: list[tuple[int, tuple[int, int]]]


def host_setup(prefix: str, uid: int, rlimits: list[tuple[int, tuple[int, int]]]) -> HostSetup:
    """The setup for this process: switch to ``uid`` only when running as root."""
    if os.geteuid() != 0:
        return HostSetup(None, prefix, None, rlimits)
    return HostSetup(uid, prefix, closed_ancestor(prefix), rlimits)


def closed_ancestor(path: str) -> str | None:
    """The outermost directory above ``path`` that other users may not enter, if any."""
    for parent in reversed(Path(path).parents):
        if parent != Path("/") and not os.stat(parent).st_mode & stat.S_IXOTH:
            return str(parent)
    return None


def launch_command(setup: HostSetup, command: list[str]) -> list[str]:
    """The command line that prepares a fresh process as ``setup`` says, then runs ``command``.
    On failure the launcher reports on its stderr and exits ``LAUNCH_FAILED`` (the parent then
    sees a sandbox that never started and refuses to run the code)."""
    return [sys.executable, "-I", "-S", __file__, json.dumps(asdict(setup)), *command]


def _launch(argv: list[str]) -> None:
    """The launcher's body: prepare, then ``exec`` the command (never returns)."""
    fields = json.loads(argv[0])
    rlimits = [(which, (soft, hard)) for which, (soft, hard) in fields.pop("rlimits")]
    setup = HostSetup(**fields, rlimits=rlimits)
    try:
        _prepare(setup)
    except BaseException as exc:
        _fail(f"preparing the process failed: {exc}")
    try:
        os.execv(argv[1], argv[1:])
    except OSError as exc:
        _fail(f"cannot run {argv[1]}: {exc}")


def _fail(message: str) -> NoReturn:
    os.write(2, f"teamgraph sandbox: {message}\n".encode())
    os._exit(LAUNCH_FAILED)


def _prepare(setup: HostSetup) -> None:
    if setup.hidden is not None:
        _reveal(setup.prefix, setup.hidden)
    if setup.uid is not None:
        os.setgroups([])
        os.setresgid(setup.uid, setup.uid, setup.uid)
        os.setresuid(setup.uid, setup.uid, setup.uid)
    for which, values in setup.rlimits:
        resource.setrlimit(which, values)


def _reveal(prefix: str, hidden: str) -> None:
    """In a private mount namespace: a tmpfs over ``hidden``, ``prefix`` bound back into it."""
    libc = _libc()
    _check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make mounts private")
    fd = os.open(prefix, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)  # in the new namespace
    try:
        flags = _MS_NOSUID | _MS_NODEV
        _check(libc.mount(b"tmpfs", hidden.encode(), b"tmpfs", flags, b"mode=0755,size=1m"), hidden)
        os.umask(0o022)  # the directories down to ``prefix`` must be enterable by the sandbox
        os.makedirs(prefix, exist_ok=True)
        source = f"/proc/self/fd/{fd}".encode()
        _check(libc.mount(source, prefix.encode(), None, _MS_BIND | _MS_REC, None), prefix)
    finally:
        os.close(fd)


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare.argtypes = [ctypes.c_int]
    libc.mount.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_ulong,
        ctypes.c_char_p,
    ]
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


if __name__ == "__main__":
    _launch(sys.argv[1:])
