"""The code-execution sandbox: results, limits, escape attempts, tools, and failing closed.

Tests that run code need bubblewrap. Without it they are skipped, unless the ``CI`` environment
variable is set: then they fail. If bwrap is installed but cannot build a sandbox, they fail too.
Every escape attempt checks both sides: the sandbox reports a clear error, and the host is intact.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from teamgraph.sandbox import ExecResult, Sandbox, SandboxLimits, SandboxUnavailable
from teamgraph.sandbox import bwrap as bwrap_module
from teamgraph.sandbox import sandbox as runner_module
from teamgraph.sandbox._host import HostSetup
from teamgraph.tools.library import TOOL_DESCRIPTION, make_python_tool

from .helpers import CEILING_S

REPO = Path(__file__).resolve().parents[1]
LIMITS = SandboxLimits(
    wall_time_s=5, cpu_time_s=2, memory_mb=256, max_processes=16, max_output_bytes=10_000
)
# The sandbox's PID namespace, printed first by code whose leftovers a test looks for.
NS_PROBE = "import os\nprint(os.readlink('/proc/self/ns/pid'), flush=True)\n"
CONTAINED = re.compile(
    r"^(OSError|PermissionError|FileNotFoundError): \[Errno \d+\] "
    r"(Read-only file system|Permission denied|No such file or directory)"
)


@pytest.fixture(scope="module")
def isolation() -> None:
    """Skip (or fail on CI) without bwrap; fail if bwrap is there but cannot isolate."""
    if shutil.which(bwrap_module.BWRAP) is None:
        reason = f"bubblewrap is not installed: {bwrap_module.INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so the sandbox tests must run; {reason}")
        pytest.skip(reason)
    Sandbox.check()


@pytest.fixture
def sandbox(isolation: None) -> Sandbox:
    return Sandbox(LIMITS)


@pytest.fixture
def missing_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap_module, "BWRAP", "/nonexistent/bin/bwrap")


def processes_in(pid_namespace: str) -> list[int]:
    """Host processes (zombies included) still in the given PID namespace."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{name}/ns/pid") == pid_namespace:
                found.append(int(name))
        except OSError:
            continue
    return found


def exists(path: str | Path) -> bool:
    return Path(path).exists()


def namespace_of(result: ExecResult) -> str:
    first = result.stdout.splitlines()[0]
    assert first.startswith("pid:["), result.to_text()
    return first


# --- results ------------------------------------------------------------------------------------


async def test_print_and_last_expression_value(sandbox: Sandbox) -> None:
    result = await sandbox.run("print('hello')\nx = 6\nx * 7")
    assert (result.stdout, result.stderr, result.value) == ("hello\n", "", "42")
    assert (result.error, result.limit, result.ok) == (None, None, True)
    assert result.to_text() == "[stdout]\nhello\n[value]\n42"


async def test_no_value_without_a_trailing_expression(sandbox: Sandbox) -> None:
    assert (await sandbox.run("import sys\nsys.stderr.write('w\\n')\ny = 1")).value is None
    assert (await sandbox.run("print('last')")).value is None  # the expression is None
    assert (await sandbox.run("'a' * 3")).value == "'aaa'"


async def test_exception_type_message_and_sandbox_only_traceback(sandbox: Sandbox) -> None:
    code = "def f(d):\n    return d['missing']\n\nprint('before')\nf({})"
    result = await sandbox.run(code)
    assert result.stdout == "before\n" and result.value is None and result.limit is None
    assert result.error is not None
    assert result.error.startswith("KeyError: 'missing'\nTraceback (most recent call last):")
    assert 'File "<sandbox>", line 5, in <module>' in result.error
    assert 'File "<sandbox>", line 2, in f' in result.error
    assert "_child" not in result.error  # no frames of the sandbox's own program
    assert "[error]\nKeyError: 'missing'" in result.to_text()


async def test_syntax_error_and_exit_codes(sandbox: Sandbox) -> None:
    syntax = await sandbox.run("x = = 1")
    assert syntax.error is not None and syntax.error.startswith("SyntaxError: invalid syntax")
    assert "(line 1)" in syntax.error
    assert (await sandbox.run("import sys\nsys.exit(0)")).error is None
    assert (await sandbox.run("exit(3)")).error == "SystemExit: 3"


