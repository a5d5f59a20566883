"""The web workspace end to end: the real server, the system Chromium, a person's clicks."""

from __future__ import annotations

import json
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.ui.conftest import SCREENSHOTS, Server
from tests.ui.workspace import (
    answer_text,
    log_in,
    new_session,
    node_states,
    register,
    send,
    wait_status,
)

DEMO = "Compare PostgreSQL and MongoDB on performance, security and cost"
XSS = [
    '<img src=x onerror="window.__xss = 1">',
    "<script>window.__xss = 2</script>",
    "[click me](javascript:window.__xss=3)",
]


def test_register_log_in_and_run_the_offline_demo(page: Any) -> None:
    email = register(page)
    page.click("#logout")
    page.wait_for_selector("#auth:not([hidden])")
    log_in(page, email)
    new_session(page, "research", "Databases")

    run_id = send(page, DEMO)
    assert wait_status(page, "completed") == "completed"
    states = node_states(page)
    assert set(states) == {"research_performance", "research_security", "research_cost", "summary"}
    assert set(states.values()) == {"done"}
    report = answer_text(page, run_id)
    assert "Workflow Results" in report and "Completed 4 steps" in report
    assert page.inner_text("#planner-tier") == "Planner tier rules"
    assert "4/4 done" in page.inner_text("#meta-steps")
    assert int(page.inner_text("#meta-tokens b")) > 0
    assert page.inner_text("#usage-total-usd") == "$0.0000"  # the offline model is free

    # tool calls are collapsed until opened
    calls = page.query_selector_all("#tools details")
    assert len(calls) == 3 and not any(c.get_attribute("open") is not None for c in calls)
    page.locator("#tools details summary").first.click()
    expect(page.locator("#tools details[open] pre").first).to_contain_text("query")

    # a node opens its step: task, context (its dependencies' outputs), output
    page.click("#graph g.node[data-step='summary']")
    expect(page.locator("#detail-state")).to_have_text("done")
    detail = page.inner_text("#step-detail")
    assert "Write a summary" in detail and "Context from previous steps" in detail
    assert "research_security" in detail
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "workspace.png"))

    # the conversation survives a reload; the run is in the session's history
    page.reload()
    assert "Workflow Results" in answer_text(page, run_id)
    expect(page.locator(f"#run-list button[data-run='{run_id}']")).to_be_visible()


def test_an_approval_is_edited_and_approved_then_a_rejection_reaches_the_agent(
    page: Any,
) -> None:
    register(page)
    new_session(page, "records", "Records")
    run_id = send(page, "delete record 7")
    card = page.locator("#pending .approval")
    expect(card).to_contain_text("delete_record")
    expect(card).to_contain_text('"record_id": "delete record 7"')  # offline: the whole request
    assert wait_status(page, "interrupted") == "interrupted"

    card.locator("button.edit").click()
    card.locator("textarea.args").fill(json.dumps({"record_id": "8"}))
    card.locator("button.edit").click()  # now "Approve with these arguments"
    assert wait_status(page, "completed") == "completed"
    expect(page.locator("#tools details")).to_have_count(1)  # one call, shown as it ran
    shown = page.eval_on_selector_all("#tools details pre", "els => els.map(e => e.textContent)")
    assert json.loads(shown[0]) == {"record_id": "8"} and shown[1] == "deleted record 8"
    assert "deleted record 8" in answer_text(page, run_id)

    second = send(page, "delete record 9")
    page.wait_for_selector("#pending .approval")
    page.fill("#pending .approval input.comment", "record 9 is still needed")
    page.click("#pending .approval button.reject")
    assert wait_status(page, "completed") == "completed"
    page.wait_for_function("document.querySelectorAll('#tools details').length === 1")
    page.click("#tools details summary")
    result = page.locator("#tools details[open]")
    expect(result).to_contain_text("record 9 is still needed")
    expect(result).not_to_contain_text("deleted record")
    assert answer_text(page, second)


