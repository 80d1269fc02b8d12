"""A write runs only after the user's yes to the card that shows it — enforced by the core's tool port, not by
the pack: a pack whose write ignores ``ctx.confirmed`` cannot write through any path (an orchestrator step, the
tandem turn's confirmed write, the DR rung, the tools deployment over a runner the pack wrote itself).

Real parts: the support pack's tools over its seeded world (its writes planted to ignore confirmation), the
toy pack whose own runner writes whatever it is told, the real turn runner, pipelines and ``ToolsServer``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pipelines import domains
from pipelines.core.domain import TurnFacts
from pipelines.core.ports import ToolSession
from pipelines.core.runner import LocalToolRunner
from pipelines.core.tools import ToolCaller
from pipelines.counters import Counters
from pipelines.domains import load_domain
from pipelines.domains.support import FIXTURES, build_support_domain, generate_world
from pipelines.errors import UnconfirmedWrite
from pipelines.guardrails.pii import Vault
from pipelines.tools import ToolContext
from tests.doubles import j, w1
from tests.unit import toy_domain

from .harnesses import DRHarness, TandemHarness

ALEX = FIXTURES["alex"]
OID, OTHER = ALEX.pending_order_id, ALEX.processed_order_id
CANCEL = {"order_id": OID, "reason": "no longer needed"}


class Planted:
    """The support pack with the planted mistake: its writes run whatever ``ctx.confirmed`` says (the pack's
    own check removed). Counts the write calls that reach it."""

    def __init__(self) -> None:
        self.pack = build_support_domain()
        self.reached: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pack, name)

    def invoke(self, name: str, args: dict[str, Any], ctx: ToolContext, world: Any) -> Any:
        if name in self.pack.write_tools:
            self.reached.append(name)
            ctx = ctx.model_copy(update={"confirmed": True})
        return self.pack.invoke(name, args, ctx, world)


def test_the_planted_pack_does_write_without_a_yes_when_called_directly() -> None:
    """The control: the planted mistake is real — called as the pack, unconfirmed, it cancels the order."""
    planted, world = Planted(), generate_world(7)
    out = planted.invoke("cancel_pending_order", dict(CANCEL),
                         ToolContext(session_id="s", authenticated_user_id=ALEX.user_id), world)
    assert out.observation.ok and world.orders[OID].status == "cancelled"


def test_an_orchestrator_step_that_calls_a_write_tool_is_refused_before_the_pack() -> None:
    planted, world = Planted(), generate_world(7)
    runner = LocalToolRunner(planted, world)
    facts = TurnFacts(session_id="s1", user_text=f"cancel order {OID}, I no longer need it",
                      user_texts=[f"cancel order {OID}, I no longer need it"],
                      state={"authenticated_user_id": ALEX.user_id})
    events: list[tuple[str, dict]] = []
    caller = ToolCaller(load_domain("support"), runner, facts, Vault(), locale="en", timeout_s=5.0,
                        counters=Counters(), emit=lambda kind, **f: events.append((kind, f)))
    record = asyncio.run(caller.call("cancel_pending_order", dict(CANCEL), step=1))  # a step, never confirmed
    assert not record.ok and record.reason == "unconfirmed_write"
    # even a caller that says "confirmed" without the card the user saw is refused
    forced = asyncio.run(caller.raw("cancel_pending_order", dict(CANCEL), step=1, confirmed=True,
                                    idempotency_key="k"))
    assert not forced.observation.ok and forced.reason == "unconfirmed_write"
    assert planted.reached == [] and world.orders[OID].status == "pending" and runner.ledger.entries == {}


def _verified(h: TandemHarness) -> None:
    h.turn("Hi, my email is alex.rivera@example.com", orch=[w1("greeting", "hello", "Let me find your account.")])
    assert h.meta["state"]["authenticated_user_id"] == ALEX.user_id


def _card(h: TandemHarness, oid: str) -> None:
    r = h.turn(f"Please cancel order {oid}, it is no longer needed",
               orch=[w1("cancel", "order", "Let me check that order."),
                     j(decision="action", card_id="card.cancel_order",
                       params={"order_id": oid, "reason": "no longer needed"})])
    assert [c.card_id for c in r.of("action_card")] == ["card.cancel_order"], h.meta


def test_the_tandem_turn_runs_only_the_card_shown_and_only_after_the_yes() -> None:
    planted, world = Planted(), generate_world(7)
    h = TandemHarness(tools=LocalToolRunner(planted, world))
    _verified(h)
    _card(h, OID)
    pending = h.turns[-1].meta["tandem"]["state"]["pending"]
    assert pending["tool"] == "cancel_pending_order" and len(pending["digest"]) == 64
    pending["args"] = {**pending["args"], "order_id": OTHER}  # the stored card changed after it was shown
    h.turn("yes")
    assert h.meta["executed"] is None and planted.reached == []
    assert world.orders[OID].status == "pending" and world.orders[OTHER].status != "cancelled"
    _card(h, OID)  # shown again, as it is: the yes runs it, once
    h.turn("yes")
    assert h.meta["executed"] == "card.cancel_order"
    assert planted.reached == ["cancel_pending_order"] and world.orders[OID].status == "cancelled"


def test_the_dr_rung_runs_only_the_card_shown() -> None:
    planted = Planted()
    h = DRHarness(wrap_tools=lambda local: LocalToolRunner(planted, local.world))
    h.turn(f"Hi, my email is {ALEX.email}", orch=[j(decision="find_user_id_by_email", args={"email": "[EMAIL_1]"}),
                                                  j(decision="respond")], gen=["Thanks, you are verified."])
    h.turn(f"Please cancel order {OID}, I no longer need it",
           orch=[j(decision="get_order_details", args={"order_id": OID}),
                 j(decision="action", card_id="card.cancel_order", params=CANCEL)], gen=["Reply yes to confirm."])
    pending: dict[str, Any] = h.store.turns["s1"][-1].meta["dr"]["facts"]["pending_action"]
    assert pending is not None and len(pending["digest"]) == 64, h.last_meta
    pending["args"] = {**pending["args"], "reason": "ordered by mistake"}  # changed after it was shown
    h.turn("yes", gen=["I could not do that."])
    assert h.last_meta["executed"] is None and planted.reached == []
    assert h.last_meta["fallback"]["detail"] == "cancel_pending_order: card_mismatch"
    assert h.world.orders[OID].status == "pending"


@pytest.fixture
def toy_served(tmp_path):
    from serve.deployments.tools import ToolsServer

    domains.register("toy", toy_domain.DomainPack)
    try:
        yield ToolsServer({"name": "toy", "seed": 0, "world_path": str(tmp_path / "w.db")})
    finally:
        domains.unregister("toy")


def test_the_tools_deployment_gates_a_runner_the_pack_wrote_itself(toy_served) -> None:
    """The toy pack's own runner (not the core's) writes whatever it is told: served, a write still runs only
    with the yes to its card and a key."""
    server, alerts = toy_served, toy_served.runner.world["alerts"]
    base = ToolSession(session_id="s")
    for session in (base, base.model_copy(update={"confirmed": True, "idempotency_key": "k"}),
                    base.confirm("set_alert", {"city": "Lima"}, "k")):
        with pytest.raises(UnconfirmedWrite):
            asyncio.run(server.call("set_alert", {"city": "Oslo"}, session))
    assert alerts == set()
    out = asyncio.run(server.call("set_alert", {"city": "Oslo"}, base.confirm("set_alert", {"city": "Oslo"}, "k")))
    assert out.observation.ok and alerts == {"Oslo"}
    read = asyncio.run(server.call("get_forecast", {"city": "Oslo"}, base))  # reads need no yes
    assert read.observation.ok and read.observation.result == {"city": "Oslo", "sky": "snow"}