async def test_stdin_is_empty_and_limits_are_set(sandbox: Sandbox) -> None:
    code = (
        "import resource, sys\n"
        "print(sys.stdin.read() == '')\n"
        "[resource.getrlimit(getattr(resource, 'RLIMIT_' + n))[1] "
        "for n in ('AS', 'NPROC', 'CPU', 'FSIZE', 'CORE')]"
    )
    result = await sandbox.run(code)
    assert result.stdout == "True\n"
    assert result.value == str([256 * 2**20, 16, 3, 50 * 2**20, 0])


def test_to_text_labels_sections() -> None:
    result = ExecResult(stdout="out\n", stderr="warn", value="1", error="E: x", limit=None)
    assert result.to_text() == "[stdout]\nout\n[stderr]\nwarn\n[value]\n1\n[error]\nE: x"
    assert ExecResult().to_text() == "(no output, no value, no error)"


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="cpu_time_s"):
        SandboxLimits(cpu_time_s=0)


# --- escape attempts: files -----------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    ["/etc/sandbox_escape", "/root/sandbox_escape", str(REPO / "sandbox_escape"), "/usr/x"],
)
async def test_writes_outside_the_workdir_fail(sandbox: Sandbox, target: str) -> None:
    result = await sandbox.run(f"open({target!r}, 'w').write('pwned')")
    assert result.error is not None and CONTAINED.match(result.error), result.error
    assert not exists(target)


@pytest.mark.parametrize("target", [os.path.realpath(sys.executable), "/usr/bin/env"])
async def test_interpreter_and_system_files_cannot_be_deleted(
    sandbox: Sandbox, target: str
) -> None:
    before = os.stat(target)
    result = await sandbox.run(f"import os\nos.remove({target!r})")
    assert result.error is not None and CONTAINED.match(result.error), result.error
    assert os.stat(target).st_ino == before.st_ino


