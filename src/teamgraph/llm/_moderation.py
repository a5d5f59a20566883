"""The offline model as moderator: asks for clarification of very short or vague requests."""

from __future__ import annotations

import re
import uuid
from typing import Any

from langchain_core.messages import AIMessage

VAGUE = re.compile(
    r"^\s*(help( me)?|do (it|something|stuff)|something|anything|stuff|whatever|fix (it|this)|"
    r"make it better|帮我|帮帮我|随便|做点什么|搞一下)\W*\s*$",
    re.IGNORECASE,
)
QUESTION = (
    "Could you say more about what you need — which subject, and what kind of result "
    "(for example a comparison, a summary, a plan or code)?"
)


def is_vague(request: str) -> bool:
    """Very short (fewer than three words, or four CJK characters) or a known vague phrase."""
    cjk = len(re.findall(r"[\u4e00-\u9fff]", request))
    words = len(re.findall(r"[A-Za-z0-9]+", request))
    return bool(VAGUE.match(request)) or (words + cjk // 2 < 3)


def moderate(request: str, tool: dict[str, Any]) -> AIMessage:
    """A forced structured-output call answered by rule."""
    vague = is_vague(request)
    args = {"needs_clarification": vague, "question": QUESTION if vague else ""}
    call = {"name": tool["function"]["name"], "args": args, "id": f"call_{uuid.uuid4().hex[:12]}"}
    return AIMessage(content="", tool_calls=[call])
