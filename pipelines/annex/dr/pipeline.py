"""The Dynamic Response turn: pre-guard -> orchestrator -> forward contract -> guarded generator.

::

    ctx.history --load_facts--> SessionFacts (auth, observed ids, pending action)
    Guardrails.pre        limits (typed errors), injection, safety / human routes, PII vault
    Orchestrator.run      routes, bounded ReAct loop, action-card validation   -> Outcome
    build_forward         the forward contract (emitted as "contract.forward")
    deliver               escalate: EscalationEvent + fixed handoff text
                          clarify:  guarded question -> ClarifyEvent + ReplyDelta
                          action_card: ActionCardEvent (validated card only) + guarded reply
                          answer / fallback: guarded reply (fallback: conservative wording)
    closure               the delivered text's return contract is checked against the forward one
    ctx.meta["dr"]        {"facts", "path", "card_id", "fallback", "escalation", "rules_version", ...}

Every emitted event passes through the session vault's redaction and the
masking of personal fields (names, address lines, city, zip, card digits), so
PII never reaches the event log; every model message is redacted as well.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pipelines.annex.dr.inputs import OrchestratorInput, OrchestratorSettings
from pipelines.core.contract import build_return, check_closure
from pipelines.core.fallback import fallback
from pipelines.core.outcome import Outcome
from pipelines.core.ports import Guardrails, ToolRunner
from pipelines.counters import Counters
from pipelines.errors import UpstreamError
from pipelines.events import ActionCardEvent, ClarifyEvent, EscalationEvent, ReplyDelta
from pipelines.gate import SentenceGate
from pipelines.guardrails import LocalGuardrails, default_guardrail_config
from pipelines.guardrails.ids import normalize_text
from pipelines.guardrails.pii import Vault, mask_pii_fields
from pipelines.protocols import ModelClient
from pipelines.semconv import SpanKind
from pipelines.spans import guard_span
from pipelines.telemetry import annotate, stage_span
from pipelines.turn import TurnContext

from .assemble import build_forward
from .generator import generate_reply, release_gate
from .orchestrator import Orchestrator
from .prompts import scan_prompt_data
from .state import META_KEY, load_facts

__all__ = ["DRSettings", "DRPipeline"]


@dataclass(frozen=True)
class DRSettings:
    """Settings of the DR turn (the texts are locale data for ``en``)."""

    orchestrator: OrchestratorSettings = field(default_factory=OrchestratorSettings)
    max_reply_tokens: int = 160
    temperature: float = 0.0
    seed: int = 0
    max_sentences: int = 3
    history_turns: int = 2
    # The texts (locale data) default to the domain's (DomainTexts): "" means "the domain's".
    fallback_reply: str = ""
    handoff_message: str = ""
    clarify_choose: str = ""
    clarify_default: str = ""


def _with_domain_texts(s: DRSettings, domain: Any) -> DRSettings:
    """``s`` with every empty text taken from the domain's texts."""
    import dataclasses

    t = domain.texts
    defaults = {"fallback_reply": t.fallback, "handoff_message": t.handoff,
                "clarify_default": t.question("details")}
    return dataclasses.replace(s, **{k: v for k, v in defaults.items() if not getattr(s, k)})


