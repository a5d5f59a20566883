"""A session's conversation for the native API (the seeds' ``/chatbot/messages`` needs a
session token; this takes the user's token and the session in the path)."""

from __future__ import annotations

from fastapi import APIRouter

from teamgraph.server import repositories as repo
from teamgraph.server.deps import Db, OwnedSession
from teamgraph.server.schemas import MessageOut

router = APIRouter(prefix="/api/v1", tags=["sessions"])


@router.get("/sessions/{session_id}/messages", response_model=list[MessageOut])
async def session_messages(session: OwnedSession, db: Db) -> list[MessageOut]:
    """The session's messages, oldest first: the user's requests and answers to the team's
    questions, and each run's final answer (``run_id`` links a message to its run)."""
    return [
        MessageOut(role=m.role, content=m.content, run_id=m.run_id, created_at=m.created_at)
        for m in await repo.messages(db, session.id)
    ]
