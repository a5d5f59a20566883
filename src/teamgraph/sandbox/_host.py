"""What the server decides about the sandbox's first process, which ``_launch.py`` then carries
out: switch to ``SANDBOX_UID`` when running as root, uncover the interpreter if that uid cannot
reach it, set the rlimits (see ``_launch.py`` for why each)."""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from teamgraph.sandbox import _launch

LAUNCHER = _launch.__file__


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
    """The command line that prepares a fresh process as ``setup`` says, then runs ``command``."""
    fields = [
        _launch.NONE if setup.uid is None else str(setup.uid),
        setup.hidden or _launch.NONE,
        setup.prefix,
        str(len(setup.rlimits)),
    ]
    for which, (soft, hard) in setup.rlimits:
        fields += [str(which), str(soft), str(hard)]
    return [sys.executable, "-I", "-S", LAUNCHER, *fields, "--", *command]
