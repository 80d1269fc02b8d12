"""The tandem turn's perception and decision: W1 with guarded narration, Φ's reads, W2's slots, then the
decision — Φ's ``then`` or the bounded orchestrator.

::

    W1          the labels (grammar-constrained) and the narration (through the narration gate, to
                the client at once); when the labels close, Φ(intent, sub-intent, snapshot) starts the
                read tools with grounded arguments
    W2 slots    started when the labels close (the pack asks for it), beside the narration
    decision    Φ's reads folded (a row with no ``then`` or ``propose`` whose reads changed the snapshot —
                the identity lookup, the order read, a product read — is followed by the row that hits
                now, at most four times: :func:`advance`), then: ``respond`` → answer; ``choose`` with several of the user's
                records and none named → which one?; ``clarify:<kind>`` → the pack's question (after
                Φ again with W2's candidates: fill at tool time); otherwise the orchestrator over the
                grounded offer (``propose``: one step that may only fill the intent's card)
                With the narration decoded beside the labels, the decision starts when the labels
                close and runs while the narration still streams.

:func:`perceive_and_decide` yields the narration events and leaves the decision in the state
(``outcome``, ``intent``, ``sub_intent``, ``c1``, and ``meta``'s ``c1`` / ``phi`` / ``narration``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic import ValidationError

from pipelines.core.domain import Domain
from pipelines.core.fallback import Stop
from pipelines.core.outcome import Outcome
from pipelines.core.perception import Perception, W1Config
from pipelines.errors import UpstreamError
from pipelines.gate import NarrationJudge, SentenceGate
from pipelines.guardrails.ids import normalize_text
from pipelines.protocols import ModelCall, ModelClient, StructuredOutput
from pipelines.sgc.phi import phi_lookup
from pipelines.sgc.snapshot import Snapshot
from pipelines.sgc.w1 import SubIntentParsed, ToolCall
from pipelines.sgc.w1_run import DispatchTools
from pipelines.telemetry import annotate, stage_span

from .asking import find_record, phi_again, vary_question
from .prompts import narration_messages, perception_messages, slot_messages
from .settings import TandemSettings
from .state import META_KEY, TandemState

__all__ = ["perceive_and_decide", "slot_call", "refill", "w1_config", "allowed_labels", "carried_request",
           "oracle_labels", "last_question"]


def w1_config(s: TandemSettings) -> W1Config:
    """How the tandem turn decodes W1: labels and a required narration, decoding stops when it closes."""
    return W1Config(tags=s.tags, max_tokens=s.perception_max_tokens, temperature=0.0, seed=s.seed,
                    priority=s.first_call_priority, narration_max_chars=s.narration_max_chars,
                    narration_required=True, opened=True, plan=False, segments=s.w1_segments,
                    parallel=s.w1_parallel_narration, lead_ms=s.w1_narration_lead_ms,
                    hold_words=s.narration_hold_words, degrade=True, skip_forced=s.w1_skip_forced_labels)


def carried_request(domain: Domain, history: Sequence[Any]) -> tuple[str, str] | None:
    """The change request a clarify of the last turn was asked for: ``(intent, sub_intent)`` or ``None``.

    A clarify (who are you? which order? which address?) interrupts a request; the user's answer
    carries no request of its own, so the request goes on after it. An intent that offers one of the
    pack's write cards is carried, and so is any question the pack's Φ interrupted with a clarify the pack
    lists in ``carried_clarifies`` (the support pack's identity check: "how many t-shirt options?" is
    answered once the user is verified); other questions carry nothing. Turns that fell back in between
    are skipped.
    """
    m = None
    for turn in reversed(history):  # a turn that fell back answered nothing: the request is still open
        m = turn.meta.get(META_KEY) if isinstance(turn.meta, dict) else None
        if not (isinstance(m, dict) and m.get("path") == "fallback"):
            break
    if not isinstance(m, dict) or m.get("path") != "clarify":
        return None
    c1 = m.get("c1") or {}
    intent, sub = c1.get("intent"), c1.get("sub_intent")
    phi = m.get("phi") or {}
    then = str(phi.get("then") or "")
    by_policy = (then.startswith("clarify:") and not phi.get("tools")
                 and then.split(":", 1)[1] in domain.carried_clarifies)
    if (intent not in domain.change_intents() and not by_policy) or intent not in domain.labels:
        return None
    return str(intent), str(sub) if sub in domain.labels[intent] else str(domain.labels[intent][0])


def last_question(history: Sequence[Any]) -> str | None:
    """The question the last recorded turn asked (its clarify), if it asked one."""
    m = history[-1].meta.get(META_KEY) if history and isinstance(history[-1].meta, dict) else None
    return str(m["question"]) if isinstance(m, dict) and m.get("path") == "clarify" and m.get("question") else None


def oracle_labels(domain: Domain, settings: TandemSettings, request: Any) -> tuple[str, str] | None:
    """The intent and sub-intent a request carries (``perception``), when the app takes them
    (``oracle_perception``) and the pack has them; ``None`` otherwise (the model perceives)."""
    given = getattr(request, "perception", None)
    if given is None or not settings.oracle_perception:
        return None
    subs = domain.labels.get(given.intent)
    if subs is None or given.sub_intent not in subs:
        return None
    return given.intent, given.sub_intent


def allowed_labels(domain: Domain, user_text: str, carried: tuple[str, str] | None = None,
                   question: str | None = None) -> dict[str, list[str]]:
    """The pack's labels, narrowed to the intents (and sub-intents) the request's explicit cues allow.

    A text that answers a clarify of a change request (``carried``) with no cue of its own, or with cues
    that include that request ("change it to the clicky one" answering which option of an exchange), is
    read as that request going on: the labels are narrowed to it. Cues of other requests only ("actually,
    return it instead") leave the request behind — but not the cues the question asked (``question``) fires
    itself: "my PayPal payment method" answering "which of your payment methods?" echoes the question.
    """
    prior = domain.intent_prior(user_text)
    if prior and carried is not None and question:
        echoed = set(domain.intent_prior(question) or ())
        prior = [i for i in prior if i not in echoed or i == carried[0]] or None
    labels = {i: list(subs) for i, subs in domain.labels.items()}
    if carried is not None and (not prior or carried[0] in prior):
        return {carried[0]: [carried[1]]}
    if prior:
        labels = {i: labels[i] for i in prior if i in labels}
    for intent, subs in labels.items():
        allowed = domain.sub_intent_prior(user_text, intent)
        if allowed:
            labels[intent] = [x for x in subs if x in allowed] or subs
    return labels


async def perceive_and_decide(st: TandemState, domain: Domain, models: ModelClient, settings: TandemSettings,
                              head: str) -> AsyncIterator[Any]:
    """W1, then the decision (see module docstring); yields the narration events."""
    s, d, facts = settings, domain, st.facts
    assert facts is not None and st.caller is not None and st.orch is not None and st.phi is not None
    caller, orch = st.caller, st.orch
    turns = st.ctx.history[-s.history_turns:] if s.history_turns else []
    history = [(st.vault.redact(normalize_text(t.user_text)), st.vault.redact(normalize_text(t.reply_text)))
               for t in turns]
    w1_messages = perception_messages(head, history, facts.user_text)
    judge = NarrationJudge(d.entity_names(facts), completion=d.texts.narration_completion)
    narration_gate = SentenceGate([judge], st.counters, st.emit, stage="narration", safe=d.texts.safe_ack)
    slots: dict[str, asyncio.Task[Any]] = {}

    def on_c1(ev: SubIntentParsed) -> None:
        if s.w2 and d.slot_schema() is not None and d.needs_slots(facts):
            slots["task"] = asyncio.create_task(slot_call(st, d, models, s))

    async def decide() -> None:
        """Φ's observations folded, then Φ's ``then`` or the orchestrator (after the labels close)."""
        try:
            for name, args, task in w1.out.tasks:
                caller.fold(name, args, await task, step=0)
            if "task" in slots:
                await slots["task"]
            phi = w1.out.phi
            st.intent, st.sub_intent = w1.out.intent, w1.out.sub_intent
            facts.intent, facts.sub_intent = st.intent, st.sub_intent
            annotate(phi_hit=bool(phi and phi.hit), decision=f"{st.intent}/{st.sub_intent}")
            st.c1 = {"intent": st.intent, "sub_intent": st.sub_intent}
            st.meta.update(c1=st.c1, w1_error=w1.out.error,
                           phi=None if phi is None else {"kind": phi.kind, "tools": [c.tool for c in phi.tools],
                                                         "then": phi.then, "table_version": phi.table_version})
            then = phi.then if phi is not None and phi.hit else None
            if then and then.startswith("clarify:") and not (phi.tools if phi else ()):
                then = None if await refill(st, d) else then
            elif phi is not None and phi.hit and phi.tools and then in (None, "propose"):
                for _ in range(4):  # bounded: identity lookup → payment methods → the order → its products
                    chained = await advance(st, d)
                    if chained is None:
                        break
                    then = chained.then
            settled = d.settle_intent(st.intent, st.sub_intent, facts)
            if (settled != (st.intent, st.sub_intent) and given is None
                    and settled[1] in labels.get(settled[0], ())):  # the words allowed both; the record decides
                st.emit("tandem.settle", intent=st.intent, sub_intent=st.sub_intent, settled=list(settled))
                st.intent, st.sub_intent = settled
                facts.intent, facts.sub_intent = settled
                st.c1 = {"intent": st.intent, "sub_intent": st.sub_intent}
                st.meta.update(c1=st.c1)
                again = await phi_again(st, d)
                then = again.then if again.hit else None
            with st.timed("orchestrate"), stage_span("orchestrate", turn_id=st.turn_id, role="orchestrator"):
                options: list[str] = []
                if then == "choose":  # none of the user's several records named: find it by what it holds
                    then, options = await find_record(st, d)
                if then == "respond":
                    st.outcome = Outcome(path="answer")
                elif len(options) > 1:  # a change that names none of the user's several records
                    st.outcome = orch.choose(options)
                elif then and then.startswith("clarify:"):
                    about = then.split(":", 1)[1]
                    st.outcome = Outcome(path="clarify", clarify_question=d.texts.question(about), clarify_about=about)
                else:
                    raw = w1.out.raw or s.tags.open("INTENT") + "other" + s.tags.close("INTENT")
                    st.outcome = await orch.run(w1_messages, raw, st.intent, st.sub_intent,
                                                propose=then == "propose")
            await vary_question(st, d)  # a question answered last turn is never asked again unchanged
        except Stop as stop:
            st.outcome = Outcome(path="fallback", fallback=stop.fallback)
            st.intent, st.sub_intent = w1.out.intent, w1.out.sub_intent
            st.c1 = {"intent": st.intent, "sub_intent": st.sub_intent}

    decision: list[asyncio.Task[None]] = []

    def on_labels() -> None:
        # W1's narration streams on beside the label calls: the decision need not wait for it.
        decision.append(asyncio.create_task(decide()))

    def dispatch(step: DispatchTools) -> None:  # Φ's reads start now, beside the narration
        for c in step.calls:
            task = asyncio.create_task(caller.raw(c.tool, dict(c.args), step=0))
            w1.out.tasks.append((c.tool, dict(c.args), task))

    carried = carried_request(d, st.ctx.history)
    if carried is not None:
        st.meta["carried"] = {"intent": carried[0], "sub_intent": carried[1]}
    labels = allowed_labels(d, facts.user_text, carried, last_question(st.ctx.history) if carried else None)
    given = oracle_labels(d, s, st.ctx.request)
    if given is not None:  # evaluation only: the request's own labels, the mechanisms after them measured apart
        labels = {given[0]: [given[1]]}
        st.meta["perception"] = {"source": "oracle", "intent": given[0], "sub_intent": given[1]}
        orch.change_given = given[0] in d.change_intents()
    w1 = Perception(models, w1_config(s), labels=labels,
                    tools=d.registry.names(),
                    phi=st.phi, snapshot=Snapshot.of(d.snapshot_values(facts)), counters=st.counters, emit=st.emit,
                    prefix="tandem", dispatch=dispatch, gate=narration_gate, safe_ack=d.texts.safe_ack,
                    narration=narration_messages, on_c1=on_c1, clock=st.clock,
                    on_labels=on_labels if s.w1_parallel_narration else None)
    try:
        with st.timed("w1"), stage_span("w1", turn_id=st.turn_id, role="orchestrator"):
            async for event in w1.stream(w1_messages, facts.user_text):
                yield event
        if w1.out.dispatch_ms is not None:
            st.ctx.stage_ms["dispatch_at"] = w1.out.dispatch_ms
        st.meta.update(narration=w1.out.narration)
        await (decision[0] if decision else decide())
    finally:
        for task in decision:
            if not task.done():
                task.cancel()
        w1.cancel()
        for task in slots.values():
            if not task.done():
                task.cancel()


async def slot_call(st: TandemState, domain: Domain, models: ModelClient, s: TandemSettings) -> None:
    """W2's slot call: its proposals are kept only when grounded in the user's own words."""
    assert st.facts is not None
    schema = domain.slot_schema() or {}
    call = ModelCall(messages=slot_messages(st.facts.user_text, list(schema.get("properties", {}))),
                     max_tokens=s.slot_max_tokens, temperature=0.0, seed=s.seed,
                     structured_output=StructuredOutput(kind="json", spec=schema))
    try:
        slots = json.loads("".join([c async for c in models.stream("slot_extractor", call)]))
    except (UpstreamError, ValueError, ValidationError) as exc:
        st.counters.w2("slots_invalid")
        st.emit("tandem.w2.slots", ok=False, error=getattr(exc, "code", type(exc).__name__))
        return
    found = domain.absorb_slots(slots if isinstance(slots, dict) else {}, st.facts)
    st.facts.candidates.add_all(found, "user")
    st.counters.w2("slots_ok")
    st.emit("tandem.w2.slots", ok=True, proposed=slots, grounded=found)


async def advance(st: TandemState, domain: Domain) -> Any:
    """Φ again after its own reads: a read that changed the snapshot (the identity lookup verified the
    user; the order read names the product of the item the user described) may make a later row of the
    same request hit now (read the order the user named before the identity question, then that item's
    product), so the turn goes on with the request instead of asking what the user needs.

    Runs only that row's reads not already run this turn; returns its outcome (``None``: nothing new)."""
    assert st.facts is not None and st.caller is not None and st.tables is not None
    snapshot = domain.snapshot_values(st.facts)
    outcome = phi_lookup((await st.tables).phi, st.intent, st.sub_intent, Snapshot.of(snapshot))
    done = {(r.tool, json.dumps(r.args, sort_keys=True)) for r in st.caller.records}
    calls = [c for c in outcome.tools
             if (c.tool, json.dumps(st.vault.redact_obj(dict(c.args)), sort_keys=True)) not in done]
    if not (outcome.hit and calls):
        return None
    st.counters.dispatch("phi_chain")
    st.emit("tandem.phi", intent=st.intent, sub_intent=st.sub_intent, outcome=outcome.kind, chained=True,
            tools=[c.tool for c in calls], calls=[c.model_dump() for c in calls], then=outcome.then,
            snapshot=snapshot, table_version=outcome.table_version)
    results = await asyncio.gather(*(st.caller.raw(c.tool, dict(c.args), step=0) for c in calls))
    for c, r in zip(calls, results, strict=True):
        st.caller.fold(c.tool, dict(c.args), r, step=0)
    return outcome


async def refill(st: TandemState, domain: Domain) -> bool:
    """Φ again after W2 (fill at tool time): new candidates may now satisfy a lookup row."""
    assert st.facts is not None and st.caller is not None and st.tables is not None
    snapshot = domain.snapshot_values(st.facts)
    outcome = phi_lookup((await st.tables).phi, st.intent, st.sub_intent, Snapshot.of(snapshot))
    if not (outcome.hit and outcome.tools):
        return False
    st.counters.dispatch("phi_fill")
    st.emit("tandem.phi", intent=st.intent, sub_intent=st.sub_intent, outcome=outcome.kind, fill=True,
            tools=[c.tool for c in outcome.tools], calls=[c.model_dump() for c in outcome.tools], then=outcome.then,
            snapshot=snapshot, table_version=outcome.table_version)
    calls: list[ToolCall] = list(outcome.tools)
    results = await asyncio.gather(*(st.caller.raw(c.tool, dict(c.args), step=0) for c in calls))
    for c, r in zip(calls, results, strict=True):
        st.caller.fold(c.tool, dict(c.args), r, step=0)
    return True
