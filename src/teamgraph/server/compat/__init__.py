"""The APIs of the two projects teamgraph's server grew from, so their clients work unchanged:
the FastAPI LangGraph agent template's React app (:mod:`.fastapi_template`) and swarm-ai-chat
(:mod:`.swarm_chat`). Each is a set of dialect adapters on the same seam as the protocols
(:mod:`teamgraph.server.protocols.adapter`)."""

from __future__ import annotations

from fastapi import APIRouter

from teamgraph.server.compat import fastapi_template, swarm_chat

ROUTERS: tuple[APIRouter, ...] = (*fastapi_template.ROUTERS, *swarm_chat.ROUTERS)
