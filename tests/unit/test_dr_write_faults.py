"""The fault matrix of a confirmed write: whole DR turns through the real TurnRunner and DRPipeline,
the real retail tools over the real SQLite world store (its ledger), a scripted model.

After each fault: 0 writes lost (a change on disk or in memory has its ledger row, and the reverse),
0 doubled (one execution, one refund), memory and disk agree, and the turn tells the truth about
whether the write ran (``meta["dr"]["executed"]``, the reply). Where the truthful *reply* needs more
than a minimal pipeline change the test is marked ``xfail(strict=True)`` with the reason.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pipelines.annex.dr import DRSettings, OrchestratorSettings
from pipelines.annex.dr.prompts import PATH_INSTRUCTIONS
from pipelines.core.ports import write_key
from pipelines.core.runner import LocalToolRunner
from pipelines.domains.support import build_support_domain
from pipelines.domains.support.generator import FIXTURES, generate_world
from pipelines.domains.support.world import RetailWorld
from pipelines.errors import ModelUnavailable, ToolError, UpstreamError
from pipelines.events import TurnRequest
from pipelines.guardrails import LocalGuardrails
from serve.stores.world_sqlite import SQLiteWorldStore
from tests.doubles import j

from .harnesses import DRHarness as Harness

ALEX = FIXTURES["alex"]
OID = ALEX.pending_order_id
LOOKUP = j(decision="find_user_id_by_email", args={"email": "[EMAIL_1]"})
RESPOND = j(decision="respond")
CANCEL = j(decision="action", card_id="card.cancel_order", params={"order_id": OID, "reason": "no longer needed"})
DONE = f"Order {OID} has been cancelled."
FALLBACK = DRSettings().fallback_reply
SORRY = "I can't complete that right now."  # what the generator says on the fallback path


class Transport:
    """The hop between the pipeline and the tools deployment; ``lose`` replies to writes are never delivered."""

    def __init__(self, inner: LocalToolRunner, lose: int = 0, fail: int = 0) -> None:
        self.inner, self.lose, self.fail = inner, lose, fail

    async def call(self, name: str, args: dict[str, Any], session: Any) -> Any:
        if name in self.inner.domain.write_tools and self.fail:
            self.fail -= 1
            raise ToolError("tools deployment unreachable")
        result = await self.inner.call(name, args, session)
        if name in self.inner.domain.write_tools and self.lose:
            self.lose -= 1
            await asyncio.Event().wait()  # the reply is lost: the caller's timeout ends the wait
        return result

    async def precheck(self, name: str, args: dict[str, Any], session: Any) -> str | None:
        return await self.inner.precheck(name, args, session)


class FlakyGuardrails(LocalGuardrails):
    """The real guardrails, unreachable for the next ``down`` pre-guard calls."""

    down = 0

    async def pre(self, text, history=()):
        if self.down:
            self.down -= 1
            raise UpstreamError("guardrails deployment unavailable")
        return await super().pre(text, history)


@pytest.fixture
def store(tmp_path) -> SQLiteWorldStore:
    s = SQLiteWorldStore(tmp_path / "world.db")
    s.seed_if_empty(generate_world(7))
    yield s
    s.close()


def session_at_the_card(store: SQLiteWorldStore, *, transport: dict | None = None,
                        guardrails: LocalGuardrails | None = None) -> tuple[Harness, LocalToolRunner, Transport]:
    runner = LocalToolRunner(build_support_domain(), store.load(RetailWorld.from_entities), ledger=store)
    hop = Transport(runner, **(transport or {}))
    settings = DRSettings(orchestrator=OrchestratorSettings(tool_timeout_s=0.05))
    h = Harness(tools=hop, settings=settings, guardrails=guardrails)
    h.world = runner.world
    h.turn(f"Hi, my email is {ALEX.email}", orch=[LOOKUP, RESPOND], gen=["Thanks, you are verified."])
    h.turn(f"What is the status of order {OID}?",
           orch=[j(decision="get_order_details", args={"order_id": OID}), RESPOND], gen=[f"Order {OID} is pending."])
    r = h.turn("Please cancel it, I no longer need it", orch=[CANCEL], gen=["Reply yes to confirm."])
    assert [c.card_id for c in r.of("action_card")] == ["card.cancel_order"]
    return h, runner, hop


def executions(runner: LocalToolRunner) -> int:
    return [n for n, _ in runner.calls].count("cancel_pending_order")


def audit(store: SQLiteWorldStore, runner: LocalToolRunner, *, executed: bool) -> None:
    """0 lost, 0 doubled, memory == disk == ledger."""
    disk = store.load(RetailWorld.from_entities).orders[OID]
    assert disk == runner.world.orders[OID]
    rows = [e for e in store.ledger("s1") if e.outcome.observation.ok]
    refunds = [p for p in disk.payment_history if p.transaction_type == "refund"]
    if executed:
        assert disk.status == "cancelled" and len(rows) == 1 and len(refunds) == 1
        assert rows[0].key == write_key("s1", "card.cancel_order", "t3")
        assert rows[0].outcome.changed["order"] == [OID]
    else:
        assert disk.status == "pending" and rows == [] and refunds == []
    assert executions(runner) == (1 if executed else 0)


def meta(h: Harness) -> dict:
    return h.last_meta


# ---- the happy path, for reference ------------------------------------------------------------


def test_confirmed_write_is_recorded_with_its_key(store: SQLiteWorldStore) -> None:
    h, runner, _ = session_at_the_card(store)
    r = h.turn("yes", gen=[DONE])
    assert r.status == "ok" and r.reply == DONE and meta(h)["executed"] == "card.cancel_order"
    audit(store, runner, executed=True)


# ---- 1. tool timeout around the write -----------------------------------------------------------


def test_a_lost_write_reply_is_recovered_from_the_ledger(store: SQLiteWorldStore) -> None:
    h, runner, _ = session_at_the_card(store, transport={"lose": 1})
    r = h.turn("yes", gen=[DONE])
    audit(store, runner, executed=True)
    assert meta(h)["executed"] == "card.cancel_order" and r.status == "ok" and r.reply == DONE
    tool = [f for k, f in r.sink if k == "dr.tool"]
    assert [t["result"]["replayed"] for t in tool] == [True]  # the second ask read the ledger
    assert [f["trigger"] for k, f in r.sink if k == "dr.write_retry"] == ["tool_timeout"]


def test_when_both_asks_time_out_the_card_stays_and_a_later_yes_reads_the_ledger(store: SQLiteWorldStore) -> None:
    h, runner, hop = session_at_the_card(store, transport={"lose": 2})
    r = h.turn("yes", gen=[SORRY])
    audit(store, runner, executed=True)  # the write ran once, and is recorded
    assert r.status == "fallback" and meta(h)["fallback"] == {
        "trigger": "write_outcome_unknown", "cls": "infra", "detail": "cancel_pending_order: cancel_pending_order"}
    assert meta(h)["executed"] is None and meta(h)["facts"]["pending_action"]["card_id"] == "card.cancel_order"
    r = h.turn("yes", gen=[DONE])
    audit(store, runner, executed=True)  # still once
    assert meta(h)["executed"] == "card.cancel_order" and r.reply == DONE


def test_when_both_asks_time_out_the_reply_does_not_deny_the_write(store: SQLiteWorldStore) -> None:
    h, _, _ = session_at_the_card(store, transport={"lose": 2})
    h.turn("yes", gen=["I couldn't confirm it."])
    system = [c for role, c in h.models.calls if role == "generator"][-1].messages[0].content
    assert PATH_INSTRUCTIONS["fallback"] not in system  # never told the change failed
    assert PATH_INSTRUCTIONS["write_unknown"] in system


def test_when_both_asks_time_out_and_the_generator_fails_the_template_does_not_deny_the_write(
        store: SQLiteWorldStore) -> None:
    h, runner, _ = session_at_the_card(store, transport={"lose": 2})
    r = h.turn("yes", gen=[ModelUnavailable("generator overloaded")])
    audit(store, runner, executed=True)
    unknown = build_support_domain().texts.templates["write_unknown"]
    assert r.reply == unknown and r.status == "fallback"
    assert meta(h)["fallback"]["trigger"] == "write_outcome_unknown"  # the first cause, not the generator's


def test_an_unreachable_tools_deployment_twice_is_an_unknown_outcome_and_the_card_stays(
        store: SQLiteWorldStore) -> None:
    # a transport failure may come after the write ran: the same wording as a lost reply
    h, runner, _ = session_at_the_card(store, transport={"fail": 2})
    h.turn("yes", gen=["I couldn't confirm it."])
    assert meta(h)["fallback"] == {"trigger": "write_outcome_unknown", "cls": "infra",
                                   "detail": "cancel_pending_order: cancel_pending_order: tool_error"}
    assert meta(h)["facts"]["pending_action"]["card_id"] == "card.cancel_order"
    audit(store, runner, executed=False)
    r = h.turn("yes", gen=[DONE])
    assert r.reply == DONE and meta(h)["executed"] == "card.cancel_order"
    audit(store, runner, executed=True)


# ---- 2. world-store commit failure ----------------------------------------------------------------


def test_a_failed_commit_changes_nothing_says_so_and_keeps_the_card(store: SQLiteWorldStore) -> None:
    h, runner, _ = session_at_the_card(store)
    store._conn().execute("CREATE TRIGGER f BEFORE INSERT ON write_ledger BEGIN SELECT RAISE(ABORT, 'full'); END")
    r = h.turn("yes", gen=[SORRY])
    assert r.status == "fallback" and meta(h)["fallback"] == {"trigger": "tool_error", "cls": "infra",
                                                               "detail": "cancel_pending_order: tool_error"}
    assert r.reply == SORRY and meta(h)["executed"] is None  # the truth: not done
    system = [c for role, c in h.models.calls if role == "generator"][-1].messages[0].content
    assert PATH_INSTRUCTIONS["fallback"] in system
    assert runner.world.orders[OID].status == "pending" and executions(runner) == 2  # tried twice, committed never
    assert store.load(RetailWorld.from_entities).orders[OID].status == "pending" and store.ledger() == []
    store._conn().execute("DROP TRIGGER f")
    runner.calls.clear()
    r = h.turn("yes", gen=[DONE])  # the session is still usable: the same card, once
    assert r.reply == DONE and meta(h)["executed"] == "card.cancel_order"
    audit(store, runner, executed=True)


# ---- 3. two concurrent yes ----------------------------------------------------------------------------


def test_two_concurrent_yes_execute_once_and_both_tell_the_truth(store: SQLiteWorldStore) -> None:
    h, runner, _ = session_at_the_card(store)
    # the per-session lock serializes the two turns: the first confirms the card, the second finds
    # it consumed and is an ordinary turn (it never executes the write a second time)
    h.models.push("orchestrator", RESPOND)
    h.models.push("generator", DONE, "Anything else?")

    async def both():
        async def one(turn_id: str) -> list[Any]:
            return [e async for e in h.runner.run("s1", TurnRequest(text="yes"), trace_id="tr", turn_id=turn_id)]
        return await asyncio.gather(one("ya"), one("yb"))

    a, b = asyncio.run(both())
    audit(store, runner, executed=True)
    assert executions(runner) == 1
    routes = [f["route"] for k, f in h.sink.events if k == "dr.route"]
    assert routes.count("execute_pending") == 1
    replies = sorted("".join(e.text for e in ev if e.type == "reply.delta") for ev in (a, b))
    assert replies == sorted([DONE, "Anything else?"])
    for events in (a, b):
        assert events[-1].status == "ok"
    executed = [t.meta["dr"].get("executed") for t in h.store.turns["s1"][-2:]]
    assert executed.count("card.cancel_order") == 1


# ---- 4. a retried yes after a lost reply -------------------------------------------------------------


def test_a_retried_yes_whose_first_turn_was_never_stored_replays_the_outcome(store: SQLiteWorldStore) -> None:
    h, runner, _ = session_at_the_card(store)
    h.store.fail_appends = ConnectionError("session store down")
    lost = h.turn("yes", gen=[DONE])  # the write ran; the turn could not be stored: the client is told
    assert [e.code for e in lost.of("error")] == ["store_unavailable"]
    audit(store, runner, executed=True)
    h.store.fail_appends = None
    r = h.turn("yes", gen=[DONE])
    audit(store, runner, executed=True)  # not twice
    assert r.reply == DONE and meta(h)["executed"] == "card.cancel_order"
    assert [f["result"]["replayed"] for k, f in r.sink if k == "dr.tool"] == [True]


def test_a_retried_yes_after_a_stored_turn_runs_nothing(store: SQLiteWorldStore) -> None:
    h, runner, _ = session_at_the_card(store)
    h.turn("yes", gen=[DONE])
    r = h.turn("yes", orch=[RESPOND], gen=["Is there anything else I can help with?"])
    audit(store, runner, executed=True)
    assert meta(h)["executed"] is None and r.of("action_card") == []


# ---- 5. generator failing after the write --------------------------------------------------------------


def test_a_generator_failure_after_the_write_still_records_it(store: SQLiteWorldStore) -> None:
    h, runner, _ = session_at_the_card(store)
    r = h.turn("yes", gen=[ModelUnavailable("generator overloaded")])
    audit(store, runner, executed=True)
    assert meta(h)["executed"] == "card.cancel_order" and meta(h)["changed"]["order"] == [OID]
    assert r.status == "fallback" and meta(h)["fallback"]["trigger"] == "model_error"
    assert meta(h)["facts"]["pending_action"] is None  # done: a later yes cannot run it again


def test_a_generator_failure_after_the_write_does_not_deny_it(store: SQLiteWorldStore) -> None:
    h, _, _ = session_at_the_card(store)
    r = h.turn("yes", gen=[ModelUnavailable("generator overloaded")])
    assert r.reply == f"Done. I have carried out your request to cancel order {OID} (reason: no longer needed)."


# ---- 6. guardrails down on the yes turn ----------------------------------------------------------------


def test_guardrails_down_on_the_yes_turn_keeps_the_card(store: SQLiteWorldStore) -> None:
    guard = FlakyGuardrails()
    h, runner, _ = session_at_the_card(store, guardrails=guard)
    guard.down = 1
    r = h.turn("yes", gen=[])
    assert r.status == "failed" and r.of("error")[0].code == "upstream_error"
    audit(store, runner, executed=False)
    assert meta(h)["facts"]["pending_action"]["turn_id"] == "t3"  # not consumed
    r = h.turn("yes", gen=[DONE])
    assert r.reply == DONE and meta(h)["executed"] == "card.cancel_order"
    audit(store, runner, executed=True)


# ---- the tools deployment unreachable once --------------------------------------------------------------


def test_an_unreachable_tools_deployment_is_asked_again_under_the_same_key(store: SQLiteWorldStore) -> None:
    h, runner, _ = session_at_the_card(store, transport={"fail": 1})
    r = h.turn("yes", gen=[DONE])
    assert r.reply == DONE and meta(h)["executed"] == "card.cancel_order"
    audit(store, runner, executed=True)
