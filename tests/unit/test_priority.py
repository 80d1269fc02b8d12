"""Engine priorities: a turn's first visible token (W1) is asked for at a higher priority
(a lower number: vLLM's order) than the orchestrator's steps, the slot call and the reply."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipelines.protocols import ChatMessage, ModelCall
from pipelines.tandem.settings import TandemSettings
from serve.model_client import to_chat_request
from tests.doubles import j, w1

from .harnesses import TandemHarness

MSG = [ChatMessage(role="user", content="hi")]


def test_a_model_call_defaults_to_the_engines_default_priority() -> None:
    assert ModelCall(messages=MSG).priority == 0
    with pytest.raises(ValidationError):
        ModelCall(messages=MSG, priority="high")  # type: ignore[arg-type]


@pytest.mark.parametrize("priority", [-1, 0, 3])
def test_the_request_carries_the_priority(priority: int) -> None:
    req = to_chat_request("m", ModelCall(messages=MSG, priority=priority))
    assert req.priority == priority


def test_the_first_call_runs_before_later_ones_by_default() -> None:
    s = TandemSettings()
    assert s.first_call_priority < s.later_call_priority
    assert s.later_call_priority == 0  # the same as the generator and slot calls


def _session(settings: TandemSettings | None = None) -> TandemHarness:
    h = TandemHarness(settings=settings)
    h.turn("Hi, my email is alex.rivera@example.com", orch=[w1("greeting", "hello", "Let me find your account.")])
    h.turn("Please cancel order #W1000001, I ordered it by mistake", orch=[
        w1("cancel", "order", "Let me check that order."),
        j(decision="action", card_id="card.cancel_order",
          params={"order_id": "#W1000001", "reason": "ordered by mistake"}),
    ])
    return h


def _w1_and_steps(h: TandemHarness) -> tuple[list[int], list[int]]:
    calls = h.calls("orchestrator")
    w1_calls = [c.priority for c in calls if c.structured_output and c.structured_output.kind == "grammar"]
    steps = [c.priority for c in calls if c.structured_output and c.structured_output.kind == "json"]
    return w1_calls, steps


def test_w1_gets_the_first_call_priority_and_steps_the_later_one() -> None:
    h = _session()
    w1_calls, steps = _w1_and_steps(h)
    assert w1_calls == [-1, -1] and steps == [0]


def test_the_priorities_are_settings() -> None:
    h = _session(TandemSettings(first_call_priority=-5, later_call_priority=3))
    assert _w1_and_steps(h) == ([-5, -5], [3])
