"""Steps a person takes in the workspace, shared by the browser tests."""

from __future__ import annotations

from typing import Any

from tests.ui.conftest import PASSWORD, UI_CEILING_MS, new_email


def register(page: Any, email: str | None = None) -> str:
    """Open the page, register (which logs in) and wait for the workspace."""
    email = email or new_email()
    page.goto("/")
    page.click("#auth-toggle")
    page.fill("#auth-email", email)
    page.fill("#auth-password", PASSWORD)
    page.click("#auth-submit")
    page.wait_for_selector("#app:not([hidden])")
    return email


def log_in(page: Any, email: str) -> None:
    page.fill("#auth-email", email)
    page.fill("#auth-password", PASSWORD)
    page.click("#auth-submit")
    page.wait_for_selector("#app:not([hidden])")


def new_session(page: Any, team: str, name: str, template: str | None = None) -> None:
    page.select_option("#new-team", team)
    page.fill("#new-name", name)
    if template is not None:
        page.select_option("#new-template", template)
    page.click("#new-submit")
    page.wait_for_selector(f"#session-title:text-is('{name}')")


def send(page: Any, text: str) -> str:
    """Send a message with the keyboard; returns the run id the page follows."""
    before = page.evaluate("window.teamgraph.view && window.teamgraph.view.runId")
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")
    page.wait_for_function(
        "(before) => { const v = window.teamgraph.view;"
        " return v && v.runId !== before && v.events.length > 0; }",
        arg=before,
    )
    run_id: str = page.evaluate("window.teamgraph.view.runId")
    return run_id


def wait_status(page: Any, *statuses: str) -> str:
    page.wait_for_function(
        "(wanted) => wanted.includes(document.getElementById('run-status').dataset.state)",
        arg=list(statuses),
        timeout=UI_CEILING_MS,
    )
    status: str = page.get_attribute("#run-status", "data-state")
    return status


def node_states(page: Any) -> dict[str, str]:
    """The root plan graph's nodes: step id → state."""
    nodes = page.query_selector_all("#graph g.node")
    return {n.get_attribute("data-step"): n.get_attribute("data-state") for n in nodes}


def answer_text(page: Any, run_id: str) -> str:
    """The assistant's answer to a run, once it is in the conversation."""
    selector = f"#messages .msg.assistant[data-run='{run_id}']"
    page.wait_for_selector(selector)
    text: str = page.inner_text(selector)
    return text
