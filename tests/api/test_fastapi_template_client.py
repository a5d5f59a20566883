"""The requests of the FastAPI LangGraph agent template's React app, as its
``frontend/src/api.js`` builds them (read, not copied: JSON bodies with ``Content-Type:
application/json`` on every call, form bodies for login, reset and rename), and its pages' use of
the answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from teamgraph.config import Settings
from teamgraph.server.app import create_app

from ..helpers import eventually
from .conftest import PASSWORD, SLOW_TEAM, User, make_user, serving

API = "/api/v1"


def bearer(token: str) -> dict[str, str]:
    return {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}


async def new_session(client: httpx.AsyncClient, user: User) -> dict[str, str]:
    """``createSession(userToken)``: POST with no body; the app keeps ``session_id`` and
    ``token.access_token``."""
    created = await client.post(f"{API}/auth/session", headers=bearer(user.token))
    assert created.is_success, created.text
    body = created.json()
    return {"id": body["session_id"], "token": body["token"]["access_token"]}


async def test_switching_renaming_and_deleting_sessions_as_the_app_does(
    client: httpx.AsyncClient, alice: User
) -> None:
    first, second = await new_session(client, alice), await new_session(client, alice)
    listed = (await client.get(f"{API}/auth/sessions", headers=bearer(alice.token))).json()
    assert {s["session_id"] for s in listed} == {first["id"], second["id"]}
    # switchSession(sess): the app talks to an older session with the token the list gave
    older = next(s for s in listed if s["session_id"] == first["id"])
    messages = await client.get(
        f"{API}/chatbot/messages", headers=bearer(older["token"]["access_token"])
    )
    assert messages.status_code == 200
    # rename: the template's form field, and JSON, with the session's own token or the user's
    form = await client.patch(
        f"{API}/auth/session/{first['id']}/name",
        data={"name": "Databases"},
        headers={"Authorization": f"Bearer {first['token']}"},
    )
    assert form.status_code == 200 and form.json()["name"] == "Databases"
    as_json = await client.patch(
        f"{API}/auth/session/{first['id']}/name", json={"name": "DBs"}, headers=alice.headers
    )
    assert as_json.json()["name"] == "DBs"
    empty = await client.patch(
        f"{API}/auth/session/{first['id']}/name",
        data={"name": ""},
        headers={"Authorization": f"Bearer {first['token']}"},
    )
    assert empty.status_code == 422 and "name" in empty.text
    # handleDeleteSession(sess): DELETE with the session's token from the list
    deleted = await client.delete(
        f"{API}/auth/session/{first['id']}", headers=bearer(older["token"]["access_token"])
    )
    assert deleted.is_success
    # the deleted session's token answers 404 as the template does (the app logs out on a 401)
    gone = await client.get(f"{API}/chatbot/messages", headers=bearer(first["token"]))
    assert gone.status_code == 404
    assert (
        await client.get(f"{API}/auth/sessions", headers=bearer(alice.token))
    ).status_code == 200


async def test_a_long_answer_in_the_resent_history_keeps_the_chat_usable(
    client: httpx.AsyncClient, alice: User
) -> None:
    """The app re-sends the whole history, the server's long answers included."""
    session = await new_session(client, alice)
    answer = "A long workflow report. " * 400  # ≈ 9,600 characters, with code
    history = [
        {"role": "user", "content": "Write a report"},
        {"role": "assistant", "content": answer + "<script>ok in an answer</script>"},
        {"role": "user", "content": "Thanks, shorter please"},
    ]
    reply = await client.post(
        f"{API}/chatbot/chat?mode=single",
        json={"messages": history},
        headers=bearer(session["token"]),
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["messages"][-1]["role"] == "assistant"
    too_long = [*history[:2], {"role": "user", "content": "x" * 3001}]
    refused = await client.post(
        f"{API}/chatbot/chat?mode=single",
        json={"messages": too_long},
        headers=bearer(session["token"]),
    )
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == (
        "messages.2.content"
    )


def reset_form(email: str, new: str, master: str) -> dict[str, str]:
    """``resetPassword``: a urlencoded form with email, new_password, master_password."""
    return {"email": email, "new_password": new, "master_password": master}


async def test_password_reset_is_off_without_a_master_password(
    client: httpx.AsyncClient, alice: User
) -> None:
    reply = await client.post(
        f"{API}/auth/reset-password", data=reset_form(alice.email, "N3w-passw0rd!", "x")
    )
    assert reply.status_code == 404 and reply.json()["detail"] == "Password reset is not enabled"


async def test_password_reset_with_the_master_password(
    client: httpx.AsyncClient, alice: User, app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    app.state.teamgraph.settings.master_password = "Master-0f-keys"
    wrong = await client.post(
        f"{API}/auth/reset-password", data=reset_form(alice.email, "N3w-passw0rd!", "guess")
    )
    assert wrong.status_code == 403 and wrong.json()["detail"] == "Invalid master password"
    weak = await client.post(
        f"{API}/auth/reset-password", data=reset_form(alice.email, "short", "Master-0f-keys")
    )
    assert weak.status_code == 422
    nobody = await client.post(
        f"{API}/auth/reset-password",
        data=reset_form("nobody@example.com", "N3w-passw0rd!", "Master-0f-keys"),
    )
    assert nobody.status_code == 404
    done = await client.post(
        f"{API}/auth/reset-password",
        data=reset_form(alice.email, "N3w-passw0rd!", "Master-0f-keys"),
    )
    assert done.status_code == 200 and done.json()["message"] == "Password reset successfully"
    old = await client.post(
        f"{API}/auth/login", data={"username": alice.email, "password": PASSWORD}
    )
    new = await client.post(
        f"{API}/auth/login", data={"username": alice.email, "password": "N3w-passw0rd!"}
    )
    assert (old.status_code, new.status_code) == (401, 200)
    assert "Master-0f-keys" not in caplog.text and "N3w-passw0rd!" not in caplog.text


async def chat(
    client: httpx.AsyncClient, token: str, history: list[dict[str, str]], mode: str = "multi"
) -> httpx.Response:
    """``sendMessage(sessionToken, messages, mode)``."""
    return await client.post(
        f"{API}/chatbot/chat?mode={mode}", json={"messages": history}, headers=bearer(token)
    )


async def answer_in_history(client: httpx.AsyncClient, token: str) -> dict[str, str]:
    """The last message of the chat history once the resumed run's answer is there (it runs
    in the background after the approval)."""
    last: dict[str, str] = {}

    async def answered() -> bool:
        nonlocal last
        stored = (await client.get(f"{API}/chatbot/messages", headers=bearer(token))).json()
        last = stored["messages"][-1]
        return last["role"] == "assistant" and last["content"].startswith("_Offline")

    await eventually(answered, "the resumed run's answer is in the chat history")
    return last


async def notebook_session(client: httpx.AsyncClient, user: User) -> dict[str, str]:
    created = await client.post(
        f"{API}/auth/session", json={"team": "notebook"}, headers=bearer(user.token)
    )
    body = created.json()
    return {"id": body["session_id"], "token": body["token"]["access_token"]}


async def test_a_clarifying_question_is_answered_by_the_next_message(
    client: httpx.AsyncClient, alice: User
) -> None:
    session = await notebook_session(client, alice)
    history = [{"role": "user", "content": "help"}]
    asked = await chat(client, session["token"], history)
    assert asked.status_code == 200, asked.text
    question = asked.json()["messages"][-1]["content"]
    assert question.endswith("?")  # the assistant's message is the question
    history += [
        {"role": "assistant", "content": question},
        {"role": "user", "content": "Find what PostgreSQL offers for JSON"},
    ]
    answered = await chat(client, session["token"], history)
    assert answered.status_code == 200, answered.text
    answer = answered.json()["messages"][-1]["content"]
    assert answer.startswith("_Offline model") and answer != question  # the run finished
    assert "PostgreSQL" in answer and "No documents matched" not in answer  # answer searched
    stored = (await client.get(f"{API}/chatbot/messages", headers=bearer(session["token"]))).json()
    assert [m["role"] for m in stored["messages"]] == ["user", "assistant", "user", "assistant"]
    assert stored["messages"][1]["content"] == question


async def test_an_approval_pause_says_where_to_decide_and_the_approvals_page_resumes_it(
    client: httpx.AsyncClient, alice: User
) -> None:
    session = await notebook_session(client, alice)
    history = [{"role": "user", "content": "Save a note: Redis keeps data in memory"}]
    paused = await chat(client, session["token"], history)
    assert paused.status_code == 200, paused.text
    notice = paused.json()["messages"][-1]["content"]
    assert notice.startswith("Waiting for your approval: save_note(") and "Approvals" in notice
    # a message while it waits gets the same notice, never an error
    again = await chat(
        client,
        session["token"],
        [*history, {"role": "assistant", "content": notice}, {"role": "user", "content": "hi"}],
    )
    assert again.status_code == 200 and again.json()["messages"][-1]["content"] == notice
    # the Approvals page (getPendingApprovals / approveRequest with the session token)
    pending = await client.get(f"{API}/approvals/pending", headers=bearer(session["token"]))
    assert pending.status_code == 200, pending.text
    body = pending.json()
    assert body["total"] == 1
    [request] = body["requests"]
    assert request["action_type"] == "save_note" and request["status"] == "pending"
    assert request["session_id"] == session["id"] and "text" in str(request["action_data"])
    for field in ("id", "action_description", "created_at", "expires_at"):
        assert request[field]
    other = await make_user(client, "mallory@example.com")
    foreign = await new_session(client, other)
    stolen = await client.post(
        f"{API}/approvals/{request['id']}/approve",
        json={"comment": None},
        headers=bearer(foreign["token"]),
    )
    assert stolen.status_code == 404
    approved = await client.post(
        f"{API}/approvals/{request['id']}/approve",
        json={"comment": "fine"},
        headers=bearer(session["token"]),
    )
    assert approved.status_code == 200, (request["id"], approved.text)
    assert approved.json()["status"] == "approved"
    assert approved.json()["reviewer_comment"] == "fine"
    # the run finishes and its answer reaches the chat history
    last = await answer_in_history(client, session["token"])
    assert last["role"] == "assistant" and last["content"].startswith("_Offline")
    empty = await client.get(f"{API}/approvals/pending", headers=bearer(session["token"]))
    assert empty.json() == {"requests": [], "total": 0}


def test_the_chat_stream_sends_progress_while_the_run_goes_on(
    tmp_path: Path, api_settings: Settings
) -> None:
    """``streamMessage`` against a real server (uvicorn: the in-process ASGI transport would
    buffer the response): ``data: {"content"}`` lines arrive while the run is still going."""
    teams = tmp_path / "teams"
    teams.mkdir()
    (teams / "slow.yaml").write_text(SLOW_TEAM)
    settings = api_settings.model_copy(update={"teams_dirs": [str(teams)]})
    with serving(create_app(settings)) as base, httpx.Client(base_url=base, timeout=30) as client:
        client.post(f"{API}/auth/register", json={"email": "c@example.com", "password": PASSWORD})
        login = client.post(
            f"{API}/auth/login", data={"username": "c@example.com", "password": PASSWORD}
        )
        user = login.json()["access_token"]
        created = client.post(f"{API}/auth/session", headers=bearer(user)).json()
        token = created["token"]["access_token"]
        history = {"messages": [{"role": "user", "content": "Research Redis and write it up"}]}
        statuses, contents = [], []
        url = f"{API}/chatbot/workflow/chat/stream"
        with client.stream("POST", url, json=history, headers=bearer(token)) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            for line in response.iter_lines():
                if not line.startswith("data: "):
                    continue
                data = json.loads(line.removeprefix("data: "))
                if data["done"]:
                    break
                contents.append(data["content"])
                if len(contents) == 1:  # the first line: is the run still going?
                    runs = client.get(
                        f"{API}/sessions/{created['session_id']}/runs", headers=bearer(user)
                    )
                    statuses.append(runs.json()[0]["status"])
    assert contents[0].startswith("> Plan (") and statuses == ["running"]
    assert len(contents) > 3


@pytest.mark.parametrize("mode", ["single", "multi"])
async def test_the_chat_stream_tells_tools_then_the_answer_as_stored(
    client: httpx.AsyncClient, alice: User, mode: str
) -> None:
    created = await client.post(
        f"{API}/auth/session", json={"team": "research"}, headers=bearer(alice.token)
    )
    session = {"token": created.json()["token"]["access_token"]}
    history = {"messages": [{"role": "user", "content": "Find what PostgreSQL offers for JSON"}]}
    async with client.stream(
        "POST",
        f"{API}/chatbot/chat/stream?mode={mode}",
        json=history,
        headers=bearer(session["token"]),
    ) as response:
        lines = [json.loads(x[6:]) async for x in response.aiter_lines() if x.startswith("data: ")]
    assert lines[-1] == {"content": "", "done": True}
    told = "".join(line["content"] for line in lines)
    stored = await client.get(f"{API}/chatbot/messages", headers=bearer(session["token"]))
    answer = stored.json()["messages"][-1]["content"]
    assert told.endswith(answer) and "calls search_docs" in told
    if mode == "single":  # one agent writes the answer: it streams in frames, not one blob
        pieces = [line["content"] for line in lines if line["content"]]
        assert len(pieces) >= 3 and all(len(piece) < len(answer) for piece in pieces)


async def test_a_rejected_call_is_not_run_and_the_run_still_answers(
    client: httpx.AsyncClient, alice: User
) -> None:
    session = await notebook_session(client, alice)
    history = [{"role": "user", "content": "Save a note: the staging password is hunter2"}]
    await chat(client, session["token"], history)
    pending = await client.get(f"{API}/approvals/pending", headers=bearer(session["token"]))
    [request] = pending.json()["requests"]
    shown = await client.get(f"{API}/approvals/{request['id']}", headers=bearer(session["token"]))
    assert shown.json()["status"] == "pending"
    rejected = await client.post(
        f"{API}/approvals/{request['id']}/reject",
        json={"comment": "no secrets in notes"},
        headers=bearer(session["token"]),
    )
    assert rejected.json()["status"] == "rejected"
    again = await client.post(
        f"{API}/approvals/{request['id']}/approve", json={}, headers=bearer(session["token"])
    )
    assert again.status_code in (404, 409)  # decided (and, once resumed, gone)
    last = await answer_in_history(client, session["token"])
    assert last["role"] == "assistant" and last["content"].startswith("_Offline")
    notes = await client.get(f"{API}/approvals/pending", headers=bearer(session["token"]))
    assert notes.json()["total"] == 0


def minimal_pdf(text: str) -> bytes:
    """A one-page PDF showing ``text`` (objects, cross-reference table and trailer)."""
    content = f"BT /F1 12 Tf 10 50 Td ({text}) Tj ET".encode()
    objects = [
        b"<</Type/Catalog/Pages 2 0 R>>",
        b"<</Type/Pages/Kids[3 0 R]/Count 1>>",
        b"<</Type/Page/Parent 2 0 R/MediaBox[0 0 300 100]/Contents 4 0 R"
        b"/Resources<</Font<</F1 5 0 R>>>>>>",
        b"<</Length %d>>stream\n%s\nendstream" % (len(content), content),
        b"<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer<</Size %d/Root 1 0 R>>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


async def test_the_knowledge_page_keeps_each_users_documents_to_that_user(
    client: httpx.AsyncClient, alice: User
) -> None:
    """``uploadDocument`` (multipart ``file``), ``getDocuments``, ``getDocumentChunks``,
    ``deleteDocument`` — with the user's token, as the page sends it."""
    auth = {"Authorization": f"Bearer {alice.token}"}
    note = "# Zebras\n\nZebras sleep standing up. Their stripes confuse biting flies.\n"
    uploaded = await client.post(
        f"{API}/rag/upload",
        files={"file": ("zebras.md", note.encode(), "text/markdown")},
        headers=auth,
    )
    assert uploaded.status_code == 200, uploaded.text
    doc = uploaded.json()
    assert doc["filename"] == "zebras.md" and doc["chunk_count"] >= 1 and doc["created_at"]
    pdf = await client.post(
        f"{API}/rag/upload",
        files={"file": ("q.pdf", minimal_pdf("Quokkas live on Rottnest."), "application/pdf")},
        headers=auth,
    )
    assert pdf.status_code == 200, pdf.text
    listed = (await client.get(f"{API}/rag/documents", headers=bearer(alice.token))).json()
    assert [d["filename"] for d in listed["documents"]] == ["zebras.md", "q.pdf"]
    chunks = await client.get(
        f"{API}/rag/documents/{pdf.json()['doc_id']}/chunks", headers=bearer(alice.token)
    )
    assert "Quokkas live on Rottnest" in chunks.json()["chunks"][0]["content"]
    # her runs find her document; another user's runs and listing do not
    mine = await run_search(client, alice, "Why do zebras have stripes?")
    assert "zebras.md" in mine
    bob = await make_user(client, "bob@example.com")
    assert "zebras.md" not in await run_search(client, bob, "Why do zebras have stripes?")
    theirs = await client.get(f"{API}/rag/documents", headers=bearer(bob.token))
    assert theirs.json() == {"documents": [], "total": 0}
    stolen = await client.delete(f"{API}/rag/documents/{doc['doc_id']}", headers=bearer(bob.token))
    assert stolen.status_code == 404
    bad = await client.post(
        f"{API}/rag/upload", files={"file": ("x.docx", b"PK", "application/zip")}, headers=auth
    )
    assert bad.status_code == 400 and "Supported" in bad.json()["detail"]
    gone = await client.delete(f"{API}/rag/documents/{doc['doc_id']}", headers=bearer(alice.token))
    assert gone.json() == {"doc_id": doc["doc_id"], "deleted": True}
    assert "zebras.md" not in await run_search(client, alice, "Why do zebras have stripes?")


async def run_search(client: httpx.AsyncClient, user: User, question: str) -> str:
    """What the user's single-agent chat (the research team's researcher) answers."""
    created = await client.post(
        f"{API}/auth/session", json={"team": "research"}, headers=bearer(user.token)
    )
    token = created.json()["token"]["access_token"]
    reply = await chat(client, token, [{"role": "user", "content": question}], mode="single")
    return str(reply.json()["messages"][-1]["content"])


async def test_an_upload_may_be_larger_than_other_requests(
    client: httpx.AsyncClient, alice: User
) -> None:
    big = ("Line about databases and their indexes. " * 40 + "\n\n") * 900  # ≈ 1.5 MB
    uploaded = await client.post(
        f"{API}/rag/upload",
        files={"file": ("big.txt", big.encode(), "text/plain")},
        headers={"Authorization": f"Bearer {alice.token}"},  # as uploadDocument sends it
    )
    assert uploaded.status_code == 200, uploaded.text[:200]
    too_big = await client.post(
        f"{API}/chatbot/chat", content=b"x" * 1_500_000, headers=bearer(alice.token)
    )
    assert too_big.status_code == 413
