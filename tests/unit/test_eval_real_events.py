"""The eval judges on the events the real pipelines emit (in process, scripted model, real runner and tools).

The judges read events by name and field; these tests feed them what ``TandemPipeline``
and ``DRPipeline`` actually emit, so a renamed event or field fails here.
"""

from __future__ import annotations

import json
from typing import Any

from pipelines.domains.support.evaluation import CARD_RULES
from serve.eval.measures import (
    SessionLedger,
    delivered_unselected_actions,
    domain_vocabulary,
    invented_arguments,
    unrequested_cards,
)
from serve.eval.scoring import analyse_turn, score
from tests.doubles import j, w1

from .harnesses import DRHarness as Harness
from .harnesses import TandemHarness

ALEX = "alex_rivera_1001"


def _judge(kind: str, h: Any, r: Any, text: str, ledger: SessionLedger) -> dict[str, Any]:
    sse = [json.loads(e.model_dump_json()) for e in r.events]
    log = [{"kind": k, **json.loads(json.dumps(f, default=str))} for k, f in r.sink]
    meta = h.store.turns[h.session][-1].meta.get(kind) or {}
    red = ledger.add_user_text(text)
    facts = analyse_turn(kind, sse, log, meta, 3, user_text_redacted=red, lookups=_support().lookup_tools)
    vocab = domain_vocabulary(h.domain if kind == "tandem" else _support())
    return {"facts": facts, "sse": sse, "invented": invented_arguments(kind, log, ledger, vocab),
            "unrequested": unrequested_cards(sse, ledger.raw_texts, CARD_RULES),
            "unselected": delivered_unselected_actions(sse, meta.get("card_id"))}


def _support() -> Any:
    from pipelines.domains.support.pack import SupportPack

    return SupportPack()


def test_the_readme_session_through_the_real_tandem_turn():
    h, led = TandemHarness(), SessionLedger()
    text = "Hi, my email is alex.rivera@example.com."
    r = _judge("tandem", h, h.turn(text, orch=[w1("greeting", "hello")]), text, led)
    assert r["facts"]["first_decision"]["decision"] == "find_user_id_by_email"
    assert score({"kind": "authenticate", "user_id": ALEX}, r["facts"], text, None)[0] is True
    assert r["invented"] == []
    text = "Please cancel order #W1000001, it is no longer needed."
    r = _judge("tandem", h, h.turn(text, orch=[
        w1("cancel", "order"),
        j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": "no longer needed"}),
    ]), text, led)
    want = {"kind": "action_card", "card_id": "card.cancel_order", "params": {"order_id": "#W1000001"}}
    assert score(want, r["facts"], text, None)[0] is True
    assert r["facts"]["first_decision"]["decision"] == "get_order_details" and r["facts"]["terminal"] is True
    assert (r["invented"], r["unrequested"], r["unselected"]) == ([], [], [])
    r = _judge("tandem", h, h.turn("yes"), "yes", led)
    want = {"kind": "executed", "card_id": "card.cancel_order", "entity": "#W1000001", "status": "cancelled"}
    assert r["facts"]["route"] == "execute_pending"
    assert score(want, r["facts"], "yes", h.world.orders["#W1000001"].status)[0] is True


def test_a_tau2_opening_clarifies_identity_by_table():
    h, led = TandemHarness(), SessionLedger()
    text = "I received my order #W1000002 and wish to exchange the mechanical keyboard."
    r = _judge("tandem", h, h.turn(text, orch=[w1("exchange", "items")]), text, led)
    f = r["facts"]
    assert f["first_decision"]["via"] == "phi" and f["terminal_by"] == "phi"
    assert score({"kind": "identify"}, f, text, None)[0] is True


def test_a_dr_lookup_of_an_invented_email_is_counted_and_scored_wrong():
    h, led = Harness(), SessionLedger()
    text = "I need to change the address on my order."
    turn = h.turn(text, orch=[j(decision="find_user_id_by_email", args={"email": "sam@example.com"}),
                              j(decision="clarify", question="What is the email on your account?")])
    r = _judge("dr", h, turn, text, led)
    assert r["facts"]["first_decision"]["decision"] == "find_user_id_by_email"
    assert score({"kind": "identify"}, r["facts"], text, None)[0] is False
    assert [(i["name"], i["arg"]) for i in r["invented"]] == [("find_user_id_by_email", "email")]
