"""A session's stored pack state read by this version of the pack (``pipelines.domain.read_state``): a rolling
upgrade runs two versions of a pack at once, and a turn of one session may land on either."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from pipelines.domain import TurnFacts, read_state


class State(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: str | None = None
    seen: list[str] = []


def test_a_key_a_newer_version_added_is_dropped_not_a_failed_turn():
    assert read_state(State, {"user": "u1", "seen": ["a"], "catalogue": {"T-Shirt": "p1"}}) == State(
        user="u1", seen=["a"])


def test_no_state_is_the_empty_state_and_a_known_key_with_a_bad_value_still_fails():
    assert read_state(State, None) == State() and read_state(State, {}) == State()
    with pytest.raises(ValidationError):
        read_state(State, {"seen": "not a list", "newer": 1})


def test_the_support_pack_reads_a_state_written_by_a_newer_version():
    from pipelines.domains import load_domain

    pack = load_domain("support")
    facts = TurnFacts(session_id="s", user_text="hi", state={"authenticated_user_id": "u1", "added_later": [1]})
    assert pack.state_of(facts).authenticated_user_id == "u1"
    pack.restore(facts)  # a turn on the older replica goes on (its next observation writes the state it knows)
    pack.observe("find_user_id_by_email", {"user_id": "u1"}, True, facts)
    assert "added_later" not in facts.state and facts.state["authenticated_user_id"] == "u1"


def test_the_airline_pack_reads_a_state_written_by_a_newer_version():
    from pipelines.domains import load_domain

    pack = load_domain("airline")
    facts = TurnFacts(session_id="s", user_text="hi", state={"added_later": True})
    assert pack.state_of(facts) == type(pack.state_of(facts))()