class DRPipeline:
    """The ``dr`` pipeline (see module docstring)."""

    name = "dr"

    def __init__(
        self,
        domain: Any,
        models: ModelClient,
        tools: ToolRunner,
        guardrails: Guardrails | None = None,
        *,
        settings: DRSettings | None = None,
        counters: Counters | None = None,
    ) -> None:
        self.domain = domain
        self.models = models
        self.tools = tools
        self.guardrails: Guardrails = guardrails or LocalGuardrails()
        self.settings = _with_domain_texts(settings or DRSettings(), domain)
        self.counters = counters or Counters()
        self.orchestrator = Orchestrator(
            domain, models, tools, counters=self.counters, settings=self.settings.orchestrator
        )

    async def run(self, ctx: TurnContext) -> AsyncIterator[Any]:
        s = self.settings
        facts = load_facts(ctx.history)
        ctx.meta[META_KEY] = {"facts": facts.to_meta()}  # a turn that fails before _finish keeps the pending card
        pending, facts.pending_action = facts.pending_action, None
        t0 = time.perf_counter()
        with stage_span("pre_guard", kind=SpanKind.GUARDRAIL, turn_id=ctx.turn_id) as span:
            pre = await self.guardrails.pre(ctx.request.text, [t.user_text for t in ctx.history])
            annotate(span, guard_stage="pre", guard_decision="block" if pre.blocked else "route" if pre.route else "pass",
                     guard_kinds=[h.kind for h in pre.hits] or None, output=pre.text, rules_version=pre.rules_version)
        annotate(input=pre.text)  # the turn span: the user's text as the event log has it (redacted)
        ctx.rules_version = pre.rules_version
        vault = Vault.from_entries(pre.vault)

        def emit(event: str, /, **fields: Any) -> None:
            ctx.sink.emit(event, turn_id=ctx.turn_id, **vault.redact_obj(mask_pii_fields(fields)))

        self.counters.guard("pre", "block" if pre.blocked else "route" if pre.route else "pass")
        for hit in pre.hits:
            if hit.action == "block":
                self.counters.blocked(hit.kind)
        emit("dr.pre_guard", **pre.summary())
        ctx.stage_ms["pre_guard"] = (time.perf_counter() - t0) * 1000
        facts.mention(pre.text)
        turns = ctx.history[-s.history_turns:] if s.history_turns else []
        replies = [vault.redact(normalize_text(t.reply_text)) for t in turns]
        inp = OrchestratorInput(
            session_id=ctx.session_id, turn_id=ctx.turn_id, user_text=pre.text, facts=facts, vault=vault,
            locale=ctx.request.locale, history=list(zip(pre.history[-len(turns):] if turns else [], replies, strict=True)),
            pending=pending, confirmation=pre.confirmation, route=pre.route, route_rule=pre.route_rule,
            blocked=pre.blocked, block_rules=[h.rule_id for h in pre.hits if h.action == "block"],
            user_texts=[*pre.history, pre.text],
        )
        t1 = time.perf_counter()
        with stage_span("orchestrate", role="orchestrator", turn_id=ctx.turn_id) as span:
            outcome = await self.orchestrator.run(inp, emit)
            fb = outcome.fallback
            annotate(span, path=outcome.path, card_id=outcome.card_id, escalation=outcome.escalation_reason,
                     steps=outcome.steps, fallback_trigger=fb.trigger if fb else None, fallback_class=fb.cls if fb else None)
        ctx.stage_ms["orchestrate"] = (time.perf_counter() - t1) * 1000
        if outcome.executed is not None:  # the confirmed write ran: record it before the reply is generated
            ctx.mark_side_effect(outcome.executed.card_id)
            ctx.meta[META_KEY] = {"facts": facts.to_meta(), "path": outcome.path,
                                  "executed": outcome.executed.card_id}
            await ctx.checkpoint()
        forward = build_forward(inp, outcome, search_help=getattr(self.domain, "search_help", None))
        emit("contract.forward", contract=forward.model_dump(mode="json"))
        self._scan_data(forward, emit)
        view = forward.guard_view()
        gate = release_gate(self.guardrails, view, self.counters, emit, fail_closed=s.fallback_reply)
        t2 = time.perf_counter()
        card_sent: str | None = None
        with stage_span("generate", role="generator", turn_id=ctx.turn_id):
            if outcome.path == "escalate":
                reason = outcome.escalation_reason or "out_of_scope"
                yield EscalationEvent(reason_code=reason, message=s.handoff_message)
                gate.add_trusted(s.handoff_message)
                yield ReplyDelta(text=s.handoff_message)
            elif outcome.path == "clarify":
                question = await self._question(gate, view, outcome)
                yield ClarifyEvent(question=vault.restore(question), options=list(outcome.clarify_options))
                yield ReplyDelta(text=vault.restore(question))
            else:
                if outcome.path == "action_card":
                    card = self._validated_card(outcome, forward.action_ids())
                    card_sent = card.card_id
                    yield card.model_copy(update={"params": vault.resolve(card.params)})
                async for piece in self._reply(ctx, forward, gate, vault, outcome, emit):
                    yield piece
        ctx.stage_ms["generate"] = (time.perf_counter() - t2) * 1000
        self._finish(ctx, forward, gate, outcome, facts, vault, card_sent, pre.rules_version, emit)

    def _scan_data(self, forward: Any, emit: Any) -> None:
        """Count and log injection-rule hits in the turn's world and tool text (it reaches prompts as data)."""
        config = getattr(self.guardrails, "config", None) or default_guardrail_config()
        hits = scan_prompt_data(forward, config)
        for _, hit in hits:
            self.counters.blocked(f"data_{hit.kind}")
        if hits:
            self.counters.guard("data", "flag")
            emit("dr.data_scan", decision="flag", hits=[{"source": s, "rule_id": h.rule_id, "view": h.view}
                                                        for s, h in hits])

    def _validated_card(self, outcome: Outcome, selected: set[str]) -> ActionCardEvent:
        """The one way an action card reaches the client: selected, validated, pending."""
        if outcome.card_id is None or outcome.card_id not in selected:
            raise AssertionError("an action card must be selected by the orchestrator and validated")
        return ActionCardEvent(card_id=outcome.card_id, title=outcome.card_title or outcome.card_id,
                               params=dict(outcome.card_params))

    async def _question(self, gate: SentenceGate, view: Any, outcome: Outcome) -> str:
        s = self.settings
        default = s.clarify_default
        if outcome.clarify_options:
            default = s.clarify_choose or self.domain.texts.question("choose", options=", ".join(outcome.clarify_options))
        if outcome.clarify_question:
            with guard_span("post", text=outcome.clarify_question, source="clarify") as g:
                verdict = await self.guardrails.post(outcome.clarify_question, view)
                g.decision("block" if verdict.violations else "pass", kinds=[v.kind for v in verdict.violations])
            if verdict.violations:
                for v in verdict.violations:
                    self.counters.blocked(v.kind)
                self.counters.guard("post", "block")
                gate.emit("dr.guard", stage="post", decision="block", source="clarify",
                          kinds=[v.kind for v in verdict.violations], sentence=verdict.text)
            else:
                self.counters.guard("post", "pass")
                gate.add_trusted(verdict.text)
                return verdict.text
        gate.add_trusted(default)
        return default

    async def _reply(self, ctx: TurnContext, forward: Any, gate: SentenceGate, vault: Vault,
                     outcome: Outcome, emit: Any) -> AsyncIterator[ReplyDelta]:
        s = self.settings
        first = True
        try:
            async for sentence in generate_reply(
                self.models, forward, gate, vault, max_tokens=s.max_reply_tokens,
                temperature=s.temperature, seed=s.seed, max_sentences=s.max_sentences,
            ):
                yield ReplyDelta(text=("" if first else " ") + vault.restore(sentence))
                first = False
        except (UpstreamError, TimeoutError) as exc:
            code = getattr(exc, "code", "model_timeout")
            fb = fallback("model_timeout" if code == "model_timeout" or isinstance(exc, TimeoutError) else "model_error",
                          f"generator: {code}")
            self.counters.fallback(fb.trigger, fb.cls)
            emit("dr.fallback", trigger=fb.trigger, cls=fb.cls, detail=fb.detail)
            if outcome.fallback is None:
                outcome.fallback = fb
        if first:
            text = self._conservative_text(outcome)
            gate.add_trusted(text)
            yield ReplyDelta(text=vault.restore(text))

    def _conservative_text(self, outcome: Outcome) -> str:
        """The fixed reply when the generator gives none: never a denial of a write that ran."""
        if outcome.executed is None:
            if outcome.fallback is not None and outcome.fallback.trigger == "write_outcome_unknown":
                return self.domain.texts.templates.get("write_unknown") or self.settings.fallback_reply
            return self.settings.fallback_reply
        a, t = outcome.executed, self.domain.texts.templates
        done = t.get("executed" if a.params.get("order_id") else "executed_account") or "Done."
        try:
            phrase = t.get(f"card:{a.card_id}", "").format(**a.params)
        except (KeyError, IndexError):
            phrase = ""
        return f"{done} I have carried out your request to {phrase or a.title.lower()}."

    def _finish(self, ctx: TurnContext, forward: Any, gate: SentenceGate, outcome: Outcome, facts: Any,
                vault: Vault, card_sent: str | None, rules_version: str, emit: Any) -> None:
        ret = build_return(gate.text, forward, card_id=card_sent, sentences=len(gate.released))
        trusted = {self.settings.handoff_message, self.settings.fallback_reply}
        if gate.text not in trusted:
            for v in check_closure(ret, forward):
                self.counters.delivered_violation(v.kind)
                emit("contract.closure_violation", violation=v.kind, detail=v.detail)
        emit("contract.return", contract=ret.model_dump(mode="json"), withheld=gate.withheld)
        facts.vault_ids = vault.ids()
        if outcome.fallback is not None:
            ctx.status = "fallback"
        fb = outcome.fallback
        annotate(path=outcome.path, card_id=card_sent, fallback_trigger=fb.trigger if fb else None,  # the turn span
                 fallback_class=fb.cls if fb else None)
        ctx.meta[META_KEY] = {
            "facts": facts.to_meta(),
            "path": outcome.path,
            "card_id": card_sent,
            "executed": outcome.executed.card_id if outcome.executed else None,
            "fallback": outcome.fallback.model_dump() if outcome.fallback else None,
            "escalation": outcome.escalation_reason,
            "withheld": gate.withheld,
            "steps": outcome.steps,
            "changed_order_ids": outcome.changed_order_ids,
            "changed_user_ids": outcome.changed_user_ids,
            "rules_version": rules_version,
        }
