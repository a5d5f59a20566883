"""An event's JSON is made once and is what it is stored and streamed as."""

from __future__ import annotations

from teamgraph.events import AgentMessage, event_from_json


def test_an_event_is_encoded_once_and_read_back_equal() -> None:
    event = AgentMessage(run_id="r", seq=3, agent="writer", content="Hello")
    assert event.encoded is event.encoded  # made once
    assert event_from_json(event.encoded) == event
    assert AgentMessage.model_validate(event.model_dump()) == event  # the cache is no field


def test_a_changed_copy_encodes_its_own_values() -> None:
    event = AgentMessage(run_id="r", seq=3, agent="writer", content="Hello")
    assert '"seq":3' in event.encoded
    copy = event.model_copy(update={"seq": 4})
    assert '"seq":4' in copy.encoded and event_from_json(copy.encoded) == copy