def test_a_clarifying_question_is_answered_in_the_page(page: Any) -> None:
    register(page)
    new_session(page, "desk", "Vague")
    run_id = send(page, "help")
    page.wait_for_selector("#clarification")
    assert page.inner_text("#clarify-question").strip()
    expect(page.locator("#send")).to_be_disabled()  # the session waits for the answer
    page.click("#clarification button[type=submit]")  # nothing written: said, not ignored
    expect(page.locator("#clarify-hint")).to_have_text("Write an answer first.")
    expect(page.locator("#clarification")).to_be_visible()
    page.fill("#clarify-answer", "Compare PostgreSQL and MongoDB")
    page.press("#clarify-answer", "Shift+Enter")  # a new line, not a send
    page.type("#clarify-answer", "on security")
    assert page.input_value("#clarify-answer") == "Compare PostgreSQL and MongoDB\non security"
    expect(page.locator("#clarify-hint")).to_have_text("")
    page.fill("#clarify-answer", "Compare PostgreSQL and MongoDB on security")
    page.press("#clarify-answer", "Enter")  # sends, as in the message box
    assert wait_status(page, "completed") == "completed"
    expect(page.locator("#clarification")).to_have_count(0)
    assert "security" in answer_text(page, run_id).lower()
    history = page.eval_on_selector_all("#messages .msg.user", "els => els.map(e => e.textContent)")
    assert any("Compare PostgreSQL and MongoDB on security" in h for h in history)


def test_a_reload_mid_run_picks_the_live_run_back_up_losing_nothing(
    page: Any, server: Server
) -> None:
    register(page)
    new_session(page, "slow-research", "Slow")
    run_id = send(page, DEMO)
    page.wait_for_selector("#graph g.node[data-state='running']")
    page.focus("#graph g.node[data-step='summary']")  # keyboard focus survives live redraws
    redrawn_after = page.evaluate("window.teamgraph.view.events.length") + 3
    page.wait_for_function(f"window.teamgraph.view.events.length >= {redrawn_after}")
    assert page.evaluate("document.activeElement.dataset.step") == "summary"
    page.keyboard.press("Enter")
    expect(page.locator("#step-detail > h3")).to_contain_text("Step summary")
    live = page.locator("#live .body")  # the answer being written, token by token
    expect(live).not_to_be_empty()
    assert "Workflow Results" not in live.inner_text()
    resumed_from: list[str] = []
    page.on(
        "request",
        lambda r: "/events" in r.url and resumed_from.append(r.headers.get("last-event-id", "")),
    )
    seen = page.evaluate("window.teamgraph.view.events.length")
    page.reload()
    page.wait_for_function(f"window.teamgraph.view && window.teamgraph.view.runId === '{run_id}'")
    assert page.evaluate("window.teamgraph.view.mode") == "live"
    assert resumed_from and int(resumed_from[0]) >= seen > 0  # went on from where it was
    assert wait_status(page, "completed") == "completed"
    assert set(node_states(page).values()) == {"done"}
    seqs = page.evaluate("window.teamgraph.view.events.map(e => e.seq)")
    assert seqs == list(range(1, len(seqs) + 1))  # every event once, in order
    token = page.evaluate("localStorage.getItem('teamgraph.token')")
    stored = _events(server, token, run_id)
    assert seqs == [e["seq"] for e in stored]
    assert "Workflow Results" in answer_text(page, run_id)


def _events(server: Server, token: str, run_id: str) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.stream(
        "GET", f"{server.url}/api/v1/runs/{run_id}/events", headers=headers, timeout=30
    ) as response:
        return [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]


def test_a_paused_run_can_be_closed(page: Any) -> None:
    register(page)
    new_session(page, "desk", "Close it")
    send(page, "help")
    page.wait_for_selector("#clarification")
    expect(page.locator("#cancel-run")).to_have_text("Close paused run")
    page.click("#cancel-run")
    assert wait_status(page, "cancelled") == "cancelled"
    expect(page.locator("#clarification")).to_have_count(0)
    expect(page.locator("#send")).to_be_enabled()  # the session is free again


def test_a_running_run_can_be_cancelled(page: Any) -> None:
    register(page)
    new_session(page, "slow-research", "Cancel me")
    send(page, DEMO)
    page.wait_for_selector("#graph g.node[data-state='running']")
    expect(page.locator("#meta-budget")).to_contain_text("/ 200.0k tokens · $0.0000 / $5.00")
    page.click("#cancel-run")
    assert wait_status(page, "cancelled") == "cancelled"
    expect(page.locator("#cancel-run")).to_be_hidden()
    assert set(node_states(page).values()) != {"done"}  # stopped before the plan finished


