"""The OpenAI-compatible route never joins two conversations silently (issue 31, item 6),
driven by the official ``openai`` SDK: a conversation is continued by an explicit key — the
``X-Teamgraph-Session`` header, ``metadata.session_id``, or the answer's id echoed back as
``metadata.previous_id`` — or by its text when exactly one session of the user has said it
(with ``user``, per end user); when the text could be two conversations, a new session starts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from teamgraph.config import Settings
from teamgraph.server.app import create_app

from .conftest import serving
from .test_openai_compat import login, new_key

ASK = "Find how Redis persists data"
THEN = "And how does it replicate?"
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture
def server(api_settings: Settings) -> Iterator[str]:
    with serving(create_app(api_settings)) as base:
        yield base


def sdk(server: str, email: str) -> openai.OpenAI:
    key = new_key(server, login(server, email))["key"]
    return openai.OpenAI(base_url=f"{server}/v1", api_key=key, max_retries=0, timeout=60)


def ask(client: openai.OpenAI, messages: list[dict[str, str]], **extra: Any) -> tuple[str, str]:
    """The answer's text and the session it was given in."""
    done = client.chat.completions.create(model="assistant", messages=messages, **extra)  # type: ignore[arg-type]
    return done.choices[0].message.content or "", (done.model_extra or {})["teamgraph"][
        "session_id"
    ]


def then(answer: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": ASK},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": THEN},
    ]


def test_two_conversations_that_start_alike_are_never_joined(server: str) -> None:
    client = sdk(server, "twins@example.com")
    first_answer, first = ask(client, [{"role": "user", "content": ASK}])
    second_answer, second = ask(client, [{"role": "user", "content": ASK}])
    assert first != second and first_answer == second_answer  # the same words, the same answer
    _, next_turn = ask(client, then(second_answer))
    assert next_turn not in (first, second)  # ambiguous: a new session, never the oldest match


def test_a_unique_conversation_continues_by_its_text(server: str) -> None:
    client = sdk(server, "unique@example.com")
    answer, session = ask(client, [{"role": "user", "content": ASK}])
    assert ask(client, then(answer))[1] == session


@pytest.mark.parametrize("how", ["header", "metadata", "echoed id"])
def test_an_explicit_key_continues_its_own_conversation(server: str, how: str) -> None:
    client = sdk(server, f"{how.replace(' ', '')}@example.com")
    ask(client, [{"role": "user", "content": ASK}])  # a twin conversation, the older one
    done = client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": ASK}]
    )
    answer = done.choices[0].message.content or ""
    session = (done.model_extra or {})["teamgraph"]["session_id"]
    extra: dict[str, Any] = {
        "header": {"extra_headers": {"X-Teamgraph-Session": session}},
        "metadata": {"metadata": {"session_id": session}},
        "echoed id": {"metadata": {"previous_id": done.id}},
    }[how]
    assert ask(client, then(answer), **extra)[1] == session


def test_the_user_field_keeps_end_users_apart(server: str) -> None:
    client = sdk(server, "app@example.com")
    answer_one, one = ask(client, [{"role": "user", "content": ASK}], user="end-user-1")
    answer_two, two = ask(client, [{"role": "user", "content": ASK}], user="end-user-2")
    assert ask(client, then(answer_two), user="end-user-2")[1] == two
    assert ask(client, then(answer_one), user="end-user-1")[1] == one


def test_an_explicit_key_of_another_user_is_not_found(server: str) -> None:
    alice, bob = sdk(server, "alice@example.com"), sdk(server, "bob@example.com")
    answer, session = ask(alice, [{"role": "user", "content": ASK}])
    for extra in (
        {"extra_headers": {"X-Teamgraph-Session": session}},
        {"metadata": {"session_id": "no-such-session"}},
        {"metadata": {"previous_id": "chatcmpl-nothing"}},
    ):
        with pytest.raises(openai.NotFoundError) as missing:
            ask(bob, then(answer), **extra)
        assert "conversation" in missing.value.message
