"""The ``tandem`` turn of DESIGN.md: perception, grounding and orchestration composed, on any domain.

::

    PreGuard          limits, injection, safety / human routes, confirmation, PII vault
    candidates        the domain's extractors over every user text of the session + the owner's
                      records (session facts) + the domain's vocabularies
    routes            human / safety → escalate; blocked → fallback; a pending card + "yes" →
                      the confirmed write (once; checkpointed before the reply); + "no" → declined
    W1  (orchestrator role, streaming)
                      narration → narration gate → client at once; at </SUB_INTENT> Φ dispatches
                      the read tools with grounded arguments; the slot call (W2) starts beside it;
                      with the narration decoded beside the labels, the decision starts when the
                      labels close and runs while the narration still streams
    decision          Φ's ``then`` (respond / clarify; choose: several of the user's orders and none
                      named → which one?) or the bounded orchestrator over the grounded offer,
                      starting with Φ's observations in its context
    kernels           W2: the domain's conflicts → Ψ → paragraph plan (c2); W3: guidance pick with
                      the session seed and ``answer.meta`` write-back (c3)
    contract          one forward contract (c1, c2, c3), emitted as ``contract.forward``
    reply             templates for paths with nothing to word; otherwise the pack's lead sentence
                      (the fact that answers, from the observations) and the generator after it,
                      given as its prefix (``continue_after_lead``; off: the pack's lines alone),
                      through the sentence gate (post-guard, echo/repetition; an echo of its prompt
                      ends the generation), the template when nothing passes
    closure           the delivered text is checked against the contract; violations counted (stay 0)
    writeback         ``meta["tandem"]`` (session facts, decision, Φ, steps), ``meta["w3"]``

Events: ``tandem.*`` per stage, ``contract.forward`` / ``contract.return``; every field redacted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic import ValidationError

from pipelines.core.contract import build_return, check_closure
from pipelines.core.decisions import record_orders
from pipelines.core.fallback import Stop, fallback
from pipelines.core.kernels import prior_metas
from pipelines.core.outcome import Outcome
from pipelines.core.ports import Guardrails, ToolRunner
from pipelines.core.tools import ToolCaller
from pipelines.counters import Counters
from pipelines.domain import TurnFacts
from pipelines.errors import UpstreamError
from pipelines.events import ActionCardEvent, ClarifyEvent, EscalationEvent, ReplyDelta
from pipelines.gate import EchoJudge, GuardrailsJudge, NarrationJudge, SentenceGate
from pipelines.guardrails.ids import normalize_text
from pipelines.guardrails.pii import Vault
from pipelines.guardrails.post import SentenceSplitter
from pipelines.protocols import ModelCall, ModelClient, StructuredOutput
from pipelines.sgc.canonical import session_seed
from pipelines.sgc.w1 import ToolCall
from pipelines.spans import guard_span
from pipelines.tandem.orchestrate import Orchestrator
from pipelines.telemetry import annotate, stage_span
from pipelines.turn import TurnContext

from .perception import Perception
from .prompts import generator_messages, orchestrator_head, perception_messages, slot_messages
from .reply import build_contract, generator_facts, instruction, template_reply
from .settings import TandemSettings

__all__ = ["TandemPipeline", "META_KEY"]

META_KEY = "tandem"
_INTERNAL_TERMS = ("authenticated_user_id", "awaiting_confirmation", "action_executed", "selected_path",
                   "task_state", "eligible_actions", "forward contract", "explicit yes",
                   # the generator narrating its own prompt instead of answering: the reply speaks to
                   # the user, never about "the user", "the task", "the contract" or "the facts"
                   "the user", "the task", "the contract", "the facts")


def _quiet(task: asyncio.Future[Any]) -> asyncio.Future[Any]:
    """``task``, its failure read once done (it is raised where the turn awaits it, or the turn ended first)."""
    task.add_done_callback(lambda f: f.cancelled() or f.exception())
    return task


class TandemPipeline:
    """The composed turn (see module docstring); ``history_turns`` is what the runner should load."""

    name = "tandem"

    def __init__(self, domain: Any, models: ModelClient, tools: ToolRunner, guardrails: Guardrails, kernels: Any,
                 *, settings: TandemSettings | None = None, counters: Counters | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.domain, self.models, self.tools, self.guardrails, self.kernels = domain, models, tools, guardrails, kernels
        self.settings = settings or TandemSettings()
        self.counters = counters or Counters()
        self.clock = clock
        self.history_turns = self.settings.max_history_turns
        self.head = orchestrator_head(domain, self.settings.tags)
        self._tables: Any = None

    async def _w1_tables(self) -> Any:
        version = await self.kernels.tables_version()
        if self._tables is None or self._tables.version != version:
            from pipelines.core.ports import W1Tables

            raw = await self.kernels.w1_tables()
            self._tables = raw if isinstance(raw, W1Tables) else W1Tables.model_validate(raw)
        return self._tables

    @staticmethod
    def _previous(ctx: TurnContext) -> tuple[dict[str, Any], int]:
        for t in reversed(ctx.history):
            m = t.meta.get(META_KEY)
            if isinstance(m, dict) and isinstance(m.get("state"), dict):
                return dict(m["state"]), int(m.get("turn_index", len(ctx.history) - 1)) + 1
        return {}, len(ctx.history)

    # -- the turn ----------------------------------------------------------------------------

    async def run(self, ctx: TurnContext) -> AsyncIterator[Any]:
        d = self.domain
        state, turn_index = self._previous(ctx)
        t0 = self.clock()
        # The rule tables' version check runs beside the pre-guard and the narration: only the labels (and
        # Φ on their close) need the tables, so the hop is never on the way to the first narration token.
        tables_task = asyncio.create_task(self._w1_tables())
        try:
            with guard_span("pre", turn_id=ctx.turn_id) as guard:
                pre = await self.guardrails.pre(ctx.request.text, [t.user_text for t in ctx.history])
                guard.decision("block" if pre.blocked else "route" if pre.route else "pass",
                               kinds=[h.rule_id for h in pre.hits], output=pre.text)
        except BaseException:
            tables_task.cancel()
            raise
        vault = Vault.from_entries(pre.vault)

        def emit(kind: str, /, **fields: Any) -> None:
            ctx.sink.emit(kind, turn_id=ctx.turn_id, pipeline=self.name, **vault.redact_obj(fields))

        self.counters.guard("pre", "block" if pre.blocked else "route" if pre.route else "pass")
        for hit in pre.hits:
            if hit.action == "block":
                self.counters.blocked(hit.kind)
        emit("tandem.pre_guard", **pre.summary())
        ctx.stage_ms["pre_guard"] = (self.clock() - t0) * 1000
        ctx.rules_version = pre.rules_version
        meta: dict[str, Any] = {"turn_index": turn_index, "rules_version": ctx.rules_version, "domain": d.name}
        _quiet(tables_task)
        phi = _quiet(asyncio.ensure_future(self._phi(tables_task)))  # what W1's labels wait for
        try:
            async for event in self._turn(ctx, pre, vault, emit, state, meta, t0, tables_task, phi):
                yield event
        finally:
            for task in (phi, tables_task):
                if not task.done():
                    task.cancel()

    @staticmethod
    async def _phi(tables: asyncio.Future[Any]) -> Any:
        return (await tables).phi

    @staticmethod
    async def _versioned(ctx: TurnContext, pre: Any, tables: asyncio.Future[Any], meta: dict[str, Any]) -> None:
        """Wait for the W1 tables; the turn's rules version then names both tables."""
        ctx.rules_version = meta["rules_version"] = f"{pre.rules_version}+{(await tables).version}"

    async def _turn(self, ctx: TurnContext, pre: Any, vault: Vault, emit: Callable[..., None],
                    state: dict[str, Any], meta: dict[str, Any], t0: float, tables: asyncio.Future[Any],
                    phi: asyncio.Future[Any]) -> AsyncIterator[Any]:
        s, d = self.settings, self.domain
        turn_index = meta["turn_index"]
        facts = TurnFacts(session_id=ctx.session_id, user_text=pre.text, user_texts=[*pre.history, pre.text],
                          user_id=ctx.request.user_id, state=state)
        for text in facts.user_texts:
            facts.candidates.add_all(d.extract_candidates(text), "user")
        facts.candidates.add_all(d.fixed_candidates(), "record")
        d.restore(facts)
        await d.prepare(facts, self.tools)
        ctx.stage_ms["prepare"] = (self.clock() - t0) * 1000 - ctx.stage_ms["pre_guard"]
        pending = facts.state.get("pending")
        ctx.meta[META_KEY] = meta
        if pre.route is not None or pre.blocked or (pending and pre.confirmation in ("affirmative", "negative")):
            await self._versioned(ctx, pre, tables, meta)  # decided without W1: known before anything is recorded
        caller = ToolCaller(d, self.tools, facts, vault, locale=ctx.request.locale, timeout_s=s.tool_timeout_s,
                            counters=self.counters, emit=emit)
        orch = Orchestrator(d, self.models, s, facts=facts, caller=caller, vault=vault, counters=self.counters,
                            emit=emit, turn_id=ctx.turn_id)
        intent, sub_intent = "", ""
        c1: dict[str, Any] | None = None
        outcome: Outcome
        try:
            if pre.route is not None:
                emit("tandem.route", route="escalate", reason_code=pre.route, rule=pre.route_rule)
                facts.state = {**facts.state, "pending": None}
                outcome = await orch.escalate(pre.route)
            elif pre.blocked:
                rules = ",".join(h.rule_id for h in pre.hits if h.action == "block")
                emit("tandem.route", route="fallback", reason_code="guardrail_block", rule=rules)
                outcome = Outcome(path="fallback", fallback=fallback("guardrail_block", rules))
            elif pending and pre.confirmation == "affirmative":
                emit("tandem.route", route="execute_pending", reason_code="confirmed", rule=pending["card_id"])
                facts.state = {**facts.state, "pending": None}
                outcome = await orch.execute_pending(pending)
                if outcome.executed is not None:
                    ctx.mark_side_effect(f"{pending['card_id']}:{pending.get('turn_id', '')}")
                    ctx.meta[META_KEY] = {**meta, "state": facts.state, "executed": pending["card_id"]}
                    await ctx.checkpoint()
            elif pending and pre.confirmation == "negative":
                emit("tandem.route", route="decline_pending", reason_code="declined", rule=pending["card_id"])
                facts.state = {**facts.state, "pending": None}
                outcome = Outcome(path="answer")
                intent, sub_intent = "declined", "pending"
            else:
                if pending:
                    emit("tandem.route", route="drop_pending", reason_code="not_confirmed", rule=pending["card_id"])
                    facts.state = {**facts.state, "pending": None}
                outcome = None  # type: ignore[assignment]
        except Stop as stop:
            outcome = Outcome(path="fallback", fallback=stop.fallback)
        if outcome is None:
            async for event in self._perceive_and_decide(ctx, facts, tables, phi, caller, orch, vault, emit,
                                                         meta):
                if isinstance(event, tuple):
                    outcome, intent, sub_intent, c1 = event
                else:
                    yield event
        await self._versioned(ctx, pre, tables, meta)  # W1's labels awaited the tables, unless they failed first
        async for event in self._respond(ctx, facts, outcome, intent, sub_intent, c1, vault, emit, meta,
                                         turn_index):
            yield event

    async def _perceive_and_decide(self, ctx: TurnContext, facts: TurnFacts, tables: Any, phi: Any,
                                   caller: ToolCaller,
                                   orch: Orchestrator, vault: Vault, emit: Callable[..., None],
                                   meta: dict[str, Any]) -> AsyncIterator[Any]:
        s, d = self.settings, self.domain
        history = [(t.user_text, t.reply_text) for t in ctx.history[-s.history_turns:]] if s.history_turns else []
        history = [(vault.redact(normalize_text(u)), vault.redact(normalize_text(r))) for u, r in history]
        w1_messages = perception_messages(self.head, history, facts.user_text)
        judge = NarrationJudge(d.entity_names(facts), completion=d.texts.narration_completion)
        narration_gate = SentenceGate([judge], self.counters, emit, stage="narration", safe=d.texts.safe_ack)
        slots: dict[str, asyncio.Task[Any]] = {}

        def on_c1(intent: str, sub_intent: str) -> None:
            if s.w2 and d.slot_schema() is not None and d.needs_slots(facts):
                slots["task"] = asyncio.create_task(self._slots(facts, emit))

        decision: list[asyncio.Task[Any]] = []

        async def decide() -> tuple[Outcome, str, str, dict[str, str]]:
            """Φ's observations folded, then Φ's ``then`` or the orchestrator (after the labels close)."""
            try:
                for name, args, task in w1.out.tasks:
                    caller.fold(name, args, await task, step=0)
                if "task" in slots:
                    await slots["task"]
                phi = w1.out.phi
                intent, sub_intent = w1.out.intent, w1.out.sub_intent
                annotate(phi_hit=bool(phi and phi.hit), decision=f"{intent}/{sub_intent}")
                c1 = {"intent": intent, "sub_intent": sub_intent}
                meta.update(c1=c1, w1_error=w1.out.error,
                            phi=None if phi is None else {"kind": phi.kind, "tools": [c.tool for c in phi.tools],
                                                          "then": phi.then, "table_version": phi.table_version})
                then = phi.then if phi is not None and phi.hit else None
                if then and then.startswith("clarify:") and not (phi.tools if phi else ()):
                    refill = await self._refill(facts, caller, tables, intent, sub_intent, emit)
                    then = None if refill else then
                t2 = self.clock()
                with stage_span("orchestrate", turn_id=ctx.turn_id, role="orchestrator"):
                    options = record_orders(facts) if then == "choose" else []
                    if then == "respond":
                        outcome = Outcome(path="answer")
                    elif len(options) > 1:  # a change that names none of the user's several entities
                        outcome = orch.choose(options)
                    elif then and then.startswith("clarify:"):
                        outcome = Outcome(path="clarify", clarify_question=d.texts.question(then.split(":", 1)[1]))
                    else:
                        raw = w1.out.raw or s.tags.open("INTENT") + "other" + s.tags.close("INTENT")
                        outcome = await orch.run(w1_messages, raw, intent, sub_intent, propose=then == "propose")
                ctx.stage_ms["orchestrate"] = (self.clock() - t2) * 1000
            except Stop as stop:
                outcome = Outcome(path="fallback", fallback=stop.fallback)
                c1 = {"intent": w1.out.intent, "sub_intent": w1.out.sub_intent}
                intent, sub_intent = w1.out.intent, w1.out.sub_intent
            return outcome, intent, sub_intent, c1

        def on_labels() -> None:
            # W1's narration streams on beside the label calls: the decision need not wait for it.
            decision.append(asyncio.create_task(decide()))

        w1 = Perception(d, self.models, phi, s, snapshot=d.snapshot_values(facts), caller=caller,
                        gate=narration_gate, counters=self.counters, emit=emit, on_c1=on_c1, clock=self.clock,
                        on_labels=on_labels if s.w1_parallel_narration else None)
        t1 = self.clock()
        try:
            with stage_span("w1", turn_id=ctx.turn_id, role="orchestrator"):
                async for event in w1.stream(w1_messages, facts.user_text):
                    yield event
            ctx.stage_ms["w1"] = (self.clock() - t1) * 1000
            if w1.out.dispatch_ms is not None:
                ctx.stage_ms["dispatch_at"] = w1.out.dispatch_ms
            meta.update(narration=w1.out.narration)
            result = await (decision[0] if decision else decide())
        finally:
            for task in decision:
                if not task.done():
                    task.cancel()
            w1.cancel()
            for task in slots.values():
                if not task.done():
                    task.cancel()
        yield result

    async def _slots(self, facts: TurnFacts, emit: Callable[..., None]) -> None:
        """W2's slot call: proposals kept only when grounded in the user's own words."""
        d, s = self.domain, self.settings
        schema = d.slot_schema()
        fields = list(schema.get("properties", {}))
        call = ModelCall(messages=slot_messages(facts.user_text, fields), max_tokens=s.slot_max_tokens,
                         temperature=0.0, seed=s.seed, structured_output=StructuredOutput(kind="json", spec=schema))
        try:
            text = "".join([c async for c in self.models.stream("slot_extractor", call)])
            import json

            slots = json.loads(text)
        except (UpstreamError, ValueError, ValidationError) as exc:
            self.counters.w2("slots_invalid")
            emit("tandem.w2.slots", ok=False, error=getattr(exc, "code", type(exc).__name__))
            return
        found = d.absorb_slots(slots if isinstance(slots, dict) else {}, facts)
        facts.candidates.add_all(found, "user")
        self.counters.w2("slots_ok")
        emit("tandem.w2.slots", ok=True, proposed=slots, grounded=found)

    async def _refill(self, facts: TurnFacts, caller: ToolCaller, tables: Any, intent: str, sub_intent: str,
                      emit: Callable[..., None]) -> bool:
        """Φ again after W2 (fill at tool time): new candidates may now satisfy a lookup row."""
        from pipelines.sgc.phi import phi_lookup
        from pipelines.sgc.snapshot import Snapshot

        snapshot = self.domain.snapshot_values(facts)
        outcome = phi_lookup((await tables).phi, intent, sub_intent, Snapshot.of(snapshot))
        if not (outcome.hit and outcome.tools):
            return False
        self.counters.dispatch("phi_fill")
        emit("tandem.phi", intent=intent, sub_intent=sub_intent, outcome=outcome.kind, fill=True,
             tools=[c.tool for c in outcome.tools], calls=[c.model_dump() for c in outcome.tools], then=outcome.then,
             snapshot=snapshot, table_version=outcome.table_version)
        calls: list[ToolCall] = list(outcome.tools)
        results = await asyncio.gather(*(caller.raw(c.tool, dict(c.args), step=0) for c in calls))
        for c, r in zip(calls, results, strict=True):
            caller.fold(c.tool, dict(c.args), r, step=0)
        return True

    # -- kernels, contract, reply --------------------------------------------------------------

    async def _kernels(self, ctx: TurnContext, facts: TurnFacts, outcome: Outcome, intent: str, sub_intent: str,
                       turn_index: int, meta: dict[str, Any], emit: Callable[..., None]
                       ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        s, d = self.settings, self.domain
        c2 = c3 = None
        if s.w2:
            try:
                raw = d.conflicts(facts)
                res = await self.kernels.paragraphs(raw, intent or "other", d.constraints(facts))
                c2 = {"conflicts": res["conflicts"], "plan": res["plan"]["paragraphs"],
                      "psi_fired": list(res["psi"]["fired"])}
                self.counters.w2("grounded")
                for c in res["conflicts"]:
                    self.counters.w2(f"conflicts.{c['tier']}")
            except Exception as exc:  # a kernel failure: no c2 this turn (the templates need none)
                self.counters.w2("ground_failed")
                emit("tandem.w2", ok=False, error=getattr(exc, "code", type(exc).__name__))
            else:
                emit("tandem.w2", ok=True, **c2)
        branch = d.branch_of_intent.get(intent)
        if s.w3 and branch and outcome.path in ("answer", "action_card"):
            inputs = {"c1": {"intent": intent, "sub_intent": sub_intent, "excluded_subjects": []},
                      "candidates": d.w3_candidates(facts), "turn_index": turn_index}
            try:
                pick, raw_meta = await self.kernels.schedule(
                    ctx.session_id, prior_metas(ctx, 20), inputs["c1"], inputs["candidates"], turn_index,
                    seed=session_seed(ctx.session_id))
            except Exception as exc:
                emit("tandem.w3", ok=False, error=getattr(exc, "code", type(exc).__name__))
                return c2, None
            ctx.meta["w3"] = raw_meta
            meta["w3_inputs"] = inputs
            self.counters.w3(f"issued.{branch}" if pick is not None else "none")
            c3 = {"guidance_type": raw_meta.get("guidance_type", branch), "subject_id": pick,
                  "text": d.texts.guidance.get(pick or "", "")}
            emit("tandem.w3", ok=True, pick=pick, meta=raw_meta, rules_version=ctx.rules_version)
        return c2, c3

    async def _respond(self, ctx: TurnContext, facts: TurnFacts, outcome: Outcome, intent: str, sub_intent: str,
                       c1: dict[str, Any] | None, vault: Vault, emit: Callable[..., None], meta: dict[str, Any],
                       turn_index: int) -> AsyncIterator[Any]:
        d = self.domain
        if outcome.fallback is not None:
            self.counters.fallback(outcome.fallback.trigger, outcome.fallback.cls)
            emit("tandem.fallback", trigger=outcome.fallback.trigger, cls=outcome.fallback.cls,
                 detail=outcome.fallback.detail)
            ctx.status = "fallback"
        self.counters.path(outcome.path)
        annotate(path=outcome.path, card_id=outcome.card_id,
                 fallback_trigger=outcome.fallback.trigger if outcome.fallback else None,
                 fallback_class=outcome.fallback.cls if outcome.fallback else None)
        c2, c3 = await self._kernels(ctx, facts, outcome, intent, sub_intent, turn_index, meta, emit)
        verified = bool(d.session_fields(facts).get("authenticated_user_id"))
        facts.user_id = d.session_fields(facts).get("authenticated_user_id") or facts.user_id
        contract = build_contract(d, facts, outcome, turn_id=ctx.turn_id, locale=ctx.request.locale, vault=vault,
                                  c1=c1, c2=c2, c3=c3, verified=verified)
        emit("contract.forward", contract=contract.model_dump(mode="json"))
        gate = SentenceGate([EchoJudge(_INTERNAL_TERMS), GuardrailsJudge(self.guardrails, contract.guard_view()),
                             *d.reply_judges(facts, contract)], self.counters, emit, stage="post", safe="",
                            replacements=False)
        card_sent: str | None = None
        t3 = self.clock()
        with stage_span("generate", role="generator", turn_id=ctx.turn_id):
            if outcome.path == "escalate":
                yield EscalationEvent(reason_code=outcome.escalation_reason or "out_of_scope", message=d.texts.handoff)
            elif outcome.path == "clarify":
                q = contract.clarify_question or d.texts.question("details")
                yield ClarifyEvent(question=vault.restore(q), options=list(outcome.clarify_options))
            elif outcome.path == "action_card" and outcome.card_id:
                card_sent = outcome.card_id
                yield ActionCardEvent(card_id=outcome.card_id, title=outcome.card_title or outcome.card_id,
                                      params=vault.resolve(dict(outcome.card_params)))
            sentences: list[str] = []
            if intent != "declined" and self._generates(outcome, facts, contract, intent, sub_intent):
                lead = d.lead_lines(facts, contract)[:self.settings.max_sentences]
                if lead and not self.settings.continue_after_lead:  # the lead answers: the pack's lines are the reply
                    lead = template_reply(d, facts, contract, outcome, intent=intent, sub_intent=sub_intent)
                for sentence in lead:  # the fact that answers, stated from the observations
                    gate.add_trusted(sentence)
                    yield ReplyDelta(text=("" if not sentences else " ") + vault.restore(sentence))
                    sentences.append(sentence)
                if not lead or self.settings.continue_after_lead:
                    async for sentence in self._generate(contract, gate, emit, lead=lead):
                        yield ReplyDelta(text=("" if not sentences else " ") + vault.restore(sentence))
                        sentences.append(sentence)
            if not sentences:
                sentences = ([d.texts.declined] if intent == "declined" else
                             template_reply(d, facts, contract, outcome, intent=intent, sub_intent=sub_intent))
                for i, sentence in enumerate(sentences):
                    gate.add_trusted(sentence)
                    yield ReplyDelta(text=("" if i == 0 else " ") + vault.restore(sentence))
            elif contract.c3 and contract.c3.get("text") and contract.c3["text"] not in sentences:
                gate.add_trusted(contract.c3["text"])
                yield ReplyDelta(text=" " + vault.restore(contract.c3["text"]))
        ctx.stage_ms["generate"] = (self.clock() - t3) * 1000
        ret = build_return(gate.text, contract, card_id=card_sent, sentences=len(gate.released))
        for v in check_closure(ret, contract):
            self.counters.delivered_violation(v.kind)
            emit("contract.closure_violation", violation=v.kind, detail=v.detail)
        emit("contract.return", contract=ret.model_dump(mode="json"), withheld=gate.withheld)
        meta.update(state=facts.state, path=outcome.path, card_id=card_sent,
                    executed=outcome.executed.card_id if outcome.executed else None,
                    fallback=outcome.fallback.model_dump() if outcome.fallback else None,
                    escalation=outcome.escalation_reason, steps=outcome.steps, withheld=gate.withheld,
                    refusals=list(facts.refusals), c2=c2, c3=c3)
        ctx.meta[META_KEY] = meta

    def _generates(self, outcome: Outcome, facts: TurnFacts, contract: Any, intent: str, sub_intent: str) -> bool:
        """The generator words answers that carry facts; every other path is a template."""
        if outcome.path != "answer" or outcome.executed is not None or facts.refusals:
            return False
        if f"{intent}/{sub_intent}" in self.domain.texts.templates:
            return False
        return bool(contract.sources or [k for k in contract.user_state if k != "authenticated_user_id"]
                    or outcome.selected_entity)

    async def _generate(self, contract: Any, gate: SentenceGate, emit: Callable[..., None],
                        lead: list[str] | None = None) -> AsyncIterator[str]:
        """The generator's sentences through ``gate``; with ``lead``, the reply's opening sentences are
        given as its prefix (continued, never decoded or repeated) and count toward ``max_sentences``."""
        s, d = self.settings, self.domain
        lead = list(lead or [])
        cap = s.max_sentences - len(lead)
        if cap <= 0:
            return
        call = ModelCall(messages=generator_messages(d.generator_persona, generator_facts(contract),
                                                     instruction(contract), locale=contract.locale,
                                                     max_sentences=s.max_sentences),
                         max_tokens=s.max_reply_tokens, temperature=s.temperature, seed=s.seed,
                         repetition_penalty=s.repetition_penalty, prefix=" ".join(lead))
        splitter = SentenceSplitter()
        released = 0
        try:
            async for delta in self.models.stream("generator", call):
                for sentence in splitter.feed(delta):
                    out = await gate.release(sentence)
                    if out:
                        released += 1
                        yield out
                    elif "contract_echo" in gate.last_blocked:
                        # The generator is narrating its prompt: what follows is off the rails too
                        # (nothing more of it is read; with nothing released the path's template answers).
                        emit("tandem.generator_stopped", reason="contract_echo", released=released)
                        return
                    if released >= cap:
                        return
            for sentence in splitter.flush():
                out = await gate.release(sentence)
                if out and released < cap:
                    released += 1
                    yield out
        except UpstreamError as exc:
            self.counters.fallback("model_error", "infra")
            emit("tandem.fallback", trigger="model_error", cls="infra", detail=f"generator: {exc.code}")
