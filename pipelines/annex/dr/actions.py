"""The orchestrator's terminal handlers: escalation, the action-card path, selection, confirmed writes.

An action card reaches the user only through :meth:`ActionHandler.action`:
the card must be in the catalogue and be a write, its parameters must
validate, the session must be authenticated, the order must have been
observed, the entity must not be ambiguous, and the backend's precheck must
find it eligible (pending the user's yes). Only then is the pending action
stored; only an explicit affirmative on the next turn executes it
(:meth:`ActionHandler.execute_pending`), with the user's confirmation set by
code.
"""

from __future__ import annotations

import asyncio
from contextlib import nullcontext
from typing import Any, Protocol

from pipelines.annex.dr.inputs import OrchestratorInput
from pipelines.annex.rungpack import RungPack
from pipelines.core.contract import EligibleAction, ObservationRecord, PendingCard
from pipelines.core.decisions import transfer_args
from pipelines.core.fallback import Stop, fallback
from pipelines.core.outcome import Emit, Outcome
from pipelines.core.ports import UNGROUNDED, ConfirmedCard, ToolCallResult, call_digest, write_key
from pipelines.errors import ToolError, ToolTimeout
from pipelines.guardrails.ids import walk_strings
from pipelines.guardrails.mid import check_args, check_consistency, check_placeholders
from pipelines.guardrails.pii import PLACEHOLDER_RE
from pipelines.guardrails.post import Violation

__all__ = ["ActionHandler", "LoopHost", "UNGROUNDED_QUESTION"]

UNGROUNDED_QUESTION = "Could you type the exact details you want me to use for this change?"


def _rolled_back(stop: Stop) -> bool:
    """The tools said the write was not recorded and nothing changed (a failed commit): not unknown."""
    cause = stop.__cause__
    return isinstance(cause, ToolError) and (getattr(cause, "details", None) or {}).get("reason") == "commit_failed"


class LoopHost(Protocol):
    """What the terminal handlers need of the loop that runs them (the :class:`Orchestrator`)."""

    domain: RungPack
    tools: Any
    counters: Any
    settings: Any

    def mid_block(self, emit: Emit, step: int, v: Violation) -> None: ...

    async def run_tool(self, inp: OrchestratorInput, emit: Emit, step: int, name: str, args: dict[str, Any], *,
                       confirmed: bool = False, idempotency_key: str | None = None,
                       card: ConfirmedCard | None = None) -> tuple[ToolCallResult, ObservationRecord]: ...

    def candidates(self, inp: OrchestratorInput) -> list[str]: ...


