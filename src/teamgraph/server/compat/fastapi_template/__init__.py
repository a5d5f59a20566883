"""The API of the FastAPI LangGraph agent template's React app
(``fastapi-langgraph-agent-production-ready-template``): its chat (session tokens, single /
multi / workflow modes, streamed as ``{"content", "done"}`` lines), its approvals page and its
knowledge page. Its accounts and sessions (``/api/v1/auth/…``) are teamgraph's own routes, whose
paths and shapes follow the template's."""

from __future__ import annotations

from fastapi import APIRouter

from teamgraph.server.compat.fastapi_template import approvals, chat, knowledge

ROUTERS: tuple[APIRouter, ...] = (chat.router, approvals.router, knowledge.router)
