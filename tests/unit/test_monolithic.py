"""The monolithic baseline: one generator call over pre-fetched context."""

from __future__ import annotations

import asyncio
import json

from pipelines.annex.monolithic import MonolithicPipeline
from pipelines.core.runner import LocalToolRunner
from pipelines.domains.support import FIXTURES, build_support_domain, generate_world
from pipelines.events import TurnRequest
from pipelines.guardrails import LocalGuardrails
from pipelines.turn import TurnRunner
from tests.doubles import InMemorySessionStore, ListEventSink, ScriptModels

ALEX = FIXTURES["alex"]


class Mono:
    def __init__(self) -> None:
        self.domain = build_support_domain()
        self.world = generate_world(7)
        self.tools = LocalToolRunner(self.domain, self.world)
        self.models = ScriptModels()
        self.sink = ListEventSink()
        self.store = InMemorySessionStore()
        self.pipeline = MonolithicPipeline(self.domain, self.models, self.tools, LocalGuardrails())
        self.runner = TurnRunner(self.pipeline, self.store, sink=self.sink)

    def turn(self, text: str, gen: list | None = None) -> list:
        if gen:
            self.models.push("generator", *gen)

        async def go() -> list:
            return [e async for e in self.runner.run("s", TurnRequest(text=text), trace_id="t")]

        return asyncio.run(go())


def test_one_generator_call_with_prefetched_user_and_orders() -> None:
    m = Mono()
    events = m.turn(f"I'm {ALEX.email}, where is {ALEX.pending_order_id}?", gen=[["It is ", "pending."]])
    assert [e.type for e in events] == ["reply.delta", "reply.delta", "done"]
    assert m.models.roles() == ["generator"]
    system = m.models.calls[0][1].messages[0].content
    assert f"order.{ALEX.pending_order_id}.status" in system and "user.orders" in system
    assert [c for c, _ in m.tools.calls] == ["find_user_id_by_email", "get_user_details", "get_order_details"]
    meta = m.store.turns["s"][-1].meta["dr"]
    assert meta["facts"]["authenticated_user_id"] == ALEX.user_id and meta["path"] == "answer"
    assert events[-1].pipeline == "monolithic" and m.pipeline.name == "monolithic"


def test_later_turns_reuse_the_session_facts_and_help_articles() -> None:
    m = Mono()
    m.turn(f"I'm {ALEX.email}", gen=["Hi."])
    m.turn("how do I return items?", gen=["Like this."])
    system = m.models.calls[-1][1].messages[0].content
    assert "KB-HOW-002" in system and "user.orders" in system
    assert m.tools.calls[-1][0] == "get_order_details"  # orders pre-fetched without a new lookup


def test_unauthenticated_sees_only_help() -> None:
    m = Mono()
    m.turn(f"what is the status of {ALEX.pending_order_id}?", gen=["Please verify."])
    system = m.models.calls[0][1].messages[0].content
    assert "user:" not in system and "order:" not in system and m.tools.calls == []


def test_pii_is_redacted_from_the_prompt_and_events() -> None:
    m = Mono()
    m.turn(f"I'm {ALEX.email}, phone +1 415-555-0134", gen=["Hi."])
    seen = json.dumps([[x.content for x in c.messages] for _, c in m.models.calls]) + m.sink.dump()
    for secret in (ALEX.email, "+1 415-555-0134", "1 Market Street"):
        assert secret not in seen


def test_routes_to_a_person_without_a_model() -> None:
    m = Mono()
    events = m.turn("let me speak to a human")
    assert [e.type for e in events] == ["escalation", "reply.delta", "done"] and m.models.calls == []


def test_it_never_writes() -> None:
    m = Mono()
    m.turn(f"I'm {ALEX.email}", gen=["Hi."])
    m.turn(f"cancel {ALEX.pending_order_id}", gen=["Your order has been cancelled."])
    m.turn("yes", gen=["Done."])
    assert m.world.orders[ALEX.pending_order_id].status == "pending"
