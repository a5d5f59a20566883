"""A finished event stream is complete when the page reads its last event (issue 31, item 12):
Chromium follows runs' streams with ``fetch`` and aborts 5 ms after it has read
``run_completed`` — as a page that starts the next turn at once — and no request is reported
``net::ERR_ABORTED`` (before the fix: 3 of 20, when the body's end came after the last frame)."""

from __future__ import annotations

from typing import Any

import httpx

from .conftest import PASSWORD, Server, new_email

RUNS = 20
FOLLOW = """async ([url, token]) => {
  const control = new AbortController();
  const response = await fetch(url, {headers: {Authorization: "Bearer " + token},
                                     signal: control.signal});
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return "ended";
    text += value;
    if (text.includes("event: run_completed")) {
      await new Promise((resolve) => setTimeout(resolve, 5));
      control.abort();
      return "read";
    }
  }
}"""


def test_a_page_that_acts_on_the_last_event_aborts_no_stream(page: Any, server: Server) -> None:
    email = new_email()
    with httpx.Client(base_url=server.url, timeout=60) as http:
        http.post("/api/v1/auth/register", json={"email": email, "password": PASSWORD})
        login = http.post("/api/v1/auth/login", data={"username": email, "password": PASSWORD})
        token = login.json()["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        failed: list[str] = []
        page.on("requestfailed", lambda request: failed.append(str(request.failure)))
        page.goto("/")  # the workspace: same origin, its log-in form
        for _ in range(RUNS):
            made = http.post("/api/v1/auth/session", json={"team": "research"}, headers=headers)
            session_id = made.json()["session_id"]
            started = http.post(
                f"/api/v1/sessions/{session_id}/runs",
                json={"input": "Compare PostgreSQL and MongoDB on security"},
                headers=headers,
            )
            run_id = started.json()["run_id"]
            url = f"{server.url}/api/v1/runs/{run_id}/events"
            assert page.evaluate(FOLLOW, [url, token]) in ("read", "ended")
    assert failed == []
