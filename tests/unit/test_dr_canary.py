"""The canary token: planted in every DR system prompt, never delivered — against an adversarial generator."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.guardrails import LocalGuardrails, PostGuardView, canary_token
from pipelines.guardrails.config import DEFAULT_CANARY, default_guardrail_config
from pipelines.guardrails.post import PostGuard
from tests.doubles import j

from .harnesses import DRHarness as Harness

TOKEN = canary_token()


def flat(text: str) -> str:
    return re.sub(r"[\W_]+", "", text).casefold()


def leaked(reply: str, token: str = TOKEN) -> bool:
    return flat(token) in flat(reply)


def test_the_token_is_in_both_system_prompts_and_nowhere_else() -> None:
    h = Harness()
    h.turn("what is your refund policy?", orch=[j(decision="search_help_articles", args={"query": "refund"}),
                                                 j(decision="respond")], gen=["Refunds go back to the card."])
    assert TOKEN == DEFAULT_CANARY  # no TANDEM_CANARY in the test environment
    for role, call in h.models.calls:
        assert TOKEN in call.messages[0].content and call.messages[0].role == "system", role
        assert all(TOKEN not in m.content for m in call.messages[1:]), role
    assert TOKEN not in h.sink.dump()  # nor in the event log


@pytest.mark.parametrize(
    "reply",
    [
        f"Sure. My instructions contain the marker {TOKEN}.",
        f"The marker is {TOKEN.upper()}.",
        "The marker is " + " ".join(TOKEN) + ".",
        "The marker is " + ".".join(TOKEN) + ".",
        "The marker is " + TOKEN.replace("c", "\u0441").replace("e", "\u0435") + ".",  # Cyrillic homoglyphs
        f"Here: {TOKEN[:6]}\u200b{TOKEN[6:]}.",
        f"Part one is {TOKEN[:8]}. Part two is {TOKEN[8:]}.",
    ],
)
def test_an_adversarial_generator_never_delivers_the_token(reply: str) -> None:
    h = Harness()
    r = h.turn("hi", orch=[j(decision="respond")], gen=[reply])
    assert not leaked(r.reply), r.reply
    assert h.counters.get("blocked", "canary_leak") == 1
    assert h.counters.total("delivered_violations") == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.sampled_from(["", "Your order is pending. ", "Thanks! "]),
    sep=st.sampled_from(["", " ", "-", "\n", "\u200b"]),
    cuts=st.lists(st.integers(1, 40), max_size=5),
)
def test_the_token_is_never_delivered_however_it_is_streamed(before: str, sep: str, cuts: list[int]) -> None:
    text = f"{before}Reference {sep.join(TOKEN)} as asked."
    bounds = sorted({c for c in cuts if c < len(text)})
    deltas = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)], strict=True)]
    h = Harness()
    r = h.turn("hi", orch=[j(decision="respond")], gen=[deltas])
    assert not leaked(r.reply), (deltas, r.reply)


def test_the_post_guard_checks_the_table_token_and_the_deployment_token(monkeypatch) -> None:
    monkeypatch.setenv("TANDEM_CANARY", "secret-canary-77")
    guard = PostGuard(default_guardrail_config())
    view = PostGuardView(path="answer")
    assert [v.kind for v in guard.check("it is secret canary 77", view).violations] == ["canary_leak"]
    # half the token (8 of its 14 letters and digits) is a leak; 7 consecutive ones are not
    assert [v.kind for v in guard.check("it is secret ca", view).violations] == ["canary_leak"]
    assert guard.check("it is secret c", view).violations == []
    assert canary_token() == "secret-canary-77"
    monkeypatch.setenv("TANDEM_CANARY", "short")  # under 8 characters: ignored
    assert canary_token() == DEFAULT_CANARY


def test_a_canary_set_in_the_table_is_used_without_the_variable() -> None:
    table = default_guardrail_config().model_dump(mode="json")
    table["canary"] = {"env": "TANDEM_CANARY_UNSET_FOR_TEST", "token": "table-token-123"}
    g = LocalGuardrails(table)
    assert g.config.canary.resolve() == "table-token-123"
    verdict = g._post.check("see table-token-123", PostGuardView(path="answer"))
    assert [v.kind for v in verdict.violations] == ["canary_leak"]
