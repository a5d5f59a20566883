"""The program run inside the sandbox: ``python -I -S /run/teamgraph/_child.py <fd>``.

It reads its configuration from stdin, runs the code with "last expression" semantics, serves the
tool stubs and reports (protocol in ``_channel.py``). Standard library only, and only C modules up
front because start-up time counts: ``json`` would import ``re``, ``signal`` ``enum``, ``ast``
much of the rest. ``_child_errors.py`` (next to this file in the sandbox) describes exceptions.
"""

from __future__ import annotations

import _ast
import _json
import _signal  # type: ignore[import-not-found]  # (no stub; same API as ``signal``)
import _thread
import builtins
import os
import resource
import sys

MYPY = False
if MYPY:  # for the type checker only: ``typing`` is slow to import
    from typing import IO, Any, NoReturn

    Config = dict[str, Any]
    Report = dict[str, str | None]

    from teamgraph.sandbox._child_errors import CpuTimeLimitExceeded, classify, describe, summary
else:  # in the sandbox, the two files lie side by side
    sys.path.insert(0, os.path.dirname(__file__))
    from _child_errors import CpuTimeLimitExceeded, classify, describe, summary

    del sys.path[0]

FILENAME = "<sandbox>"
MAIN_PID = os.getpid()


class JsonOptions:  # what ``_json.make_scanner`` reads, as ``json.loads`` sets it
    strict, object_hook, object_pairs_hook = True, None, None
    parse_float, parse_int, parse_constant = float, int, float


SCAN = _json.make_scanner(JsonOptions)  # type: ignore[arg-type]


def loads(text: str) -> Any:
    return SCAN(text, 0)[0]


def unsupported(value: object) -> NoReturn:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(value: object) -> str:
    encoding: Any = (
        {},
        unsupported,
        _json.encode_basestring_ascii,
        None,
        ":",
        ",",
        False,
        False,
        True,
    )
    return "".join(_json.make_encoder(*encoding)(value, 0))


class ToolError(Exception):
    """A tool called from the sandboxed code failed; the message is the tool's error."""


class Channel:
    """JSON lines to the parent (``out_fd``) and tool replies back from it (``replies``)."""

    def __init__(self, out_fd: int, replies: IO[bytes]) -> None:
        self.out_fd, self.replies = out_fd, replies
        self.lock = _thread.allocate_lock()

    def send(self, message: dict[str, Any]) -> None:
        data = (dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.out_fd, data) :]

    def call(self, tool: str, args: dict[str, Any]) -> Any:
        try:
            dumps(args)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"arguments of {tool}() must be JSON-serialisable: {exc}") from None
        with self.lock:
            self.send({"type": "call", "tool": tool, "args": args})
            line = self.replies.readline()
        if not line:
            raise ToolError(f"{tool}: no reply (the tool channel is closed)")
        reply = loads(line.decode())
        if reply.get("ok"):
            return reply.get("result")
        raise ToolError(reply.get("error") or f"{tool} failed")


def make_stub(channel: Channel, name: str) -> Any:
    def stub(*args: object, **kwargs: Any) -> Any:
        if args:
            raise TypeError(f"{name}() takes keyword arguments only: {name}(argument=value, ...)")
        return channel.call(name, kwargs)

    stub.__name__ = stub.__qualname__ = name
    return stub


def execute(code: str, namespace: dict[str, Any]) -> Any:
    """Run ``code``; the value of a trailing expression, else ``None``."""
    tree: Any = compile(code, FILENAME, "exec", _ast.PyCF_ONLY_AST)  # ``ast.parse``
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], _ast.Expr) else None
    exec(compile(tree, FILENAME, "exec"), namespace)
    if last is None:
        return None
    return eval(compile(_ast.Expression(last.value), FILENAME, "eval"), namespace)


def run(config: Config, namespace: dict[str, Any]) -> Report:
    """The report on running the code: ``{"value", "error", "limit"}``."""
    try:
        try:
            value = execute(config["code"], namespace)
            shown = None if value is None else repr(value)
        finally:  # from here on, the hard CPU limit (one second later) is enough
            _signal.signal(_signal.SIGXCPU, _signal.SIG_IGN)
    except SystemExit as exc:
        failed = exc.code not in (None, 0)
        return {"value": None, "error": summary(exc) if failed else None, "limit": None}
    except BaseException as exc:
        limit, note = classify(exc, config)
        return {"value": None, "error": describe(exc, note, config["code"]), "limit": limit}
    return {"value": shown, "error": None, "limit": None}


def on_sigxcpu(signum: int, frame: object) -> NoReturn:
    raise CpuTimeLimitExceeded


def setup(config: Config, channel: Channel) -> dict[str, Any]:
    """Limit the processes (in this user namespace: the sandbox's own), catch ``SIGXCPU``, and
    build the code's globals: ``ToolError`` and one function per tool."""
    nproc = config["max_processes"]
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    _signal.signal(_signal.SIGXCPU, on_sigxcpu)
    vars(builtins).update(exit=sys.exit, quit=sys.exit)  # ``site`` is not loaded (-S)
    namespace = {"__name__": "__main__", "__builtins__": builtins, "ToolError": ToolError}
    namespace.update((name, make_stub(channel, name)) for name in config["tools"])
    return namespace


def finish(channel: Channel, report: Report, max_chars: int) -> NoReturn:
    """Report (from the sandbox's first process only, not from forks of it) and exit."""
    if os.getpid() != MAIN_PID:
        os._exit(0)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # the sandboxed code may have replaced or closed it
            continue
    for key, text in report.items():
        if text is not None and len(text) > max_chars:
            report[key] = text[:max_chars] + f"... [{len(text) - max_chars} more characters cut]"
    channel.send({"type": "result", **report})
    os._exit(0)


def main() -> None:
    out_fd = int(sys.argv[1])
    os.set_inheritable(out_fd, False)
    replies = os.fdopen(os.dup(0), "rb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    config = loads(replies.readline().decode())
    channel = Channel(out_fd, replies)
    namespace = setup(config, channel)
    channel.send({"type": "ready"})
    finish(channel, run(config, namespace), config["max_chars"])


if __name__ == "__main__":
    main()
