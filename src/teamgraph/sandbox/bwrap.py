"""The bubblewrap command line of one sandboxed execution, and what to say when it cannot start.

``BWRAP`` (a name looked up on ``PATH``, or a path) and ``SANDBOX_UID`` are module constants so a
deployment, or a test, can change them.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from teamgraph.errors import SandboxUnavailable
from teamgraph.sandbox.limits import MIB, SandboxLimits

BWRAP = "bwrap"
SANDBOX_UID = 65534  # "nobody": the sandbox's uid and gid when teamgraph runs as root
WORKDIR = "/work"
CHILD_DIR = "/run/teamgraph"  # the sandbox's own program, read-only
SYSTEM_LINKS = ("bin", "lib", "lib32", "lib64", "libx32", "sbin")
INSTALL_HINT = (
    "install bubblewrap (`apt-get install -y bubblewrap` on Debian/Ubuntu, `dnf install "
    "bubblewrap` on Fedora; `make setup` does it on this project's machines)"
)
NAMESPACE_HINT = (
    " — bubblewrap needs unprivileged user namespaces: allow them with `sysctl -w "
    "kernel.unprivileged_userns_clone=1` (older Debian) or `sysctl -w "
    "kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 24.04+), make sure "
    "user.max_user_namespaces > 0, and inside Docker run the container with a seccomp/AppArmor "
    "profile that permits them (e.g. `--security-opt seccomp=unconfined --security-opt "
    "apparmor=unconfined`)"
)


@dataclass(frozen=True)
class Interpreter:
    """The Python the sandbox runs: ``executable`` lies under ``prefix`` (``sys.base_prefix``),
    which is bound read-only at the same path inside the sandbox."""

    executable: str
    prefix: str


def find_bwrap() -> str:
    """The bwrap program to run, or ``SandboxUnavailable`` saying how to install it."""
    path = shutil.which(BWRAP)
    if path is None:
        raise SandboxUnavailable(
            f"bubblewrap (`{BWRAP}`) was not found, so code cannot be isolated and is not run: "
            + INSTALL_HINT
        )
    return path


@functools.cache
def interpreter() -> Interpreter:
    """This process's own interpreter, without its virtual environment (standard library only)."""
    prefix = os.path.realpath(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [
        os.path.realpath(sys.executable),
        os.path.join(prefix, "bin", version),
        os.path.join(prefix, "bin", "python3"),
    ]
    for candidate in candidates:
        if candidate.startswith(prefix + os.sep) and os.access(candidate, os.X_OK):
            return Interpreter(candidate, prefix)
    raise SandboxUnavailable(f"no Python interpreter found under sys.base_prefix ({prefix})")


def bwrap_command(
    bwrap: str, limits: SandboxLimits, files: Mapping[str, int], *args: str
) -> list[str]:
    """``bwrap ... python -I -S -u -X utf8 <args>``: every namespace unshared, a minimal read-only
    file system with no writable host path (``/work`` and ``/tmp`` are in-memory file systems of
    the run's own, gone with it). ``files`` maps file names to readable fds whose contents become
    read-only files in ``CHILD_DIR``.

    Python is the PID namespace's PID 1 (``--as-pid-1``), so bwrap itself reaps it: no zombie is
    left to the host's init, which may not reap (a containerised app is often PID 1 itself).
    """
    python = interpreter()
    data = [
        arg for name, fd in files.items() for arg in ("--ro-bind-data", str(fd), child_path(name))
    ]
    return [
        bwrap,
        *("--unshare-all", "--unshare-user", "--disable-userns"),
        *("--die-with-parent", "--as-pid-1", "--new-session", "--hostname", "sandbox"),
        *_environment(python),
        *_file_system(python, limits),
        *data,
        *("--remount-ro", "/dev", "--remount-ro", "/", "--chdir", WORKDIR),
        "--",
        *(python.executable, "-I", "-S", "-u", "-X", "utf8", *args),
    ]


def child_path(name: str) -> str:
    """Where a file given to ``bwrap_command`` appears inside the sandbox."""
    return f"{CHILD_DIR}/{name}"


def _environment(python: Interpreter) -> list[str]:
    env = {
        "PATH": f"{python.prefix}/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": WORKDIR,
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONUNBUFFERED": "1",
        # glibc reserves 64 MiB of address space per malloc arena (one per thread, up to 8 per
        # core); under RLIMIT_AS that would cap the sandbox at a handful of threads
        "MALLOC_ARENA_MAX": "2",
    }
    args = ["--clearenv"]
    for name, value in env.items():
        args += ["--setenv", name, value]
    return args


def _file_system(python: Interpreter, limits: SandboxLimits) -> list[str]:
    """What the code sees of a file system. Nothing of it names a host path or device it could
    not see anyway (``/proc/self/mountinfo`` lists the binds of ``/usr`` and the interpreter,
    not where the run's files live: they are on tmpfs, not in a host directory)."""
    args = ["--ro-bind", "/usr", "/usr", *_system_links()]
    if not _is_under(python.prefix, "/usr"):
        args += ["--ro-bind", python.prefix, python.prefix]
    return [
        *args,
        *("--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"),
        *("--proc", "/proc", "--dev", "/dev"),
        *("--size", str(limits.max_file_mb * MIB), "--tmpfs", "/tmp"),
        *("--size", str(limits.max_file_mb * MIB), "--tmpfs", WORKDIR),
    ]


def _system_links() -> list[str]:
    """``/bin``, ``/lib``, ... as on the host: symlinks into ``/usr`` or read-only binds."""
    args: list[str] = []
    for name in SYSTEM_LINKS:
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def start_failure(stderr: str, returncode: int | None = None) -> SandboxUnavailable:
    """The refusal when the sandbox did not get as far as running the code: what bubblewrap or
    the launcher said, else how the process ended."""
    detail = stderr.strip()[-2000:]
    if not detail:
        status = "" if returncode is None else f", exit status {returncode}"
        detail = f"no error output{status}"
    hint = NAMESPACE_HINT if detail.startswith("bwrap:") else ""
    return SandboxUnavailable(f"the sandbox could not start ({detail}){hint}")
