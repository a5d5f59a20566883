"""Record and replay: every model request and reply, and every tool result, of a run.

A :class:`Cassette` in ``record`` mode writes each model call (the request it sent — messages,
bound tools, output schema — and the reply) and each tool call (name, arguments, result) to a JSON
Lines file as the run makes them. In ``replay`` mode it answers them from the file instead: no
model is called and no tool runs, so a recorded run reruns with no network and no key. A request
that differs from the recording is a :class:`ReplayMismatch` whose message is a diff.

Calls are matched by *site* — the team path and the step or agent making the call — and by their
order at that site, so parallel steps may interleave differently from the recording.
"""

from __future__ import annotations

import difflib
import json
from collections import defaultdict, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, message_to_dict, messages_from_dict

from teamgraph.errors import UsageError
from teamgraph.llm.offline import BindsTools

FORMAT = 1
Mode = Literal["record", "replay"]


class ReplayMismatch(UsageError):
    """A replayed run asked something the recording did not: the message is a diff."""


class Cassette:
    """One run's recording, written (``record``) or read (``replay``)."""

    def __init__(self, path: str | Path, mode: Mode) -> None:
        self.path, self.mode = Path(path), mode
        self.mismatch: ReplayMismatch | None = None  # the first request the recording lacked
        self._seen: dict[str, int] = defaultdict(int)
        self._queues: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        if mode == "replay":
            self._load()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps({"teamgraph_cassette": FORMAT}) + "\n")

    @property
    def replaying(self) -> bool:
        return self.mode == "replay"

    # --- models -------------------------------------------------------------------------------
    def record_model(
        self, site: str, request: dict[str, Any], reply: AIMessage, parsed: Any = None
    ) -> None:
        self._write(
            {
                "kind": "model",
                "site": site,
                "request": request,
                "reply": message_to_dict(reply),
                "parsed": parsed,
            }
        )

    def model_reply(self, site: str, request: dict[str, Any]) -> tuple[AIMessage, Any]:
        """The recorded reply (and parsed structured value) for the next call at ``site``."""
        entry = self._next("model", site)
        if entry["request"] != request:
            raise self._mismatch(_diff(site, entry["request"], request))
        reply = messages_from_dict([entry["reply"]])[0]
        assert isinstance(reply, AIMessage)
        return reply, entry.get("parsed")

    # --- tools --------------------------------------------------------------------------------
    def record_tool(
        self,
        site: str,
        tool: str,
        args: dict[str, Any],
        content: str,
        is_error: bool,
        goto: str | None = None,
    ) -> None:
        result = {"content": content, "is_error": is_error, "goto": goto}
        self._write(
            {
                "kind": "tool",
                "site": site,
                "request": {"tool": tool, "args": args},
                "result": result,
            }
        )

    def tool_result(
        self, site: str, tool: str, args: dict[str, Any]
    ) -> tuple[str, bool, str | None]:
        """The recorded result (content, is_error, handoff target) of the next call at ``site``."""
        entry = self._next("tool", site)
        request = {"tool": tool, "args": _jsonable(args)}
        if entry["request"] != request:
            raise self._mismatch(_diff(site, entry["request"], request))
        result = entry["result"]
        return str(result["content"]), bool(result["is_error"]), result.get("goto")

    # --- the file -----------------------------------------------------------------------------
    def _write(self, entry: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(_jsonable(entry), ensure_ascii=False, sort_keys=True) + "\n")

    def _load(self) -> None:
        if not self.path.is_file():
            raise UsageError(f"--replay {self.path}: no such recording")
        lines = self.path.read_text(encoding="utf-8").splitlines()
        try:
            header = json.loads(lines[0]) if lines else {}
        except ValueError:
            header = {}
        if not isinstance(header, dict) or header.get("teamgraph_cassette") != FORMAT:
            raise UsageError(f"--replay {self.path}: not a teamgraph recording (format {FORMAT})")
        for number, line in enumerate(lines[1:], start=2):
            try:
                entry = json.loads(line)
                self._queues[f"{entry['kind']} {entry['site']}"].append(entry)
            except (ValueError, KeyError) as exc:
                raise UsageError(f"--replay {self.path}, line {number}: {exc}") from None

    def _next(self, kind: str, site: str) -> dict[str, Any]:
        self._seen[f"{kind} {site}"] += 1
        queue = self._queues.get(f"{kind} {site}")
        if not queue:
            n = self._seen[f"{kind} {site}"]
            raise self._mismatch(
                f"the recording has no {kind} call #{n} at {site}: the run asked for more than "
                f"the recorded run did"
            )
        return queue.popleft()

    def _mismatch(self, message: str) -> ReplayMismatch:
        """The error to raise; the run fails with the first one even if a step catches it."""
        error = ReplayMismatch(message)
        self.mismatch = self.mismatch or error
        return error


def model_request(
    messages: Sequence[BaseMessage], model: Any, schema: str | None = None
) -> dict[str, Any]:
    """What a model call asks, as compared on replay: the messages (without ids, tool call ids
    numbered by position), the tools bound to the model, and the output schema's name."""
    numbered: dict[str, str] = {}
    out = []
    for message in messages:
        data = message_to_dict(message)["data"]
        data.pop("id", None)
        for call in data.get("tool_calls") or []:
            call["id"] = numbered.setdefault(str(call.get("id")), f"call_{len(numbered) + 1}")
        if data.get("tool_call_id"):
            data["tool_call_id"] = numbered.get(data["tool_call_id"], data["tool_call_id"])
        for drop in ("response_metadata", "usage_metadata", "additional_kwargs", "name"):
            data.pop(drop, None)
        data.pop("invalid_tool_calls", None)
        out.append({"type": message.type, **data})
    kwargs = getattr(model, "kwargs", {}) or {}
    tools = sorted(_tool_name(t) for t in kwargs.get("tools") or [])
    request: dict[str, Any] = _jsonable({"messages": out, "tools": tools, "schema": schema})
    return request


def _tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        return str(tool.get("function", {}).get("name") or tool.get("name", ""))
    return str(getattr(tool, "name", tool))


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, sort_keys=True))


def _diff(site: str, recorded: Any, asked: Any) -> str:
    old = json.dumps(recorded, indent=1, ensure_ascii=False, sort_keys=True).splitlines()
    new = json.dumps(asked, indent=1, ensure_ascii=False, sort_keys=True).splitlines()
    lines = difflib.unified_diff(old, new, "recorded", "asked now", lineterm="", n=2)
    return f"the replayed run asked at {site} what the recording did not:\n" + "\n".join(lines)


class RecordedModel(BindsTools):
    """The model every role gets while a run is replayed: the recording answers every call, so
    this one is never asked (it says so if it is). Binding tools works as on a real model."""

    model_name: str = "replay"

    @property
    def _llm_type(self) -> str:
        return "teamgraph-replay"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        raise ReplayMismatch("a replayed run called a model: the recording should have answered")
