"""The bounded ReAct orchestrator: deterministic routes first, then at most ``max_steps`` model steps.

::

    route (pre-guard)  safety_sensitive / user_requested_human -> escalate (code, no model)
    blocked (pre-guard)                                         -> fallback guardrail_block
    pending action + explicit affirmative                       -> execute the write (confirmed)
    pending action + anything else                              -> dropped, then the loop
    loop: one "orchestrator" call per step (JSON schema of what is eligible now)
        tool call  -> mid-guard (eligible, args, placeholders, consistency) -> tool -> observation
        respond / clarify / select / escalate -> terminal
        action     -> card from the catalogue -> auth, observed order, ambiguity, precheck
                      eligible: card shown, pending action stored; ineligible: fallback
    step cap reached -> fallback step_cap

The loop is the core's (:func:`pipelines.core.loop.run_steps`); what is DR's own is its offer (the
eligible tools and cards, a free-text clarify question, decisions parsed by their shape so that the
mid-guard judges them), its prompt (fresh each step) and its checks. Every step, tool call, mid-guard
decision and the outcome are emitted as structured events (``dr.*``) carrying the raw model output
and the redacted observations, so :mod:`pipelines.annex.dr.replay` can re-run the decisions.
"""

from __future__ import annotations

import asyncio
from contextlib import nullcontext
from typing import Any

from pipelines.annex.dr.actions import ActionHandler
from pipelines.annex.dr.inputs import OrchestratorInput, OrchestratorSettings
from pipelines.annex.rungpack import RungPack
from pipelines.core.contract import ObservationRecord
from pipelines.core.decisions import Offer, clean_schema, decision_schema
from pipelines.core.epilogue import settle
from pipelines.core.fallback import Stop, fallback
from pipelines.core.loop import run_steps
from pipelines.core.outcome import Emit, Outcome
from pipelines.core.ports import ConfirmedCard, ToolCallResult, ToolRunner
from pipelines.counters import Counters
from pipelines.errors import ToolError, ToolTimeout, UnconfirmedWrite
from pipelines.grounding import CandidateSet, constrain_args
from pipelines.guardrails.ids import extract_ids
from pipelines.guardrails.mid import (
    check_args,
    check_consistency,
    check_placeholders,
    check_tool_choice,
)
from pipelines.guardrails.post import Violation
from pipelines.protocols import ModelCall, ModelClient, StructuredOutput
from pipelines.schema_bounds import bound_schema
from pipelines.spans import guard_decision, tool_span

from .prompts import orchestrator_messages, scrub

__all__ = ["Orchestrator", "Emit"]


def _orders(ids: Any) -> list[str]:
    """The order ids among ``ids`` (the shared id extractor decides what an order id is)."""
    return [i for i in ids if extract_ids(i).get("order")]

