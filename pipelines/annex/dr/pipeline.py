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

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pipelines.annex.dr.state import META_KEY, load_facts
from pipelines.annex.rungpack import RungPack
from pipelines.core.contract import ForwardContract
from pipelines.core.epilogue import close, forward, path_event
from pipelines.core.fallback import fallback
from pipelines.core.generate import guarded_sentences
from pipelines.core.outcome import Outcome
from pipelines.core.ports import Guardrails, ToolRunner
from pipelines.core.prologue import open_turn
from pipelines.core.state import TurnState
from pipelines.counters import Counters
from pipelines.errors import UpstreamError
from pipelines.events import ReplyDelta
from pipelines.gate import GuardrailsJudge, SentenceGate
from pipelines.guardrails import LocalGuardrails, default_guardrail_config
from pipelines.guardrails.ids import normalize_text
from pipelines.protocols import ModelCall, ModelClient
from pipelines.spans import guard_span
from pipelines.telemetry import annotate, stage_span
from pipelines.turn import TurnContext

from .assemble import build_forward
from .inputs import OrchestratorInput, OrchestratorSettings
from .orchestrator import Orchestrator
from .prompts import generator_messages, scan_prompt_data, scrub

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


def _with_domain_texts(s: DRSettings, domain: RungPack) -> DRSettings:
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
        domain: RungPack,
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
        st = await open_turn(ctx, self.guardrails, self.counters, pipeline=self.name, prefix="dr")
        pre, vault = st.pre, st.vault
        facts.mention(pre.text)
        turns = ctx.history[-s.history_turns:] if s.history_turns else []
        replies = [vault.redact(normalize_text(t.reply_text)) for t in turns]
        inp = OrchestratorInput(
            session_id=ctx.session_id, turn_id=ctx.turn_id, user_text=pre.text, facts=facts, vault=vault,
            locale=ctx.request.locale, history=list(zip(pre.history[-len(turns):] if turns else [], replies, strict=True)),
            pending=pending, confirmation=pre.confirmation, route=pre.route, route_rule=pre.route_rule,
            # this rung has no ask route: a pre-guard "ask" refuses here, as every blocking hit did before
            blocked=pre.blocked or pre.decision == "ask", block_rules=[h.rule_id for h in pre.hits if h.action == "block"],
            user_texts=[*pre.history, pre.text], fence=ctx.fence,
        )
        with st.timed("orchestrate"), stage_span("orchestrate", role="orchestrator", turn_id=ctx.turn_id) as span:
            outcome = await self.orchestrator.run(inp, st.emit)
            fb = outcome.fallback
            annotate(span, path=outcome.path, card_id=outcome.card_id, escalation=outcome.escalation_reason,
                     steps=outcome.steps, fallback_trigger=fb.trigger if fb else None, fallback_class=fb.cls if fb else None)
        st.outcome = outcome
        if outcome.executed is not None:  # the confirmed write ran: record it before the reply is generated
            ctx.mark_side_effect(outcome.executed.card_id)
            ctx.meta[META_KEY] = {"facts": facts.to_meta(), "path": outcome.path,
                                  "executed": outcome.executed.card_id}
            await ctx.checkpoint()
        contract = build_forward(inp, outcome, self.domain)
        forward(st, contract)
        self._scan_data(contract, st.emit)
        gate = SentenceGate([GuardrailsJudge(self.guardrails, contract.guard_view())], self.counters, st.emit,
                            stage="post", safe="", fail_closed=s.fallback_reply, event="dr.guard", source="generator")
        card_sent: str | None = None
        with st.timed("generate"), stage_span("generate", role="generator", turn_id=ctx.turn_id):
            question = await self._question(gate, contract.guard_view(), outcome) if outcome.path == "clarify" else ""
            event = path_event(st, outcome, handoff=s.handoff_message, question=question)
            if event is not None:
                yield event
            if outcome.path == "escalate":
                gate.add_trusted(s.handoff_message)
                yield ReplyDelta(text=s.handoff_message)
            elif outcome.path == "clarify":
                yield ReplyDelta(text=vault.restore(question))
            else:
                card_sent = outcome.card_id if outcome.path == "action_card" else None
                async for piece in self._reply(st, contract, gate, outcome):
                    yield piece
        self._finish(st, contract, gate, outcome, facts, card_sent)

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

    async def _reply(self, st: TurnState, contract: ForwardContract, gate: SentenceGate,
                     outcome: Outcome) -> AsyncIterator[ReplyDelta]:
        """The generator's reply through ``gate``; its failure falls back to the conservative text."""
        s, vault = self.settings, st.vault
        call = ModelCall(messages=scrub(generator_messages(contract, max_sentences=s.max_sentences), vault),
                         max_tokens=s.max_reply_tokens, temperature=s.temperature, seed=s.seed)
        first = True
        try:
            async for sentence in guarded_sentences(self.models, call, gate):
                yield ReplyDelta(text=("" if first else " ") + vault.restore(sentence))
                first = False
        except (UpstreamError, TimeoutError) as exc:
            code = getattr(exc, "code", "model_timeout")
            fb = fallback("model_timeout" if code == "model_timeout" or isinstance(exc, TimeoutError) else "model_error",
                          f"generator: {code}")
            self.counters.fallback(fb.trigger, fb.cls)
            st.emit("dr.fallback", trigger=fb.trigger, cls=fb.cls, detail=fb.detail)
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

    def _finish(self, st: TurnState, contract: ForwardContract, gate: SentenceGate, outcome: Outcome, facts: Any,
                card_sent: str | None) -> None:
        close(st, gate, contract, card_id=card_sent,
              trusted={self.settings.handoff_message, self.settings.fallback_reply})
        facts.vault_ids = st.vault.ids()
        if outcome.fallback is not None:
            st.ctx.status = "fallback"
        fb = outcome.fallback
        annotate(path=outcome.path, card_id=card_sent, fallback_trigger=fb.trigger if fb else None,  # the turn span
                 fallback_class=fb.cls if fb else None)
        st.ctx.meta[META_KEY] = {
            "facts": facts.to_meta(),
            "path": outcome.path,
            "card_id": card_sent,
            "executed": outcome.executed.card_id if outcome.executed else None,
            "fallback": outcome.fallback.model_dump() if outcome.fallback else None,
            "escalation": outcome.escalation_reason,
            "withheld": gate.withheld,
            "steps": outcome.steps,
            "changed": outcome.changed,
            "rules_version": st.pre.rules_version,
        }
