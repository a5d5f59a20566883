"""The launcher: the sandbox's first process, which prepares itself and then becomes ``bwrap``.

Run as a script by a fresh interpreter (``python -I -S _launch.py UID HIDDEN PREFIX N W S H ...
-- bwrap ...``, built by ``_host.launch_command``), so no Python runs in a forked copy of the
server. It imports only ``os`` and ``resource`` (and ``ctypes`` when it must mount): every module
here is start-up time of every sandboxed run. On failure it reports on stderr and exits
``LAUNCH_FAILED``; the parent then refuses to run the code.

When teamgraph runs as root, the sandbox must not: the kernel never applies ``RLIMIT_NPROC`` to
host root, and an escape would land as root. So the process switches to the sandbox's uid (uid and
gid, no supplementary groups) and bwrap then builds an unprivileged user namespace.

That uid may be unable to reach the interpreter (pyenv keeps it in ``/root/.pyenv``, and ``/root``
is ``0700``). Then, still as root and only in a private mount namespace of this process, a tmpfs
covers the closed directory and the interpreter's prefix is bind-mounted back into it, so bwrap
can bind it. Nothing changes on the host: the mounts are private and vanish with the process.
"""

from __future__ import annotations

import os
import resource
import sys

TYPE_CHECKING = False  # ``typing`` alone would add 7 ms to every sandboxed run
if TYPE_CHECKING:
    import ctypes
    from typing import NoReturn

LAUNCH_FAILED = 126
NONE = "-"  # no uid switch, nothing to hide
_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000


def main(argv: list[str]) -> NoReturn:
    """Prepare as ``argv`` says, then ``exec`` the command after ``--``."""
    split = argv.index("--")
    try:
        _prepare(argv[:split])
    except Exception as exc:
        _fail(f"preparing the process failed: {exc}")
    command = argv[split + 1 :]
    try:
        os.execv(command[0], command)
    except OSError as exc:
        _fail(f"cannot run {command[0]}: {exc}")


def _prepare(fields: list[str]) -> None:
    uid, hidden, prefix, count = fields[:4]
    limits = [int(value) for value in fields[4:]]
    if len(limits) != 3 * int(count):
        raise ValueError(f"expected {count} rlimits, got {limits}")
    if hidden != NONE:
        _reveal(prefix, hidden)
    if uid != NONE:
        os.setgroups([])
        os.setresgid(int(uid), int(uid), int(uid))
        os.setresuid(int(uid), int(uid), int(uid))
    for at in range(0, len(limits), 3):
        resource.setrlimit(limits[at], (limits[at + 1], limits[at + 2]))


def _fail(message: str) -> NoReturn:
    os.write(2, f"teamgraph sandbox: {message}\n".encode())
    os._exit(LAUNCH_FAILED)


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


def _libc() -> ctypes.CDLL:
    import ctypes

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
        import ctypes

        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


if __name__ == "__main__":
    main(sys.argv[1:])
