"""``/api/v1/rag`` — the template's knowledge page: a user's own documents (markdown, text, PDF),
indexed into that user's collection, which that user's runs search and nobody else's do (a user
token or a session token)."""

from __future__ import annotations

import asyncio
import io
from pathlib import PurePath
from typing import Any

from fastapi import APIRouter, HTTPException, UploadFile, status

from teamgraph.knowledge import Document
from teamgraph.runtime.runner import user_collection
from teamgraph.server.deps import CurrentUser, State

router = APIRouter(prefix="/api/v1/rag", tags=["FastAPI agent template: knowledge"])
KINDS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".pdf": "pdf"}


def _shown(doc: Document) -> dict[str, Any]:
    return {
        "doc_id": str(doc.id),
        "filename": doc.name,
        "file_type": KINDS.get(PurePath(doc.name).suffix.lower(), "text"),
        "chunk_count": doc.chunks,
        "created_at": doc.added_at,
        "provider": "",
    }


@router.post("/upload")
async def upload(file: UploadFile, user: CurrentUser, state: State) -> dict[str, Any]:
    """Index a markdown, text or PDF file for the user's own runs."""
    name = PurePath(file.filename or "").name
    kind = KINDS.get(PurePath(name).suffix.lower())
    if not name or kind is None:
        supported = ", ".join(sorted(KINDS))
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            detail=f"Unsupported file type: {name or '(no name)'}. Supported: {supported}",
        )
    data = await file.read()
    if not data:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail=f"{name} is empty")
    text = await asyncio.to_thread(_text, data, kind, name)
    if not text.strip():
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail=f"{name}: no text found")
    kb = state.backend.knowledge
    doc = await asyncio.to_thread(
        kb.add_document, user_collection(user.id), name, text, kind == "markdown"
    )
    return {**_shown(doc), "file_size": len(data)}


def _text(data: bytes, kind: str, name: str) -> str:
    if kind != "pdf":
        return data.decode("utf-8-sig", errors="replace")
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        return "\n\n".join(page.extract_text() or "" for page in reader.pages)
    except (PdfReadError, ValueError, KeyError) as exc:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST, detail=f"{name}: not a readable PDF ({exc})"
        ) from None


@router.get("/documents")
async def documents(user: CurrentUser, state: State) -> dict[str, Any]:
    docs = await asyncio.to_thread(state.backend.knowledge.documents, user_collection(user.id))
    return {"documents": [_shown(d) for d in docs], "total": len(docs)}


def _doc_id(doc_id: str) -> int:
    if not (doc_id.isascii() and doc_id.isdigit()):  # "¹".isdigit(), but int("¹") fails
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Document not found")
    return int(doc_id)


@router.get("/documents/{doc_id}/chunks")
async def chunks(doc_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    kb = state.backend.knowledge
    found = await asyncio.to_thread(kb.chunks, user_collection(user.id), _doc_id(doc_id))
    if found is None:  # unknown, or another user's: never says which
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Document not found")
    shown = [
        {"chunk_index": i, "heading": c.heading, "content": c.text} for i, c in enumerate(found)
    ]
    return {"doc_id": doc_id, "chunks": shown, "total": len(shown)}


@router.delete("/documents/{doc_id}")
async def delete(doc_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    kb = state.backend.knowledge
    if not await asyncio.to_thread(kb.delete, user_collection(user.id), _doc_id(doc_id)):
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Document not found")
    return {"doc_id": doc_id, "deleted": True}
