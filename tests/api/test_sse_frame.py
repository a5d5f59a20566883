"""An event's SSE frame is one server-sent event whatever its text holds (line breaks of every
kind, blank lines, ``data:`` inside the text): parsed by the SSE rules, it is the event again."""

from __future__ import annotations

import re

from teamgraph.events import AgentMessage, event_from_json
from teamgraph.server.sse import frame


def _parse(stream: str) -> list[dict[str, str]]:
    """Server-sent events as the HTML standard reads them (lines end at CRLF, LF or CR)."""
    events: list[dict[str, str]] = []
    fields: dict[str, str] = {}
    for line in re.split(r"\r\n|\r|\n", stream):
        if not line:
            if fields:
                events.append(fields)
            fields = {}
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        fields[name] = f"{fields[name]}\n{value}" if name == "data" and name in fields else value
    return events


def test_an_event_frame_is_one_server_sent_event_whatever_its_text_holds() -> None:
    texts = ["plain", "two\nlines", "crlf\r\nand cr\rend", "blank\n\nline", "\ndata: forged\n\n"]
    events = [
        AgentMessage(run_id="r", seq=seq, agent="a", content=text)
        for seq, text in enumerate(texts, 1)
    ]
    stream = "".join(frame(e.type, e.encoded, e.seq) for e in events)
    parsed = _parse(stream)
    assert [p["id"] for p in parsed] == [str(e.seq) for e in events]
    assert {p["event"] for p in parsed} == {"agent_message"}
    assert [event_from_json(p["data"]) for p in parsed] == events


def test_line_readers_that_split_like_str_splitlines_read_one_line_per_field() -> None:
    texts = ["next\u2028line", "para\u2029graph", "nel\x85here", "ascii only"]
    events = [
        AgentMessage(run_id="r", seq=seq, agent="a", content=text)
        for seq, text in enumerate(texts, 1)
    ]
    stream = "".join(frame(e.type, e.encoded, e.seq) for e in events)
    lines = stream.splitlines()  # as httpx's aiter_lines splits
    data = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
    assert [event_from_json(d) for d in data] == events  # the same text, escaped in JSON
    assert len(lines) == 4 * len(events)  # id, event, data and the blank line: nothing else