def test_content_from_users_and_runs_is_shown_as_text_never_run(page: Any) -> None:
    register(page)
    new_session(page, "research", '<img src=x onerror="window.__xss = 4">')
    run_id = send(page, " ".join(XSS))
    wait_status(page, "completed", "completed_with_errors")
    answer_text(page, run_id)
    assert page.evaluate("window.__xss") is None
    for where in ("#messages", "#session-list", "#workspace"):
        assert page.query_selector_all(f"{where} img, {where} script") == []
        assert page.query_selector_all(f"{where} a[href^='javascript']") == []
    user = page.inner_text("#messages .msg.user")
    assert XSS[0] in user and XSS[1] in user
    assert '<img src=x onerror="window.__xss = 4">' in page.inner_text("#session-title")


def test_a_past_run_replays_step_by_step(page: Any) -> None:
    register(page)
    new_session(page, "research", "Replay")
    first = send(page, "Compare Redis and PostgreSQL on cost")
    wait_status(page, "completed")
    second = send(page, "Compare PostgreSQL and MongoDB on security")
    wait_status(page, "completed")
    answer_text(page, second)
    page.click(f"#run-list button[data-run='{first}']")
    page.wait_for_selector("#replay:not([hidden])")
    # labelled in words: media glyphs (⏮ ⏭ ⏸) are missing from common fonts and show as boxes
    labels = page.eval_on_selector_all("#replay button", "els => els.map(e => e.textContent)")
    assert labels == ["First", "Back", "Play", "Next", "Last"]
    total = int(page.get_attribute("#replay-range", "max"))
    assert total > 0 and page.evaluate("window.teamgraph.view.runId") == first
    assert set(node_states(page).values()) == {"done"}

    page.click("#replay-start")
    expect(page.locator("#run-status")).to_have_attribute("data-state", "pending")
    assert node_states(page) == {}
    plan_at = page.evaluate(
        "window.teamgraph.view.events.findIndex(e => e.type === 'plan_created') + 1"
    )
    page.fill("#replay-range", str(plan_at))  # the moment the plan exists, nothing has run
    page.wait_for_function("document.querySelectorAll('#graph g.node').length > 0")
    assert set(node_states(page).values()) == {"pending"}
    expect(page.locator("#planner-tier")).to_have_text("Planner tier rules")
    page.click("#replay-next")
    expect(page.locator("#replay-pos")).to_contain_text(f"{plan_at + 1}/{total}")
    page.click("#replay-end")
    expect(page.locator("#run-status")).to_have_attribute("data-state", "completed")


def test_sessions_are_created_renamed_and_deleted(page: Any) -> None:
    register(page)
    new_session(page, "research", "First")
    new_session(page, "helpdesk", "Second")
    assert page.inner_text("#session-team") == "helpdesk"
    item = page.locator("#session-list li", has_text="First")
    item.locator("button.rename").click()
    page.fill("#session-list input.rename-input", "Renamed")
    page.press("#session-list input.rename-input", "Enter")
    page.wait_for_selector("#session-list li:has-text('Renamed')")
    page.on("dialog", lambda dialog: dialog.accept())
    page.locator("#session-list li", has_text="Renamed").locator("button.delete").click()
    expect(page.locator("#session-list")).not_to_contain_text("Renamed")
    expect(page.locator("#session-list li .open")).to_have_count(1)
    expect(page.locator("#session-list li .open")).to_contain_text("Second")


def test_the_page_fits_a_narrow_window_and_works_from_the_keyboard(page: Any) -> None:
    page.set_viewport_size({"width": 420, "height": 800})
    register(page)
    assert page.is_hidden("#sidebar")
    page.click("#sidebar-open")
    expect(page.locator("#sidebar")).to_be_visible()
    new_session(page, "helpdesk", "Narrow")
    expect(page.locator("#sidebar")).to_be_hidden()  # opening a session closes the drawer
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    page.focus("#composer-input")
    page.keyboard.type("How does PostgreSQL handle MVCC?")
    page.keyboard.press("Enter")
    wait_status(page, "completed")
    page.click("#workspace-toggle")
    expect(page.locator("#workspace")).to_be_visible()
    expect(page.locator("#tree")).to_contain_text("helpdesk")
    page.keyboard.press("Escape")
    expect(page.locator("#workspace")).to_be_hidden()
