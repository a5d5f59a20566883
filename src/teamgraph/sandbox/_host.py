"""What the sandbox's first process does between ``fork`` and ``exec bwrap`` (``preexec_fn``).

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
import os
import resource
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PREEXEC_FAILED = 126
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
    hidden = closed_ancestor(prefix)
    if hidden is not None:
        _libc()  # load it before fork, not in the child
    return HostSetup(uid, prefix, hidden, rlimits)


def closed_ancestor(path: str) -> str | None:
    """The outermost directory above ``path`` that other users may not enter, if any."""
    for parent in reversed(Path(path).parents):
        if parent != Path("/") and not os.stat(parent).st_mode & stat.S_IXOTH:
            return str(parent)
    return None


def make_preexec(setup: HostSetup) -> Callable[[], None]:
    """The ``preexec_fn``; on failure it reports on stderr and exits ``PREEXEC_FAILED`` (the parent
    then sees a sandbox that never started and refuses to run the code)."""

    def preexec() -> None:
        try:
            if setup.hidden is not None:
                _reveal(setup.prefix, setup.hidden)
            if setup.uid is not None:
                os.setgroups([])
                os.setresgid(setup.uid, setup.uid, setup.uid)
                os.setresuid(setup.uid, setup.uid, setup.uid)
            for which, values in setup.rlimits:
                resource.setrlimit(which, values)
        except BaseException as exc:
            os.write(2, f"teamgraph sandbox: preparing the process failed: {exc}\n".encode())
            os._exit(PREEXEC_FAILED)

    return preexec


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
