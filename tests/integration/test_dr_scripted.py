"""DR multi-step flows end to end, with the orchestrator role served by a scripted deployment.

The app is the real one (ingress, ToolsServer over the SQLite world,
GuardrailsServer — ``guardrails.placement: deployment`` here —, the real SmolLM2 generator on vLLM); only the orchestrator
role maps to ``ScriptedOrchestrator`` (tests/integration/scripted_llm.py), so
the flows do not depend on a 135M model's competence.
"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.integration.conftest import start_app, wait_for

pytestmark = pytest.mark.integration

ALEX_EMAIL = "alex.rivera@example.com"
ALEX_PENDING = "#W1000001"
ALEX_DELIVERED = "#W1000002"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("dr-scripted")
    overrides = {
        "models": {
            "scripted": {
                "model_id": "scripted-orchestrator",
                "source": "embedded",
                "accelerator": "cpu",
                "server_cls": "tests.integration.scripted_llm:ScriptedOrchestrator",
                "deployment": {"num_cpus": 0, "num_replicas": 1},
            }
        },
        "roles": {"orchestrator": "scripted"},
        "pipeline": {"kind": "dr", "max_steps": 3, "max_reply_tokens": 48},
        # this module keeps the guard in its own deployment (the ingress placement: test_tandem_support.py)
        "guardrails": {"placement": "deployment"},
        "domain": {"name": "support", "seed": 7, "world_path": str(tmp / "world.db")},
    }
    yield from start_app(tmp, overrides)


def turn(app, sid: str, text: str) -> list[dict]:
    return app.turn(sid, text, timeout=180)


def types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def order_status(app, order_id: str) -> str:
    from ray import serve

    h = serve.get_deployment_handle("ToolsServer", app_name=app.app_name)
    return h.entity.remote("order", order_id).result()["status"]


def events_log(app) -> list[dict]:
    return app.events()


def test_authenticate_lookup_cancel_with_confirmation(app):
    sid = "dr-cancel"
    e1 = turn(app, sid, f"Hi, my email is {ALEX_EMAIL}.")
    assert e1[-1]["status"] == "ok" and "action_card" not in types(e1)
    e2 = turn(app, sid, f"Please cancel order {ALEX_PENDING}.")
    cards = [e for e in e2 if e["type"] == "action_card"]
    assert len(cards) == 1 and cards[0]["card_id"] == "card.cancel_order"
    assert cards[0]["params"]["order_id"] == ALEX_PENDING
    assert order_status(app, ALEX_PENDING) == "pending"  # nothing happens before the user's yes
    e3 = turn(app, sid, "yes")
    assert e3[-1]["status"] == "ok"
    assert order_status(app, ALEX_PENDING) == "cancelled"
    stored = httpx.get(f"{app.http}/v1/sessions/{sid}").json()["turns"]
    assert [t["status"] for t in stored] == ["ok", "ok", "ok"]
    assert stored[0]["meta"]["dr"]["facts"]["authenticated_user_id"] == "alex_rivera_1001"
    # the email never reaches the event log
    assert ALEX_EMAIL not in json.dumps(events_log(app))


def test_unauthenticated_cancel_is_refused_without_a_card(app):
    e = turn(app, "dr-noauth", f"Cancel order {ALEX_DELIVERED} now.")
    assert "action_card" not in types(e)
    assert order_status(app, ALEX_DELIVERED) == "delivered"
    log = [x for x in events_log(app) if x.get("turn_id") == e[-1]["turn_id"]]
    assert any(x["kind"] == "dr.fallback" for x in log) or e[-1]["status"] == "fallback"


def test_cancel_not_confirmed_changes_nothing(app):
    sid = "dr-noconfirm"
    turn(app, sid, "My email is priya.shah@example.com")
    e = turn(app, sid, "Please cancel order #W2000001.")
    assert [c["card_id"] for c in e if c["type"] == "action_card"] == ["card.cancel_order"]
    turn(app, sid, "hmm, let me think about it")
    assert order_status(app, "#W2000001") == "pending"


def test_the_served_tool_port_refuses_a_write_without_the_yes_to_its_card(app):
    """The tools deployment's gate across a Ray handle: a write not confirmed as its card showed it comes back
    as the typed ``UnconfirmedWrite`` (409 / FAILED_PRECONDITION) and the pack never ran it."""
    import asyncio

    from ray import serve

    from pipelines.core.ports import ToolSession
    from pipelines.errors import UnconfirmedWrite
    from serve.adapters import HandleTools

    tools = HandleTools(serve.get_deployment_handle("ToolsServer", app_name=app.app_name))
    args = {"order_id": "#W2000001", "reason": "no longer needed"}
    base = ToolSession(session_id="dr-served-gate", user_texts=["cancel #W2000001, no longer needed"])
    for session, reason in ((base.model_copy(update={"idempotency_key": "k"}), "not_confirmed"),
                            (base.confirm("cancel_pending_order", {**args, "reason": "other"}, "k"), "card_mismatch")):
        with pytest.raises(UnconfirmedWrite) as exc:
            asyncio.run(tools.call("cancel_pending_order", args, session))
        assert exc.value.details["reason"] == reason
    assert order_status(app, "#W2000001") == "pending"


def test_ambiguous_my_order_clarifies(app):
    sid = "dr-ambiguous"
    turn(app, sid, "My email is priya.shah@example.com")
    e = turn(app, sid, "I want to return my order.")
    assert "clarify" in types(e), types(e)
    clar = next(x for x in e if x["type"] == "clarify")
    assert len(clar["options"]) >= 2 and all(o.startswith("#W") for o in clar["options"])


def test_explicit_human_request_escalates_deterministically(app):
    e = turn(app, "dr-human", "I want to talk to a human agent please.")
    esc = [x for x in e if x["type"] == "escalation"]
    assert len(esc) == 1 and esc[0]["reason_code"] == "user_requested_human"


def test_step_cap_ends_in_a_logged_fallback(app):
    e = turn(app, "dr-cap", "Please keep looking for products.")
    assert e[-1]["status"] == "fallback"
    log = [x for x in events_log(app) if x.get("turn_id") == e[-1]["turn_id"]]
    fb = [x for x in log if x["kind"] == "dr.fallback"]
    assert fb and fb[0]["trigger"] == "step_cap"
    steps = [x for x in log if x["kind"] == "dr.step"]
    assert len(steps) == 3


def test_events_store_and_trace_agree(app):
    e = turn(app, "dr-agree", f"Hi, my email is {ALEX_EMAIL}.")
    done = e[-1]
    stored = httpx.get(f"{app.http}/v1/sessions/dr-agree").json()["turns"][-1]
    assert stored["turn_id"] == done["turn_id"] and stored["trace_id"] == done["trace_id"]
    assert stored["reply_text"] == "".join(x["text"] for x in e if x["type"] == "reply.delta")
    log = [x for x in events_log(app) if x.get("turn_id") == done["turn_id"]]
    assert {x["trace_id"] for x in log} == {done["trace_id"]}
    assert {"turn.start", "dr.pre_guard", "contract.forward", "turn.end"} <= {x["kind"] for x in log}


def test_counters_are_exported(app):
    from ray import serve

    h = serve.get_deployment_handle("TandemIngress", app_name=app.app_name)
    snap = h.counters_snapshot.remote().result()
    assert snap["escalations"].get("user_requested_human", 0) >= 1
    assert snap["fallbacks"].get("step_cap", 0) >= 1
    assert snap["delivered_violations"] == {}


def test_guardrail_table_reloads_live_and_refuses_a_malformed_one(app):
    """Rule tables travel as Ray Serve user_config: a new version applies without restarting
    the replica; a malformed one is refused by the replica and the active table stays."""
    import yaml
    from ray import serve

    from serve.config import ServeFile
    from tests.integration.conftest import REPO

    h = serve.get_deployment_handle("GuardrailsServer", app_name=app.app_name)
    before = h.info.remote().result()
    table = yaml.safe_load((REPO / "configs" / "guardrails.yaml").read_text())

    def info() -> dict:
        return h.info.remote().result()

    app.redeploy([{"name": "GuardrailsServer", "user_config": {"table": {**table, "version": "guardrails-test-2"}}}])
    after = wait_for(info, lambda i: i["version"] == "guardrails-test-2")
    assert after["pid"] == before["pid"]  # reconfigured in place, not restarted
    e = turn(app, "dr-reload", "I want to talk to a human agent please.")
    assert e[-1]["rules_version"] == "guardrails-test-2"

    bad = {**table, "version": "guardrails-test-bad", "injection": [{"id": "x", "kind": "injection", "pattern": "("}]}
    # our loader refuses it before it reaches Ray ...
    raw = app.serve_file.model_dump(mode="json")
    raw["applications"][0]["deployments"] = [{"name": "GuardrailsServer", "user_config": {"table": bad}}]
    with pytest.raises(ValueError, match="deployments"):  # pydantic's ValidationError is a ValueError
        ServeFile.model_validate(raw)
    # ... and a replica that receives it anyway keeps the active table and says why
    app.redeploy([{"name": "GuardrailsServer", "user_config": {"table": bad}}], validate=False)
    refused = wait_for(info, lambda i: i["last_error"] is not None)
    assert refused["version"] == "guardrails-test-2" and refused["pid"] == before["pid"]
    assert turn(app, "dr-after-bad", "I want to talk to a human agent please.")[-1]["rules_version"] == "guardrails-test-2"


def test_tandem_replay_reproduces_every_decision(app, capsys):
    """`tandem replay` re-runs the logged DR decisions of a 3-turn session (auth, card, confirmed write)."""
    from serve.replay import main as replay_main

    sid = "dr-replay"
    turn(app, sid, "My email is priya.shah@example.com")
    turn(app, sid, "Please cancel order #W2000002.")
    turn(app, sid, "I want to talk to a human agent please.")
    rc = replay_main([sid, "--config", str(app.config_path), "--json"])
    out = capsys.readouterr().out
    rows = json.loads(out[: out.rindex("]") + 1])
    assert rc == 0, out
    assert len(rows) == 3 and all(r["identical"] for r in rows)
    assert rows[0]["decisions"] > 0