class ActionHandler:
    """Terminal decisions of the loop (and the two deterministic routes)."""

    def __init__(self, orch: LoopHost) -> None:
        self.o = orch

    async def escalate(
        self, inp: OrchestratorInput, emit: Emit, reason_code: str, observations: list[ObservationRecord]
    ) -> Outcome:
        """Hand over to a person: the transfer tool is called, but its failure never blocks the route."""
        inp.facts.pending_action = None
        args = transfer_args(self.o.domain, inp.user_text or "", reason_code)
        try:
            _, record = await self.o.run_tool(inp, emit, 0, self.o.domain.transfer_tool, args)
            observations.append(record)
        except Stop as stop:
            emit("dr.guard", stage="mid", step=0, decision="pass", violation="transfer_failed", detail=stop.fallback.trigger)
        return Outcome(path="escalate", escalation_reason=reason_code)

    async def execute_pending(
        self, inp: OrchestratorInput, emit: Emit, pending: PendingCard, observations: list[ObservationRecord]
    ) -> Outcome:
        """Run the confirmed write exactly as it was shown; any drift falls back instead."""
        missing = inp.vault.unresolved(pending.args)
        drift = [p for p, d in pending.digests.items() if inp.vault.digest(p) != d]
        v: Violation | None = None
        if missing or drift:
            v = Violation(kind="unresolved_placeholder", detail=",".join(missing + drift))
        v = v or check_consistency(
            pending.args, observed_ids=inp.facts.observed_ids,
            authenticated_user_id=inp.facts.authenticated_user_id,
        )
        if v is not None:
            self.o.mid_block(emit, 0, v)
            raise Stop(fallback("inconsistent_observation", f"{v.kind}: {v.detail}"))
        key = write_key(inp.session_id, pending.card_id, pending.turn_id)
        card = ConfirmedCard(tool=pending.tool, digest=pending.digest)  # the port runs only the call shown
        try:
            result, record = await self.o.run_tool(inp, emit, 0, pending.tool, pending.args, confirmed=True,
                                                   idempotency_key=key, card=card)
        except Stop as stop:
            # The write may or may not have run: asking again under the same key returns the recorded
            # outcome (or runs it once if it never ran), never a second execution.
            if stop.fallback.trigger not in ("tool_timeout", "tool_error"):
                raise
            emit("dr.write_retry", card_id=pending.card_id, trigger=stop.fallback.trigger)
            try:
                result, record = await self.o.run_tool(inp, emit, 0, pending.tool, pending.args, confirmed=True,
                                                       idempotency_key=key, card=card)
            except Stop as again:
                inp.facts.pending_action = pending  # a later "yes" asks the ledger again under the same key
                if again.fallback.trigger not in ("tool_timeout", "tool_error") or _rolled_back(again):
                    raise
                # Lost twice: the write may have run, so the user is never told that it failed.
                raise Stop(fallback("write_outcome_unknown",
                                    f"{pending.tool}: {again.fallback.detail or again.fallback.trigger}")) from None
        observations.append(record)
        if not record.ok:
            self.o.counters.blocked("ineligible_action")
            raise Stop(fallback("no_eligible_action", record.reason or "refused"))
        executed = EligibleAction(card_id=pending.card_id, title=pending.title, tool=pending.tool,
                                  params=pending.args, status="executed")
        return Outcome(path="answer", executed=executed, changed=dict(result.changed))

    def select(self, inp: OrchestratorInput, emit: Emit, step: int, entity_id: str | None) -> Outcome:
        """``None`` asks the user to choose; an id must be an observed entity."""
        if entity_id is None:
            return Outcome(path="clarify", clarify_options=self.o.candidates(inp))
        if entity_id not in inp.facts.observed_ids:
            self.o.mid_block(emit, step, Violation(kind="unobserved_entity", detail=entity_id))
            raise Stop(fallback("ambiguous_state", entity_id))
        return Outcome(path="answer", selected_entity=entity_id)

    async def action(self, inp: OrchestratorInput, emit: Emit, step: int, card_id: str,
                     params: dict[str, Any]) -> Outcome:
        """Validate a proposed card; show it (and store it as pending) only when eligible."""
        card = next((c for c in self.o.domain.cards if c.id == card_id), None)
        v: Violation | None = None
        if card is None or card.kind != "write":
            v = Violation(kind="unknown_card", detail=card_id)
        else:
            missing = [p for p in card.required_params if p not in params]
            if missing:
                v = Violation(kind="missing_params", detail=",".join(missing))
            v = v or check_args(self.o.domain.registry, card.tool, params)[1]
            v = v or check_placeholders(params, inp.vault)
        if v is not None or card is None:
            self.o.mid_block(emit, step, v or Violation(kind="unknown_card"))
            raise Stop(fallback("invalid_tool_call", f"{v.kind}: {v.detail}" if v else card_id))
        args = inp.vault.redact_obj(dict(params))
        if not inp.facts.authenticated_user_id:
            self.o.mid_block(emit, step, Violation(kind="not_authenticated", detail=card.id))
            raise Stop(fallback("no_eligible_action", "not_authenticated"))
        v = check_consistency(args, observed_ids=inp.facts.observed_ids,
                              authenticated_user_id=inp.facts.authenticated_user_id)
        if v is not None:
            self.o.mid_block(emit, step, v)
            raise Stop(fallback("inconsistent_observation", f"{v.kind}: {v.detail}"))
        order_id = args.get("order_id")
        options = self.o.candidates(inp)
        if isinstance(order_id, str) and order_id not in inp.facts.mentioned_ids and len(options) > 1:
            self.o.counters.blocked("ambiguous_entity")
            emit("dr.guard", stage="mid", step=step, decision="clarify", violation="ambiguous_entity", detail=order_id)
            return Outcome(path="clarify", clarify_options=options)
        reason = await self._precheck(inp, card.tool, args)
        emit("dr.precheck", step=step, card_id=card.id, tool=card.tool, args=args, reason=reason)
        if reason is not None and reason.startswith(UNGROUNDED):
            # An argument that is neither the user's words nor their records: ask the user instead.
            self.o.counters.blocked(UNGROUNDED)
            return Outcome(path="clarify", clarify_question=UNGROUNDED_QUESTION,
                           fallback=fallback(UNGROUNDED, reason))
        if reason not in (None, "not_confirmed"):
            self.o.counters.blocked("ineligible_action")
            raise Stop(fallback("no_eligible_action", str(reason)))
        self.o.counters.guard("mid", "pass")
        pids = {m.group(0) for s in walk_strings(args) for m in PLACEHOLDER_RE.finditer(s)}
        inp.facts.pending_action = PendingCard(
            card_id=card.id, title=card.title, tool=card.tool, args=args,
            digests={p: inp.vault.digest(p) or "" for p in sorted(pids)}, turn_id=inp.turn_id,
            digest=call_digest(card.tool, inp.vault.resolve(args)),
        )
        return Outcome(path="action_card", card_id=card.id, card_title=card.title, card_params=args)

    async def _precheck(self, inp: OrchestratorInput, tool: str, args: dict[str, Any]) -> str | None:
        session = inp.facts.tool_session(inp.session_id, locale=inp.locale,
                                         user_texts=[inp.vault.restore(t) for t in inp.user_texts])
        timeout = self.o.settings.tool_timeout_s
        try:
            async with asyncio.timeout(timeout) if timeout else nullcontext():
                return await self.o.tools.precheck(tool, inp.vault.resolve(args), session)
        except (ToolTimeout, TimeoutError) as exc:
            raise Stop(fallback("tool_timeout", f"precheck {tool}")) from exc
        except ToolError as exc:
            raise Stop(fallback("tool_error", f"precheck {tool}: {exc.code}")) from exc
