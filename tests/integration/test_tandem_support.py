"""The README's support session and ``make run``'s example turn, on the real embedded model (tandem).

One app: the default config (``pipeline.kind: tandem``, support world seed 7), the bundled
SmolLM2-135M in every role. Each assertion is what the README says happens.
"""

from __future__ import annotations

import re

import pytest

from .conftest import start_app

pytestmark = pytest.mark.integration

ALEX = "alex_rivera_1001"
SESSION = "readme-alex"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    # A generous deadline: a shared 2-core CI box can decode at a few tokens per second.
    # Its own world: the default one lives in the user's cache and keeps what other runs changed.
    tmp = tmp_path_factory.mktemp("tandem-support")
    for running in start_app(tmp, {"pipeline": {"kind": "tandem", "turn_deadline_s": 300},
                                   "domain": {"name": "support", "seed": 7, "world_path": str(tmp / "world.db")}}):
        running.turn("warm-up", "hello there")  # compiles the W1 grammar and the decision schemas once
        yield running


def _order_status(app, order_id: str) -> str:
    from ray import serve

    return serve.get_deployment_handle("ToolsServer", app_name=app.app_name).entity.remote("order", order_id).result()["status"]


def _meta(app, session_id: str) -> dict:
    import httpx

    turns = httpx.get(f"{app.http}/v1/sessions/{session_id}", timeout=30).json()["turns"]
    return turns[-1]["meta"]["tandem"]


def _sentences(events: list[dict]) -> list[str]:
    text = "".join(e["text"] for e in events if e["type"] == "reply.delta")
    return [s.strip().lower() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def _narration_first(events: list[dict]) -> None:
    kinds = [e["type"] for e in events]
    assert "narration.delta" in kinds and "reply.delta" in kinds
    assert kinds.index("narration.delta") < kinds.index("reply.delta")


def test_make_run_example_turn_greets_without_fallback_or_repetition(app):
    events = app.turn("greet-1", "Hi! What can you help me with?")
    done = events[-1]
    assert done["status"] == "ok" and done["pipeline"] == "tandem"
    _narration_first(events)
    sentences = _sentences(events)
    assert sentences and len(sentences) == len(set(sentences))
    assert not [e for e in events if e["type"] in ("action_card", "error")]


def test_readme_support_session(app):
    # 1. the email the user typed is looked up (Φ dispatches it while the narration streams)
    events = app.turn(SESSION, "Hi, my email is alex.rivera@example.com")
    assert events[-1]["status"] == "ok"
    _narration_first(events)
    assert _meta(app, SESSION)["state"]["authenticated_user_id"] == ALEX
    assert not [e for e in events if e["type"] == "action_card"]  # a greeting asks for no change
    # 2. the cancel card for the order the user named
    events = app.turn(SESSION, "Please cancel order #W1000001, I no longer need it")
    cards = [e for e in events if e["type"] == "action_card"]
    assert len(cards) == 1 and cards[0]["card_id"] == "card.cancel_order"
    assert cards[0]["params"]["order_id"] == "#W1000001"
    assert cards[0]["params"]["reason"] == "no longer needed"  # the reason the user gave, in other words
    assert _order_status(app, "#W1000001") == "pending"
    # 3. the explicit yes executes it, once
    events = app.turn(SESSION, "yes")
    assert events[-1]["status"] == "ok"
    assert _order_status(app, "#W1000001") == "cancelled"
    assert _meta(app, SESSION)["executed"] == "card.cancel_order"
    assert "cancelled" in "".join(e["text"] for e in events if e["type"] == "reply.delta")
    # 4. a request for a person escalates with its reason code
    events = app.turn(SESSION, "I want to talk to a human")
    esc = [e for e in events if e["type"] == "escalation"]
    assert len(esc) == 1 and esc[0]["reason_code"] == "user_requested_human"


def test_an_opening_without_identity_asks_for_it(app):
    events = app.turn("tau2-open", "I received my order #W1000002 and wish to exchange the mechanical keyboard")
    assert events[-1]["status"] == "ok"
    _narration_first(events)
    assert not [e for e in events if e["type"] == "action_card"]
    clar = [e for e in events if e["type"] == "clarify"]
    assert clar and re.search(r"email|name|zip", clar[0]["question"], re.I)
    assert _order_status(app, "#W1000002") == "delivered"


def test_the_sessions_decisions_replay_identically(app):
    import asyncio

    from serve.replay import replay_session
    from serve.stores.sqlite import SQLiteSessionStore

    rows = asyncio.run(replay_session(SESSION, SQLiteSessionStore(app.store_path), app.telemetry, domain="support"))
    assert rows and all(r["identical"] for r in rows), rows


def test_the_guard_table_reloads_live_in_the_ingress(app):
    """``guardrails.placement: ingress`` (the default): no GuardrailsServer runs; the table arrives as the
    ingress's user_config and applies in place (same process); a refused table keeps the active one.
    Last in the module: it changes the app's table."""
    import yaml
    from ray import serve

    from .conftest import REPO, wait_for

    assert "GuardrailsServer" not in serve.status().applications[app.app_name].deployments
    h = serve.get_deployment_handle("TandemIngress", app_name=app.app_name)
    before = h.guard_info.remote().result()
    table = yaml.safe_load((REPO / "configs" / "guardrails.yaml").read_text())

    def info() -> dict:
        return h.guard_info.remote().result()

    app.redeploy([{"name": "TandemIngress",
                   "user_config": {"guardrails": {"table": {**table, "version": "guardrails-test-2"}}}}])
    after = wait_for(info, lambda i: i["version"] == "guardrails-test-2", timeout=120)
    assert after["pid"] == before["pid"]  # reconfigured in place, not restarted
    e = app.turn("reload-1", "I want to talk to a human agent please.")
    assert e[-1]["rules_version"].startswith("guardrails-test-2+")
    assert [x["reason_code"] for x in e if x["type"] == "escalation"] == ["user_requested_human"]

    bad = {**table, "version": "guardrails-test-bad", "injection": [{"id": "x", "kind": "injection", "pattern": "("}]}
    app.redeploy([{"name": "TandemIngress", "user_config": {"guardrails": {"table": bad}}}], validate=False)
    refused = wait_for(info, lambda i: i["last_error"] is not None, timeout=120)
    assert refused["version"] == "guardrails-test-2" and refused["pid"] == before["pid"]
    e = app.turn("reload-2", "I want to talk to a human agent please.")
    assert e[-1]["rules_version"].startswith("guardrails-test-2+")
