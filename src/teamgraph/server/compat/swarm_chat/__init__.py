"""The API of swarm-ai-chat's client (``ginobefun/swarm-ai-chat``): its chat (``/api/chat``, the
AI SDK data stream with an orchestrator result per turn) and its sessions (``/api/sessions``).
Its own sign-in (better-auth's ``/api/auth/*``) is not served: the log-in cookie stands in."""

from __future__ import annotations

from fastapi import APIRouter

from teamgraph.server.compat.swarm_chat import chat, sessions

ROUTERS: tuple[APIRouter, ...] = (chat.router, sessions.router)
