"""The wire dialects teamgraph speaks, one adapter module each, all on one seam
(:mod:`.adapter`): teamgraph's own runs API (:mod:`.runs`), OpenAI chat completions
(:mod:`.openai`), the LangGraph Agent Protocol (:mod:`.agent_protocol`), AG-UI (:mod:`.agui`) and
teams as MCP tools (:mod:`.mcp`) and as A2A agents (:mod:`.a2a`).
A new protocol is one more module here and its router in :data:`ROUTERS` (and, if its clients
expect errors in a shape of their own, its :class:`~teamgraph.server.http_errors.ErrorShape` in
:data:`ERROR_SHAPES`)."""

from __future__ import annotations

from fastapi import APIRouter

from teamgraph.server.http_errors import ErrorShape
from teamgraph.server.protocols import a2a, agent_protocol, agui, mcp, openai, runs

# the runs API first: a request is matched against the routes in order, and every run makes two
ROUTERS: tuple[APIRouter, ...] = (
    runs.router,
    openai.router,
    agui.router,
    agent_protocol.router,
    mcp.router,
    a2a.router,
)
ERROR_SHAPES: tuple[ErrorShape, ...] = (openai.ERROR_SHAPE,)