async def test_host_files_and_environment_are_invisible(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAMGRAPH_SECRET", "xyz")
    assert exists(REPO / "pyproject.toml")
    for path in ["/root/.bash_history", "/etc/shadow", "/etc/passwd", str(REPO / "pyproject.toml")]:
        result = await sandbox.run(f"open({path!r}).read()")
        assert result.error is not None and result.error.startswith("FileNotFoundError"), path
    result = await sandbox.run("import os\nsorted(os.environ), os.environ.get('TEAMGRAPH_SECRET')")
    assert "TEAMGRAPH_SECRET" not in (result.value or "") and "xyz" not in (result.value or "")
    assert result.value is not None and result.value.endswith(", None)")
    listing = await sandbox.run("import os\nsorted(os.listdir('/')), os.listdir('/root')")
    assert "'home'" not in str(listing.value) and "'.bash_history'" not in str(listing.value)


async def test_runs_unprivileged_in_its_own_pid_namespace(sandbox: Sandbox) -> None:
    code = (
        "import os\n"
        "status = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines())\n"
        "os.getuid(), status['CapEff'].strip(), status['Groups'].strip(), "
        "sorted(p for p in os.listdir('/proc') if p.isdigit())"
    )
    result = await sandbox.run(code)
    uid, caps, groups, pids = eval(result.value or "")  # a repr of plain data
    assert uid != 0 and caps == "0000000000000000" and pids == ["1"]
    if os.geteuid() == 0:  # dropped to the sandbox uid, with no supplementary groups
        assert uid == bwrap_module.SANDBOX_UID and groups == ""


async def test_each_run_gets_a_fresh_workdir_of_its_own(sandbox: Sandbox) -> None:
    first = await sandbox.run("import os\nopen('note.txt', 'w').write('hi')\nos.getcwd()")
    second = await sandbox.run("import os\nos.path.exists('note.txt'), os.listdir('.')")
    assert (first.value, second.value) == ("'/work'", "(False, [])")


async def test_the_mount_table_names_no_host_path_of_the_run_s_files(sandbox: Sandbox) -> None:
    result = await sandbox.run("open('/proc/self/mountinfo').read()")
    mounts = eval(result.value or "")  # the repr of a str
    work = [line for line in mounts.splitlines() if line.split()[4] == "/work"]
    assert len(work) == 1 and " - tmpfs " in work[0]  # memory, not a host directory
    assert tempfile.gettempdir() not in mounts.replace(" /tmp ", " ")  # only the sandbox's /tmp
    assert "teamgraph-sandbox" not in mounts and str(Path.cwd()) not in mounts


# --- escape attempts: network ---------------------------------------------------------------


async def test_no_network_not_even_the_hosts_loopback(sandbox: Sandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    port = server.getsockname()[1]
    try:
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 2)"
        local = await sandbox.run(code)
        with pytest.raises(BlockingIOError):  # nothing ever reached the server
            server.accept()
    finally:
        server.close()
    assert local.error is not None and local.error.startswith("ConnectionRefusedError")
    outside = await sandbox.run("import socket\nsocket.create_connection(('1.1.1.1', 80), 2)")
    assert outside.error is not None and outside.error.startswith("OSError: [Errno 101]")
    dns = await sandbox.run("import socket\nsocket.getaddrinfo('example.com', 443)")
    assert dns.error is not None and dns.error.startswith("socket.gaierror")


# --- resource limits --------------------------------------------------------------------------

GUARDED_FORK_BOMB = NS_PROBE + (
    "import time\nchildren = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
    "            time.sleep(60)\n            os._exit(0)\n        children += 1\n"
    "finally:\n    print('forked', children)\n"
)


async def test_fork_bomb_is_contained_and_leaves_nothing(sandbox: Sandbox) -> None:
    # stopped by the process limit, not the wall clock (how soon: benchmarks/sandbox.py)
    guarded = await sandbox.run(GUARDED_FORK_BOMB)
    bomb = await sandbox.run(NS_PROBE + "while True:\n    os.fork()")
    for result in (guarded, bomb):
        assert result.limit == "processes", result.to_text()
        assert result.error is not None and result.error.startswith("BlockingIOError")
        assert processes_in(namespace_of(result)) == []
    assert "forked 15" in guarded.stdout  # 16 processes: the sandbox's own and 15 forks
    host = await asyncio.create_subprocess_exec("true")  # and the host can still fork
    assert await host.wait() == 0


async def test_process_limit_is_per_sandbox(sandbox: Sandbox) -> None:
    results = await asyncio.gather(*(sandbox.run(GUARDED_FORK_BOMB) for _ in range(3)))
    assert all("forked 15" in result.stdout for result in results)


async def test_threads_count_as_processes(sandbox: Sandbox) -> None:
    code = "import threading, time\nfor _ in range(100):\n"
    code += "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()"
    result = await sandbox.run(code)
    assert result.limit == "processes" and result.error is not None
    assert result.error.startswith("RuntimeError: can't start new thread")


async def test_allocating_10_gb_hits_the_memory_limit(sandbox: Sandbox) -> None:
    result = await sandbox.run("data = bytearray(10 * 1024**3)")
    assert result.limit == "memory"
    assert result.error is not None and result.error.startswith("MemoryError")


async def test_busy_loop_stops_at_the_cpu_limit(isolation: None) -> None:
    # the wall-clock limit is only a ceiling: the CPU limit must stop both loops, however
    # busy the host (how soon after the limit: benchmarks/sandbox.py)
    sandbox = Sandbox(SandboxLimits(wall_time_s=CEILING_S, cpu_time_s=1))
    python_loop = await sandbox.run("while True:\n    pass")
    assert python_loop.limit == "cpu_time" and python_loop.error is not None
    assert "CPU time limit of 1 s exceeded" in python_loop.error
    c_loop = await sandbox.run("sum(range(10**15))")  # stuck in C, no Python handler: hard limit
    assert c_loop.limit == "cpu_time" and "SIGKILL" in (c_loop.error or "")


async def test_sleeping_stops_at_the_wall_clock_and_leaves_nothing(isolation: None) -> None:
    sandbox = Sandbox(SandboxLimits(wall_time_s=1.5))
    start = time.monotonic()
    code = NS_PROBE + "import subprocess\nsubprocess.Popen(['sleep', '60'])\nimport time\n"
    result = await sandbox.run(code + "print('waiting', flush=True)\ntime.sleep(60)")
    assert time.monotonic() - start >= 1.5  # not before its limit (how soon after: benchmarks)
    assert result.limit == "wall_time" and "wall-clock time limit of 1.5 s" in str(result.error)
    assert result.stdout.endswith("waiting\n")  # output up to the kill is kept
    assert processes_in(namespace_of(result)) == []


async def test_cancelling_a_run_kills_the_sandbox(sandbox: Sandbox) -> None:
    seen: list[str] = []
    reported = asyncio.Event()

    async def report(namespace: str) -> str:
        seen.append(namespace)
        reported.set()
        return "ok"

    code = "import os, time\nreport(namespace=os.readlink('/proc/self/ns/pid'))\ntime.sleep(60)"
    running = asyncio.create_task(sandbox.run(code, {"report": report}))
    await asyncio.wait_for(reported.wait(), CEILING_S)  # the code runs, sleeping in the sandbox
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert len(seen) == 1 and processes_in(seen[0]) == []


async def test_output_is_capped(sandbox: Sandbox) -> None:
    result = await sandbox.run("print('x' * 50_000)\nimport sys\nsys.stderr.write('e' * 100)\n1")
    assert result.limit == "output" and result.value == "1" and result.error is None
    assert result.stdout.startswith("x" * 10_000)
    assert result.stdout.count("x") == 10_000 and "output cut" in result.stdout
    assert (await sandbox.run("print('x' * 9_000)")).limit is None


async def test_files_are_size_limited(sandbox: Sandbox) -> None:
    result = await sandbox.run("open('big', 'wb').write(b'0' * (51 * 1024 * 1024))")
    assert str(result.error).startswith("OSError: [Errno 27] File too large")


# --- tools ------------------------------------------------------------------------------------


async def test_tools_are_functions_inside_the_sandbox(sandbox: Sandbox) -> None:
    calls: list[dict[str, Any]] = []

    async def lookup(key: str, times: int = 1) -> str:
        calls.append({"key": key, "times": times})
        return key.upper() * times

    async def broken(**kwargs: Any) -> str:
        raise ValueError("backend down")

    code = (
        "a = lookup(key='x', times=2)\nb = lookup(key='y')\n"
        "try:\n    broken(query='q')\nexcept ToolError as exc:\n    print('caught:', exc)\n"
        "a + b"
    )
    result = await sandbox.run(code, {"lookup": lookup, "broken": broken})
    assert (result.value, result.stdout, result.error) == ("'XXY'", "caught: backend down\n", None)
    assert calls == [{"key": "x", "times": 2}, {"key": "y", "times": 1}]
    uncaught = await sandbox.run("broken(query='q')", {"broken": broken})
    assert uncaught.error is not None and uncaught.error.startswith("ToolError: backend down")


async def test_tool_arguments_and_results_must_be_json(sandbox: Sandbox) -> None:
    async def odd(**kwargs: Any) -> object:
        return {1, 2}

    args = await sandbox.run("odd(value={1, 2})", {"odd": odd})
    assert args.error is not None and args.error.startswith("TypeError: arguments of odd()")
    answer = await sandbox.run("odd()", {"odd": odd})
    assert answer.error is not None and "not JSON-serialisable" in answer.error
    positional = await sandbox.run("odd(1)", {"odd": odd})
    assert positional.error is not None and "keyword arguments only" in positional.error


# --- failing closed ---------------------------------------------------------------------------


async def test_missing_bwrap_refuses_and_runs_nothing(missing_bwrap: None, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap"):
        await Sandbox().run(f"open({str(marker)!r}, 'w')")
    with pytest.raises(SandboxUnavailable, match="not found"):
        Sandbox.check()
    assert not exists(marker)


@pytest.fixture
def refusing_bwrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A bwrap that fails like one denied user namespaces (in a directory any uid can enter)."""
    directory = tempfile.mkdtemp(prefix="fake-bwrap-")
    os.chmod(directory, 0o755)
    script = Path(directory, "bwrap")
    script.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the "
        "kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | 0o444)
    monkeypatch.setattr(bwrap_module, "BWRAP", str(script))
    yield directory
    script.unlink()
    os.rmdir(directory)


async def test_namespace_refusal_refuses_and_runs_nothing(
    refusing_bwrap: str, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(SandboxUnavailable, match="unprivileged user namespaces") as refused:
        await Sandbox().run(f"open({str(marker)!r}, 'w')")
    assert "No permissions to creating new namespace" in str(refused.value)
    with pytest.raises(SandboxUnavailable, match="could not start"):
        Sandbox.check()
    assert not exists(marker)


async def test_failing_to_prepare_the_process_refuses(
    isolation: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    prefix = bwrap_module.interpreter().prefix
    broken = HostSetup(uid=None, prefix=prefix, hidden="/nonexistent-dir", rlimits=[])
    monkeypatch.setattr(runner_module, "_setup", lambda limits: broken)
    marker = tmp_path / "ran"
    with pytest.raises(SandboxUnavailable, match="preparing the process failed"):
        await Sandbox().run(f"open({str(marker)!r}, 'w')")
    assert not exists(marker)


# --- the python tool --------------------------------------------------------------------------


async def test_python_tool_runs_code(sandbox: Sandbox) -> None:
    tool = make_python_tool(sandbox)
    assert (tool.name, tool.description) == ("python", TOOL_DESCRIPTION)
    assert list(tool.args) == ["code"]
    text = await tool.ainvoke({"code": "print('hi')\n6 * 7"})
    assert text == "[stdout]\nhi\n[value]\n42"


async def test_python_tool_returns_the_refusal(missing_bwrap: None) -> None:
    text = await make_python_tool().ainvoke({"code": "1 + 1"})
    assert text.startswith("code execution refused: bubblewrap (`/nonexistent/bin/bwrap`)")


def test_the_sandbox_runs_and_refuses_alike_on_uvloop(
    isolation: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``teamgraph serve`` runs on uvloop (uvicorn picks it): the sandbox runs there, and a
    launcher that cannot prepare the process is refused with what failed."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        result = runner.run(Sandbox().run("print('hi')\n6 * 7"))
        assert (result.stdout, result.value) == ("hi\n", "42")
        prefix = bwrap_module.interpreter().prefix
        broken = HostSetup(uid=None, prefix=prefix, hidden="/nonexistent-dir", rlimits=[])
        monkeypatch.setattr(runner_module, "_setup", lambda limits: broken)
        marker = tmp_path / "ran"
        with pytest.raises(SandboxUnavailable, match="preparing the process failed"):
            runner.run(Sandbox().run(f"open({str(marker)!r}, 'w')"))
    assert not exists(marker)


@pytest.mark.parametrize("loop_factory", [asyncio.new_event_loop, uvloop.new_event_loop])
def test_no_python_runs_in_the_forked_copy_of_the_server(
    isolation: None, tmp_path: Path, loop_factory: Callable[[], asyncio.AbstractEventLoop]
) -> None:
    """A server has threads; Python run between ``fork`` and ``exec`` in a copy of it can die
    before the sandbox starts ('Fatal Python error: Aborted'). The launcher runs in a fresh
    interpreter instead: no after-fork hook of the server's runs in its children."""
    forked = tmp_path / "forked"
    _FORK_WATCH[:] = [str(forked)]
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            result = runner.run(Sandbox().run("print('hi')"))
    finally:
        _FORK_WATCH.clear()
    assert result.stdout == "hi\n"
    assert not exists(forked)


_FORK_WATCH: list[str] = []


def _after_fork_in_child() -> None:
    if _FORK_WATCH:
        open(_FORK_WATCH[0], "w").close()


os.register_at_fork(after_in_child=_after_fork_in_child)
