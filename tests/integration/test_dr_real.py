"""The DR pipeline with the real embedded model in every role.

What must hold whatever a 135M model decides: every orchestrator step parses
(structured outputs); an unauthenticated or unconfirmed write never happens;
no action card reaches the client unless the orchestrator selected it and the
backend validated it; an explicit request for a human escalates with a reason
code (a deterministic route); events, stored state and trace agree; PII never
reaches the event log.
"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.integration.conftest import start_app

pytestmark = pytest.mark.integration

PROMPTS = [
    "Hi, my email is alex.rivera@example.com, where is my order #W1000002?",
    "Can I return a pair of shoes I bought last month?",
    "How do I change my shipping address?",
    "Cancel order #W1000001 right now.",
]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("dr-real")
    overrides = {
        "pipeline": {"kind": "dr", "max_steps": 3, "max_reply_tokens": 48, "turn_deadline_s": 300},  # shared box
        "domain": {"name": "support", "seed": 7, "world_path": str(tmp / "world.db")},
    }
    yield from start_app(tmp, overrides)


def turn(app, sid: str, text: str) -> list[dict]:
    return app.turn(sid, text)


def log_for(app, turn_id: str) -> list[dict]:
    return app.events(turn_id)


def order_status(app, order_id: str) -> str:
    from ray import serve

    return serve.get_deployment_handle("ToolsServer", app_name=app.app_name).entity.remote("order", order_id).result()["status"]


@pytest.fixture(scope="module")
def turns(app) -> list[list[dict]]:
    return [turn(app, f"real-{i}", text) for i, text in enumerate(PROMPTS)]


def test_every_decision_parses(app, turns):
    steps = []
    for ev in turns:
        steps += [e for e in log_for(app, ev[-1]["turn_id"]) if e["kind"] == "dr.step"]
    assert steps, "the orchestrator was never called"
    bad = [s for s in steps if s["decision"] is None]
    assert not bad, bad


def test_no_write_without_auth_and_confirmation(app, turns):
    assert order_status(app, "#W1000001") == "pending"
    assert order_status(app, "#W1000002") == "delivered"
    for ev in turns:  # nothing was confirmed in these sessions: no write tool ran
        tools = [e for e in log_for(app, ev[-1]["turn_id"]) if e["kind"] == "dr.tool"]
        assert all(not t.get("confirmed") for t in tools)


def test_action_cards_only_when_selected_and_validated(app, turns):
    for ev in turns:
        cards = [e for e in ev if e["type"] == "action_card"]
        log = log_for(app, ev[-1]["turn_id"])
        outcome = next(e for e in log if e["kind"] == "dr.outcome")
        if cards:
            assert len(cards) == 1 and outcome["path"] == "action_card"
            assert outcome["card_id"] == cards[0]["card_id"]
            prechecks = [p for p in log if p["kind"] == "dr.precheck" and p["card_id"] == cards[0]["card_id"]]
            assert prechecks and prechecks[-1]["reason"] in (None, "not_confirmed")
        else:
            assert outcome["path"] != "action_card"


def test_explicit_human_request_escalates(app):
    ev = turn(app, "real-human", "Please transfer me to a human agent.")
    esc = [e for e in ev if e["type"] == "escalation"]
    assert len(esc) == 1 and esc[0]["reason_code"] == "user_requested_human"
    routes = [e for e in log_for(app, ev[-1]["turn_id"]) if e["kind"] == "dr.route"]
    assert routes and routes[0]["route"] == "escalate"
    assert not [e for e in log_for(app, ev[-1]["turn_id"]) if e["kind"] == "dr.step"]  # no model decided it


def test_events_state_and_trace_agree_and_no_pii(app, turns):
    for i, ev in enumerate(turns):
        done = ev[-1]
        stored = httpx.get(f"{app.http}/v1/sessions/real-{i}").json()["turns"][-1]
        assert stored["turn_id"] == done["turn_id"] and stored["trace_id"] == done["trace_id"]
        assert stored["status"] == done["status"]
        assert stored["reply_text"] == "".join(e["text"] for e in ev if e["type"] == "reply.delta")
        log = log_for(app, done["turn_id"])
        assert {e["trace_id"] for e in log} == {done["trace_id"]}
        assert "alex.rivera@example.com" not in json.dumps(log)
