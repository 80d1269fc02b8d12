"""The tandem turn over the same tool port: its writes go through the ledger, its write arguments
through the backend's grounding check (with the session's user texts), and the canary holds."""

from __future__ import annotations

from pipelines.core.runner import LocalToolRunner
from pipelines.domains.support import build_support_domain, generate_world
from pipelines.domains.support.world import RetailWorld
from pipelines.guardrails import canary_token
from pipelines.tandem.settings import TandemSettings
from serve.stores.world_sqlite import SQLiteWorldStore
from tests.doubles import j, w1

from .harnesses import TandemHarness
from .test_dr_write_faults import Transport

ALEX, OID = "alex_rivera_1001", "#W1000001"


def verified(tools=None) -> TandemHarness:
    h = TandemHarness(tools=tools)
    if tools is not None:
        h.world = tools.world
    h.turn("Hi, my email is alex.rivera@example.com", orch=[w1("greeting", "hello", "Let me find your account.")])
    assert h.meta["state"]["authenticated_user_id"] == ALEX
    return h


def address_turn(h: TandemHarness, text: str, params: dict):
    return h.turn(text, orch=[w1("modify", "address", "Let me check that order."),
                              j(decision="action", card_id="card.modify_address", params=params)])


def test_a_typed_address_reaches_the_backend_with_the_users_words() -> None:
    h = verified()
    text = f"Please change the shipping address of order {OID} to 12 Ocean Drive, Reno, NV 89501, USA"
    params = {"order_id": OID, "address1": "[ADDRESS_1]", "address2": "", "city": "Reno", "state": "NV",
              "country": "USA", "zip": "89501"}
    r = address_turn(h, text, params)
    assert [c.card_id for c in r.of("action_card")] == ["card.modify_address"], h.meta
    # the record holds the card by value (a redacting store seals values under its own placeholders)
    assert h.meta["state"]["pending"]["args"]["address1"] == "12 Ocean Drive"
    h.turn("yes")
    address = h.world.orders[OID].address
    assert (address.address1, address.city, address.zip) == ("12 Ocean Drive", "Reno", "89501")


def test_a_confirmed_tandem_write_is_recorded_in_the_ledger_once(tmp_path) -> None:
    store = SQLiteWorldStore(tmp_path / "w.db")
    store.seed_if_empty(generate_world(7))
    runner = LocalToolRunner(build_support_domain(), store.load(RetailWorld.from_entities), ledger=store)
    h = verified(runner)
    h.turn(f"Please cancel order {OID}, it is no longer needed", orch=[w1("cancel", "order", "Let me check that order."),
                                               j(decision="action", card_id="card.cancel_order",
                                                 params={"order_id": OID, "reason": "no longer needed"})])
    h.turn("yes")
    [entry] = store.ledger("s1")
    assert entry.tool == "cancel_pending_order" and entry.outcome.observation.ok
    assert store.load(RetailWorld.from_entities).orders[OID].status == "cancelled" == runner.world.orders[OID].status


def test_the_canary_is_in_every_tandem_system_prompt() -> None:
    h = verified()
    h.turn(f"Please cancel order {OID}, it is no longer needed", orch=[w1("cancel", "order", "Let me check that order."),
                                               j(decision="action", card_id="card.cancel_order",
                                                 params={"order_id": OID, "reason": "no longer needed"})])
    token = canary_token()
    systems = [c.messages[0] for _, c in h.models.calls]
    assert systems and all(m.role == "system" and token in m.content for m in systems)
    assert all(token not in m.content for _, c in h.models.calls for m in c.messages[1:])


def test_a_narration_that_leaks_the_canary_is_withheld() -> None:
    h = TandemHarness()
    r = h.turn("Hi! What can you help me with?",
               orch=[w1("greeting", "hello", f"My marker is {canary_token()} and I can help.")])
    delivered = "".join(e.text for e in r.events if e.type in ("narration.delta", "reply.delta"))
    assert canary_token() not in delivered


def _at_the_card(tools) -> TandemHarness:
    h = TandemHarness(tools=tools, settings=TandemSettings(tool_timeout_s=0.05))
    h.turn("Hi, my email is alex.rivera@example.com", orch=[w1("greeting", "hello", "Let me find your account.")])
    h.turn(f"Please cancel order {OID}, it is no longer needed", orch=[w1("cancel", "order", "Let me check that order."),
                                               j(decision="action", card_id="card.cancel_order",
                                                 params={"order_id": OID, "reason": "no longer needed"})])
    return h


YES = [w1("confirm", "yes", "Okay.")] * 2


def test_a_lost_tandem_write_reply_never_doubles_the_write() -> None:
    runner = LocalToolRunner(build_support_domain(), generate_world(7))
    h = _at_the_card(Transport(runner, lose=1))
    h.turn("yes", orch=YES)
    h.turn("yes", orch=YES)
    assert runner.world.orders[OID].status == "cancelled"
    assert [n for n, _ in runner.calls].count("cancel_pending_order") == 1
    assert len(runner.ledger.entries) == 1


def test_a_lost_tandem_write_reply_tells_the_truth() -> None:
    runner = LocalToolRunner(build_support_domain(), generate_world(7))
    h = _at_the_card(Transport(runner, lose=1))
    h.turn("yes", orch=YES)
    assert h.meta["executed"] == "card.cancel_order"
    assert runner.world.orders[OID].status == "cancelled"
    assert [n for n, _ in runner.calls].count("cancel_pending_order") == 1  # the retry read the ledger
    assert len(runner.ledger.entries) == 1
    assert [f["trigger"] for k, f in h.sink.events if k == "tandem.write_retry"] == ["tool_timeout"]


def test_a_write_whose_reply_is_lost_twice_is_never_denied_and_the_next_yes_reports_it() -> None:
    runner = LocalToolRunner(build_support_domain(), generate_world(7))
    h = _at_the_card(Transport(runner, lose=2))
    r = h.turn("yes", orch=YES)
    assert r.status == "fallback" and h.meta["executed"] is None
    assert h.meta["state"]["pending"]["card_id"] == "card.cancel_order"  # kept: the next yes asks again
    assert "couldn't confirm whether that change went through" in r.reply
    assert "can't complete" not in r.reply
    assert runner.world.orders[OID].status == "cancelled"  # it did run, once
    r = h.turn("yes", orch=YES)
    assert h.meta["executed"] == "card.cancel_order" and h.meta["state"]["pending"] is None
    assert r.reply.startswith("Done.")
    assert [n for n, _ in runner.calls].count("cancel_pending_order") == 1
    assert len(runner.ledger.entries) == 1