class Orchestrator:
    """Runs the decision part of a DR turn; the pipeline turns its :class:`Outcome` into a reply."""

    def __init__(
        self,
        domain: RungPack,
        models: ModelClient,
        tools: ToolRunner,
        *,
        counters: Counters,
        settings: OrchestratorSettings | None = None,
    ) -> None:
        self.domain = domain
        self.models = models
        self.tools = tools
        self.counters = counters
        self.settings = settings or OrchestratorSettings()
        self.open_tools = tuple(self.settings.open_tools if self.settings.open_tools is not None else domain.open_reads)
        self.private_reads = tuple(self.settings.private_reads if self.settings.private_reads is not None
                                   else domain.private_reads)
        self.actions = ActionHandler(self)

    # ---- plumbing --------------------------------------------------------------------

    def mid_block(self, emit: Emit, step: int, v: Violation) -> None:
        """Log and count one mid-guard refusal."""
        self.counters.guard("mid", "block")
        self.counters.blocked(v.kind)
        guard_decision("mid", "block", kinds=[v.kind], step=step)
        emit("dr.guard", stage="mid", step=step, decision="block", violation=v.kind, detail=v.detail)

    async def run_tool(
        self, inp: OrchestratorInput, emit: Emit, step: int, name: str, args: dict[str, Any], *,
        confirmed: bool = False, idempotency_key: str | None = None, card: ConfirmedCard | None = None,
    ) -> tuple[ToolCallResult, ObservationRecord]:
        """Resolve placeholders, run one tool, fold the result into the facts; raises :class:`Stop`
        (a write the tool port refuses unconfirmed: ``no_eligible_action``)."""
        session = inp.facts.tool_session(inp.session_id, confirmed=confirmed, locale=inp.locale,
                                         idempotency_key=idempotency_key,
                                         user_texts=[inp.vault.restore(t) for t in inp.user_texts],
                                         card=card, fence=inp.fence)
        timeout = self.settings.tool_timeout_s
        with tool_span(name, args, step=step, confirmed=confirmed) as span:  # args carry placeholders
            try:
                async with asyncio.timeout(timeout) if timeout else nullcontext():
                    result = await self.tools.call(name, inp.vault.resolve(args), session)
            except (ToolTimeout, TimeoutError) as exc:
                raise Stop(fallback("tool_timeout", name)) from exc
            except UnconfirmedWrite as exc:  # the port refused it before the pack ran: known, not lost
                self.counters.blocked("unconfirmed_write")
                raise Stop(fallback("no_eligible_action", f"{name}: {exc.details.get('reason', exc.code)}")) from exc
            except ToolError as exc:
                raise Stop(fallback("tool_error", f"{name}: {exc.code}")) from exc
            obs = result.observation
            red_result = inp.vault.redact_obj(obs.result) if obs.result is not None else None
            span.observation(red_result, ok=obs.ok, reason=result.reason)
        record = ObservationRecord(
            step=step, tool=name, args=inp.vault.redact_obj(dict(args)), ok=obs.ok,
            reason=result.reason, summary=self.domain.summarize(name, red_result) if obs.ok else "", result=red_result,
        )
        auth_refusal = inp.facts.observe(name, result, self.domain.lookup_tools, self.domain.authenticate)
        if auth_refusal is not None:
            record = record.model_copy(update={"ok": False, "reason": auth_refusal, "result": None, "summary": ""})
            self.mid_block(emit, step, Violation(kind="other_user", detail=auth_refusal))
        logged = result.model_copy(update={"observation": obs.model_copy(update={"args": record.args, "result": red_result})})
        emit("dr.tool", step=step, tool=name, args=record.args, confirmed=confirmed,
             result=logged.model_dump(mode="json"), authenticated_user_id=inp.facts.authenticated_user_id)
        return result, record

    # ---- eligibility -----------------------------------------------------------------

    def eligible_tools(self, inp: OrchestratorInput) -> dict[str, dict[str, Any]]:
        """Read tools offered now: open reads, lookups before login, private reads after.

        A lookup's arguments can only be what the user typed in this message (the domain's
        extractors, as enums: :func:`pipelines.grounding.constrain_args`); a lookup with
        nothing to look up is not offered.
        """
        names = list(self.open_tools)
        if inp.facts.authenticated_user_id:
            names += list(self.private_reads)
        else:
            names += sorted(self.domain.lookup_tools)
        tools = {n: self.domain.registry.get(n).args_schema() for n in names if n in self.domain.registry.tools}
        typed = CandidateSet()
        typed.add_all(self.domain.extract_candidates(inp.user_text), "user")
        for name in sorted(self.domain.lookup_tools & set(tools)):
            schema = constrain_args(clean_schema(tools[name]), self.domain.arg_kinds(name), typed)
            if schema is None:
                del tools[name]
            else:
                tools[name] = schema
        return tools

    def eligible_cards(self, inp: OrchestratorInput) -> list[Any]:
        """Write cards offered now: none before login; order cards only once an order was observed."""
        if not inp.facts.authenticated_user_id:
            return []
        has_order = bool(_orders(inp.facts.observed_ids))
        return [
            c for c in self.domain.cards
            if c.kind == "write" and (has_order or "order_id" not in c.required_params)
        ]

    def candidates(self, inp: OrchestratorInput) -> list[str]:
        """Entity ids the user may mean: the user's orders, else every observed order."""
        if inp.facts.user_order_ids:
            return list(inp.facts.user_order_ids)
        return sorted(_orders(inp.facts.observed_ids))

    # ---- the turn --------------------------------------------------------------------

    async def run(self, inp: OrchestratorInput, emit: Emit) -> Outcome:
        """Decide the turn's path; never raises for model, tool or guard failures (they fall back)."""
        emit("dr.start", user_text=inp.user_text, facts=inp.facts.to_meta(),
             pending=inp.pending.model_dump(mode="json") if inp.pending else None, confirmation=inp.confirmation,
             route=inp.route, route_rule=inp.route_rule, blocked=inp.blocked, block_rules=inp.block_rules,
             vault_ids=inp.vault.ids(), max_steps=self.settings.max_steps, seed=self.settings.seed,
             open_tools=list(self.open_tools), private_reads=list(self.private_reads),
             session_id=inp.session_id, locale=inp.locale)
        observations: list[ObservationRecord] = []
        try:
            outcome = await self._decide(inp, emit, observations)
        except Stop as stop:
            outcome = Outcome(path="fallback", fallback=stop.fallback)
        outcome.observations = observations
        settle(outcome, counters=self.counters, emit=emit, prefix="dr")
        if outcome.escalation_reason:
            self.counters.escalation(outcome.escalation_reason)
        emit("dr.outcome", **outcome.summary(), facts=inp.facts.to_meta())
        return outcome

    async def _decide(self, inp: OrchestratorInput, emit: Emit, observations: list[ObservationRecord]) -> Outcome:
        if inp.route is not None:
            emit("dr.route", route="escalate", reason_code=inp.route, rule=inp.route_rule)
            return await self.actions.escalate(inp, emit, inp.route, observations)
        if inp.blocked:
            emit("dr.route", route="fallback", reason_code="guardrail_block", rule=",".join(inp.block_rules))
            return Outcome(path="fallback", fallback=fallback("guardrail_block", ",".join(inp.block_rules)))
        if inp.pending is not None:
            if inp.confirmation == "affirmative":
                emit("dr.route", route="execute_pending", reason_code="confirmed", rule=inp.pending.card_id)
                return await self.actions.execute_pending(inp, emit, inp.pending, observations)
            emit("dr.route", route="drop_pending", reason_code="not_confirmed", rule=inp.pending.card_id)
        return await self._loop(inp, emit, observations)

    async def _loop(self, inp: OrchestratorInput, emit: Emit, observations: list[ObservationRecord]) -> Outcome:
        try:
            return await run_steps(_OpenSteps(self, inp, emit, observations), self.models,
                                   max_steps=self.settings.max_steps, timeout_s=self.settings.model_timeout_s, emit=emit)
        except Stop as stop:
            if stop.fallback.trigger != "step_cap":
                raise
            return Outcome(path="fallback", fallback=stop.fallback, steps=self.settings.max_steps)

    def offer(self, inp: OrchestratorInput) -> Offer:
        """What a step may decide: the eligible tools and cards (an entity the user may mean as an enum),
        a clarify question in the model's words, select, respond, escalate — parsed by shape (``open``)."""
        select_ids = self.candidates(inp)
        kind = self.domain.entity_kind
        cards: dict[str, tuple[Any, dict[str, Any]]] = {}
        for c in self.eligible_cards(inp):
            clean = clean_schema(self.domain.registry.get(c.tool).args_schema())
            props = {p: clean["properties"][p] for p in c.required_params}
            if kind in props and select_ids:
                props[kind] = {"enum": list(select_ids)}
            params = {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
            cards[c.id] = (c, bound_schema(params))
        tools = {n: bound_schema(clean_schema(t)) for n, t in self.eligible_tools(inp).items()}
        return Offer(tools=tools, cards=cards, select_ids=select_ids, clarify_free=True, open=True)

    async def _tool_step(self, inp: OrchestratorInput, emit: Emit, step: int, name: str, args: dict[str, Any],
                         tools: dict[str, Any], observations: list[ObservationRecord]) -> None:
        v = check_tool_choice(name, tools, self.domain.write_tools)
        if v is None:
            v = check_args(self.domain.registry, name, args)[1]
        v = v or check_placeholders(args, inp.vault)
        if v is not None:
            self.mid_block(emit, step, v)
            raise Stop(fallback("invalid_tool_call", f"{v.kind}: {v.detail}"))
        v = check_consistency(
            args, observed_ids=inp.facts.observed_ids, mentioned_ids=inp.facts.mentioned_ids,
            authenticated_user_id=inp.facts.authenticated_user_id,
        )
        if v is not None:
            self.mid_block(emit, step, v)
            raise Stop(fallback("inconsistent_observation", f"{v.kind}: {v.detail}"))
        self.counters.guard("mid", "pass")
        guard_decision("mid", "pass", step=step, tool=name)
        _, record = await self.run_tool(inp, emit, step, name, args)
        observations.append(record)

    async def _terminal(self, inp: OrchestratorInput, emit: Emit, step: int, d: dict[str, Any],
                        observations: list[ObservationRecord]) -> Outcome:
        kind = d["decision"]
        if kind == "respond":
            return Outcome(path="answer")
        if kind == "clarify":
            return Outcome(path="clarify", clarify_question=d["question"])
        if kind == "escalate":
            return await self.actions.escalate(inp, emit, d["reason_code"], observations)
        if kind == "select":
            return self.actions.select(inp, emit, step, d["entity_id"])
        return await self.actions.action(inp, emit, step, d["card_id"], d["params"])


class _OpenSteps:
    """The DR rung's parts of the one loop: its offer, a fresh prompt per step, its mid-guard."""

    prefix = "dr"

    def __init__(self, orch: Orchestrator, inp: OrchestratorInput, emit: Emit,
                 observations: list[ObservationRecord]) -> None:
        self.o, self.inp, self.emit, self.observations = orch, inp, emit, observations

    def offer(self, step: int) -> Offer:
        return self.o.offer(self.inp)

    def early(self, step: int, offer: Offer) -> Outcome | None:
        return None

    def call(self, step: int, offer: Offer) -> ModelCall:
        inp, s = self.inp, self.o.settings
        state = {"authenticated_user": inp.facts.authenticated_user_id or "no"}
        if offer.select_ids:
            state["orders"] = ",".join(offer.select_ids)
        messages = orchestrator_messages(
            policy=self.o.domain.orchestrator_policy, tools=self.o.eligible_tools(inp),
            cards=[(cid, card.required_params) for cid, (card, _) in offer.cards.items()], history=inp.history,
            user_text=inp.user_text, state=state, observations=self.observations,
        )
        return ModelCall(messages=scrub(messages, inp.vault), max_tokens=s.max_tokens, temperature=0.0, seed=s.seed,
                         structured_output=StructuredOutput(kind="json", spec=decision_schema(offer)))

    def reject(self, step: int, kind: str, detail: str) -> None:
        self.o.mid_block(self.emit, step, Violation(kind=kind, detail=detail))

    def decided(self, step: int, raw: str) -> None:
        return None

    async def read(self, step: int, decision: dict[str, Any]) -> Outcome | None:
        await self.o._tool_step(self.inp, self.emit, step, decision["decision"], decision["args"],
                                self.o.eligible_tools(self.inp), self.observations)
        return None

    async def terminal(self, step: int, decision: dict[str, Any], offer: Offer) -> Outcome:
        return await self.o._terminal(self.inp, self.emit, step, decision, self.observations)
