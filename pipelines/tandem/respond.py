"""The tandem turn's reply: the kernels' context blocks, the forward contract, and the text written from it.

::

    kernels     W2: the pack's conflicts → Ψ → paragraph plan (c2); W3: the guidance pick with the
                session seed, its ``answer.meta`` written back (c3) — a kernel failure leaves the block out
    contract    one forward contract (c1, c2, c3), logged as ``contract.forward``
    path event  escalation / clarify / the validated action card
    reply       templates for paths with nothing to word (a card's read-back, a confirmed change, a
                clarify, a greeting); otherwise the pack's lead sentence (the fact that answers, from the
                observations) and the generator after it, given as its prefix (``continue_after_lead``;
                off: the pack's lines alone), through the sentence gate (post-guard, echo / repetition, the
                pack's judges; an echo of its prompt ends the generation) — the template when nothing passes
    closure     the delivered text checked against the contract; ``meta`` written
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pipelines.core.domain import Domain
from pipelines.core.epilogue import close, forward, path_event, settle
from pipelines.core.generate import guarded_sentences
from pipelines.core.kernels import prior_metas
from pipelines.core.ports import Guardrails, RuleKernels
from pipelines.errors import UpstreamError
from pipelines.events import ReplyDelta
from pipelines.gate import EchoJudge, GuardrailsJudge, SentenceGate
from pipelines.protocols import ModelCall, ModelClient
from pipelines.sgc.canonical import session_seed
from pipelines.telemetry import stage_span

from .prompts import generator_messages
from .reply import build_contract, generator_facts, instruction, template_reply
from .settings import TandemSettings
from .state import META_KEY, TandemState

__all__ = ["respond", "kernel_blocks", "INTERNAL_TERMS"]

#: What a reply never says: the contract's internal fields, and the generator narrating its own prompt
#: instead of answering ("the user", "the task", "the contract", "the facts").
INTERNAL_TERMS = ("authenticated_user_id", "awaiting_confirmation", "action_executed", "selected_path",
                  "task_state", "eligible_actions", "forward contract", "explicit yes",
                  "the user", "the task", "the contract", "the facts")


async def kernel_blocks(st: TandemState, domain: Domain, kernels: RuleKernels, s: TandemSettings) -> None:
    """c2 (W2's conflicts and paragraph plan) and c3 (W3's guidance pick) of the turn, into the state."""
    assert st.facts is not None and st.outcome is not None
    d, facts, intent = domain, st.facts, st.intent
    if s.w2:
        try:
            res = await kernels.paragraphs(d.conflicts(facts), intent or "other", d.constraints(facts))
            st.c2 = {"conflicts": res["conflicts"], "plan": res["plan"]["paragraphs"],
                     "psi_fired": list(res["psi"]["fired"])}
            st.counters.w2("grounded")
            for c in res["conflicts"]:
                st.counters.w2(f"conflicts.{c['tier']}")
        except Exception as exc:  # a kernel failure: no c2 this turn (the templates need none)
            st.counters.w2("ground_failed")
            st.emit("tandem.w2", ok=False, error=getattr(exc, "code", type(exc).__name__))
        else:
            st.emit("tandem.w2", ok=True, **st.c2)
    branch = d.branch_of_intent.get(intent)
    if not (s.w3 and branch and st.outcome.path in ("answer", "action_card")):
        return
    inputs = {"c1": {"intent": intent, "sub_intent": st.sub_intent, "excluded_subjects": []},
              "candidates": d.w3_candidates(facts), "turn_index": st.turn_index}
    try:
        pick, raw_meta = await kernels.schedule(st.session_id, prior_metas(st.ctx, 20), inputs["c1"],
                                                inputs["candidates"], st.turn_index, seed=session_seed(st.session_id))
    except Exception as exc:
        st.emit("tandem.w3", ok=False, error=getattr(exc, "code", type(exc).__name__))
        return
    st.ctx.meta["w3"] = raw_meta
    st.meta["w3_inputs"] = inputs
    st.counters.w3(f"issued.{branch}" if pick is not None else "none")
    st.c3 = {"guidance_type": raw_meta.get("guidance_type", branch), "subject_id": pick,
             "text": d.texts.guidance.get(pick or "", "")}
    st.emit("tandem.w3", ok=True, pick=pick, meta=raw_meta, rules_version=st.ctx.rules_version)


async def respond(st: TandemState, domain: Domain, models: ModelClient, guardrails: Guardrails,
                  kernels: RuleKernels, s: TandemSettings) -> AsyncIterator[Any]:
    """The reply's events (see module docstring); writes the turn's ``meta``."""
    assert st.facts is not None and st.outcome is not None
    d, facts, outcome, vault = domain, st.facts, st.outcome, st.vault
    st.outcome = outcome
    settle(outcome, counters=st.counters, emit=st.emit, prefix="tandem")
    if outcome.fallback is not None:
        st.ctx.status = "fallback"
    await kernel_blocks(st, d, kernels, s)
    verified = bool(d.session_fields(facts).get("authenticated_user_id"))
    facts.user_id = d.session_fields(facts).get("authenticated_user_id") or facts.user_id
    contract = build_contract(d, facts, outcome, turn_id=st.turn_id, locale=st.ctx.request.locale, vault=vault,
                              c1=st.c1, c2=st.c2, c3=st.c3, verified=verified)
    forward(st, contract)
    gate = SentenceGate([EchoJudge(INTERNAL_TERMS), GuardrailsJudge(guardrails, contract.guard_view()),
                         *d.reply_judges(facts, contract)], st.counters, st.emit, stage="post", safe="",
                        replacements=False)
    card_sent: str | None = None
    with st.timed("generate"), stage_span("generate", role="generator", turn_id=st.turn_id):
        event = path_event(st, outcome, handoff=d.texts.handoff,
                           question=contract.clarify_question or d.texts.question("details"))
        if event is not None:
            card_sent = outcome.card_id if outcome.path == "action_card" else None
            yield event
        sentences: list[str] = []

        def says(sentence: str) -> ReplyDelta:
            sentences.append(sentence)
            return ReplyDelta(text=("" if len(sentences) == 1 else " ") + vault.restore(sentence))

        if st.intent != "declined" and _generates(st, d):
            lead = d.lead_lines(facts, contract)[:s.max_sentences]
            if lead and not s.continue_after_lead:  # the lead answers: the pack's lines are the reply
                lead = template_reply(d, facts, contract, outcome, intent=st.intent, sub_intent=st.sub_intent)
            for sentence in lead:  # the fact that answers, stated from the observations
                gate.add_trusted(sentence)
                yield says(sentence)
            if not lead or s.continue_after_lead:
                async for sentence in _generate(st, d, models, s, gate, lead):
                    yield says(sentence)
        if not sentences:
            declined = [d.texts.declined] + ([contract.clarify_question] if contract.clarify_question else [])
            for sentence in (declined if st.intent == "declined" else
                             template_reply(d, facts, contract, outcome, intent=st.intent, sub_intent=st.sub_intent)):
                gate.add_trusted(sentence)
                yield says(sentence)
        elif contract.c3 and contract.c3.get("text") and contract.c3["text"] not in sentences:
            gate.add_trusted(contract.c3["text"])
            yield says(contract.c3["text"])
    close(st, gate, contract, card_id=card_sent)
    st.meta.update(state=facts.state, path=outcome.path, card_id=card_sent, question=outcome.clarify_question,
                   executed=outcome.executed.card_id if outcome.executed else None,
                   fallback=outcome.fallback.model_dump() if outcome.fallback else None,
                   escalation=outcome.escalation_reason, steps=outcome.steps, withheld=gate.withheld,
                   refusals=list(facts.refusals), c2=st.c2, c3=st.c3)
    st.ctx.meta[META_KEY] = st.meta


def _generates(st: TandemState, domain: Domain) -> bool:
    """The generator words answers that carry facts; every other path is a template."""
    assert st.facts is not None and st.outcome is not None and st.contract is not None
    outcome, contract = st.outcome, st.contract
    if outcome.path != "answer" or outcome.executed is not None or st.facts.refusals:
        return False
    if f"{st.intent}/{st.sub_intent}" in domain.texts.templates:
        return False
    return bool(contract.sources or [k for k in contract.user_state if k != "authenticated_user_id"]
                or outcome.selected_entity)


async def _generate(st: TandemState, domain: Domain, models: ModelClient, s: TandemSettings, gate: SentenceGate,
                    lead: list[str]) -> AsyncIterator[str]:
    """The generator's sentences through ``gate``; the ``lead`` sentences are its prefix (continued, never
    decoded or repeated) and count toward ``max_sentences``."""
    assert st.contract is not None
    contract = st.contract
    call = ModelCall(messages=generator_messages(domain.generator_persona, generator_facts(contract), instruction(contract),
                                                 locale=contract.locale, max_sentences=s.max_sentences),
                     max_tokens=s.max_reply_tokens, temperature=s.temperature, seed=s.seed,
                     repetition_penalty=s.repetition_penalty, prefix=" ".join(lead))

    def echoed(g: SentenceGate) -> bool:
        # The generator is narrating its prompt: what follows is off the rails too (nothing more of it is
        # read; with nothing released the path's template answers).
        if "contract_echo" not in g.last_blocked:
            return False
        st.emit("tandem.generator_stopped", reason="contract_echo", released=len(g.released) - len(lead))
        return True

    try:
        async for sentence in guarded_sentences(models, call, gate, cap=s.max_sentences - len(lead), stop=echoed):
            yield sentence
    except UpstreamError as exc:
        st.counters.fallback("model_error", "infra")
        st.emit("tandem.fallback", trigger="model_error", cls="infra",
                detail=f"generator: {exc.code}")
