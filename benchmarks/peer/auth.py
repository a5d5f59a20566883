"""The peer's authentication for ``benchmarks/peer_server.py``: a bearer JWT (HS256, checked
with PyJWT as teamgraph checks its own) and resources scoped to their owner — LangGraph's custom
auth as its documentation writes it. ``PEER_JWT_SECRET`` is the key."""

from __future__ import annotations

import os
from typing import Any

import jwt
from langgraph_sdk import Auth

auth = Auth()
SECRET = os.environ.get("PEER_JWT_SECRET", "")


@auth.authenticate
async def authenticate(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Auth.exceptions.HTTPException(status_code=401, detail="no bearer token")
    try:
        claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    except jwt.PyJWTError as exc:
        raise Auth.exceptions.HTTPException(status_code=401, detail=str(exc)) from exc
    return str(claims["sub"])


@auth.on
async def owner(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, str]:
    filters = {"owner": ctx.user.identity}
    metadata = value.setdefault("metadata", {})
    metadata.update(filters)
    return filters
