"""The tandem orchestrator: bounded ReAct over the grounded offer, action cards, escalation, confirmed writes.

::

    loop (≤ max_steps)   offer (core.decisions.build_offer) → one call (core.loop) → parse → re-check
        read tool        arguments grounded (backend re-check) → tool port → observation folded;
                         the same read with the same arguments again this turn (Φ's included)
                         ends the gathering: path answer, from what was observed
        respond          path answer                      clarify(about)  the domain's question
        select           null: choose among the user's orders; an id: answer about it
        action           intent gate, grounded parameters, verified user, not ambiguous, the
                         backend's precheck → card shown, pending stored; refused → answer with
                         the refusal as a conflict; ungrounded → policy fallback + clarify
        escalate         transfer tool (its failure never blocks the route)
    step cap             fallback step_cap
    execute_pending      the confirmed write exactly as shown (placeholders unchanged, still
                         grounded), once: the tool port's idempotency key is the pending card, and
                         the port runs it only as the card shown (its tool and arguments digest)

Every step is one ``tandem.step`` event (the raw output, the offer, the decision).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from pipelines.core.contract import EligibleAction
from pipelines.core.decisions import (
    Offer,
    build_offer,
    decision_schema,
    transfer_args,
)
from pipelines.core.domain import Domain, TurnFacts
from pipelines.core.fallback import Stop, fallback
from pipelines.core.loop import run_steps
from pipelines.core.outcome import Outcome
from pipelines.core.ports import ConfirmedCard, call_digest, write_key
from pipelines.core.tools import ToolCaller
from pipelines.errors import TandemError
from pipelines.grounding import ungrounded
from pipelines.guardrails.pii import Vault
from pipelines.protocols import ChatMessage, ModelCall, ModelClient, StructuredOutput

from .cards import declined_before, declined_outcome
from .prompts import observation_line, step_messages
from .settings import TandemSettings

__all__ = ["Orchestrator", "change_asked", "once_each"]

# Failures of the hop, not of the backend: a confirmed write that met one may have run.
_LOST = frozenset({"tool_timeout", "tool_error"})


def once_each(params: dict[str, Any]) -> dict[str, Any]:
    """A card's list parameters naming each record once: an entry repeated (a small model looping over the
    enum) is dropped. Lists of equal length are pairs (items and their replacements) and drop a repeated
    position together; the card then shows exactly what will run, never more than was asked."""
    lists = {k: v for k, v in params.items() if isinstance(v, list)}
    if not lists:
        return params
    out = dict(params)
    if len(lists) > 1 and len({len(v) for v in lists.values()}) == 1:
        seen: set[str] = set()
        keep = []
        for i in range(len(next(iter(lists.values())))):
            key = json.dumps([lists[k][i] for k in lists], sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                keep.append(i)
        for k, v in lists.items():
            out[k] = [v[i] for i in keep]
        return out
    for k, v in lists.items():
        out[k] = list(dict.fromkeys(json.dumps(x, sort_keys=True, default=str) for x in v))
        out[k] = [json.loads(x) for x in out[k]]
    return out


def change_asked(domain: Domain, texts: Sequence[str]) -> bool:
    """Whether a user text of the session asks for a change in words: a cue of an intent that offers a write card.

    A card is offered only then; a perceived change intent with no such cue (an email, a greeting, a
    status question read as a change) asks what the user needs instead. A pack whose cue tables do not
    read change requests (``change_cues`` false) leaves it to the perceived intent and its ``cards_for``.
    """
    if not domain.change_cues:
        return True
    changes = domain.change_intents()
    return any(changes & set(domain.intent_prior(t) or ()) for t in texts)


class Orchestrator:
    """Decides one tandem turn after W1 (see module docstring)."""

    def __init__(self, domain: Domain, models: ModelClient, settings: TandemSettings, *, facts: TurnFacts,
                 caller: ToolCaller, vault: Vault, counters: Any, emit: Callable[..., None], turn_id: str) -> None:
        self.domain, self.models, self.s, self.facts = domain, models, settings, facts
        self.caller, self.vault, self.counters, self.emit, self.turn_id = caller, vault, counters, emit, turn_id
        self.change_given = False  # the request's own labels (oracle perception) name a change: it was asked
        self.declined: list[str] = []  # the cards the user said no to (signatures): never shown again
        self.done: list[str] = []  # the writes done this session (signatures): never offered again

    def _block(self, step: int, kind: str, detail: str) -> None:
        self.counters.guard("mid", "block")
        self.counters.blocked(kind)
        self.emit("tandem.guard", stage="mid", step=step, decision="block", violation=kind, detail=detail)

    # -- the loop --------------------------------------------------------------------------

    async def run(self, w1_messages: list[ChatMessage], w1_raw: str, intent: str, sub_intent: str, *,
                  propose: bool = False) -> Outcome:
        """The decision: the core's loop (:func:`pipelines.core.loop.run_steps`) over the grounded offer.

        ``propose`` (Φ's ``then: propose``): one step that may only fill the intent's card,
        ask for what it misses, or escalate; with no card fillable, the clarify needs no model.
        Raises :class:`~pipelines.core.fallback.Stop` for model, tool and guard failures.
        """
        steps = _GroundedSteps(self, w1_messages, w1_raw, intent, sub_intent, propose=propose)
        return await run_steps(steps, self.models, max_steps=1 if propose else self.s.max_steps,
                               timeout_s=self.s.model_timeout_s, emit=self.emit)

    def _repeats(self, name: str, args: dict[str, Any]) -> bool:
        """This turn already ran ``name`` with these arguments (Φ's dispatch included)."""
        red = self.vault.redact_obj(dict(args))
        return any(r.tool == name and r.args == red for r in self.caller.records)

    async def _tool(self, step: int, name: str, args: dict[str, Any]) -> None:
        bad = ungrounded(args, self.domain.arg_kinds(name), self.facts.candidates,
                         optional_empty=self.domain.optional_empty(name))
        if bad:
            self._block(step, "ungrounded_argument", ",".join(a for a, _ in bad))
            raise Stop(fallback("invalid_tool_call", f"ungrounded: {','.join(a for a, _ in bad)}"))
        self.counters.guard("mid", "pass")
        await self.caller.call(name, args, step=step)

    async def _terminal(self, step: int, d: dict[str, Any], offer: Offer, intent: str, sub_intent: str) -> Outcome:
        kind = d["decision"]
        if kind == "respond":
            return Outcome(path="answer")
        if kind == "clarify":
            return Outcome(path="clarify", clarify_question=self.domain.texts.question(d["about"]),
                           clarify_about=d["about"])
        if kind == "select":
            if d["entity_id"] is None:
                return self.choose(offer.select_ids)
            return Outcome(path="answer", selected_entity=d["entity_id"])
        if kind == "escalate":
            return await self.escalate(d["reason_code"])
        return await self.action(step, d["card_id"], d["params"], offer, intent, sub_intent)

    def choose(self, options: list[str]) -> Outcome:
        """Ask which of the user's records a change means (the pack's ``entity_kind``)."""
        if len(options) < 2:
            about = self.domain.clarify_key(self.domain.entity_kind or "") or "details"
            return Outcome(path="clarify", clarify_question=self.domain.texts.question(about), clarify_about=about)
        shown = self.domain.describe_records(options, self.facts) or list(options)
        q = self.domain.texts.question("choose", options=", ".join(shown))
        return Outcome(path="clarify", clarify_question=q, clarify_options=list(shown), clarify_about="choose")

    async def escalate(self, reason_code: str) -> Outcome:
        """Hand over to a person: the transfer tool runs if the domain has one; its failure never blocks."""
        tool = self.domain.transfer_tool
        if tool and tool in self.domain.registry.tools:
            await self.caller.call(tool, transfer_args(self.domain, self.facts.user_text or "", reason_code), step=0)
        self.counters.escalation(reason_code)
        return Outcome(path="escalate", escalation_reason=reason_code)

    # -- action cards ----------------------------------------------------------------------

    async def action(self, step: int, card_id: str, params: dict[str, Any], offer: Offer, intent: str,
                     sub_intent: str) -> Outcome:
        """The backend's checks of a proposed card; shown (and stored as pending) only when all pass."""
        allowed = {c.id: c for c in self.domain.cards_for(intent, sub_intent, self.facts)}
        card = allowed.get(card_id)
        if card is None:
            self._block(step, "unrequested_card", card_id)
            raise Stop(fallback("invalid_tool_call", f"card {card_id} not offered for {intent}/{sub_intent}"))
        if not (self.change_given or change_asked(self.domain, self.facts.user_texts)):
            self._block(step, "unrequested_card", card_id)
            self.counters.blocked("unrequested_card")
            return Outcome(path="clarify", clarify_question=self.domain.texts.question("details"),
                           clarify_about="details")
        missing = [p for p in card.required_params if p not in params]
        if missing:
            self._block(step, "missing_params", ",".join(missing))
            raise Stop(fallback("invalid_tool_call", f"missing {','.join(missing)}"))
        args = once_each({p: params[p] for p in card.required_params})
        args = self.domain.arrange(card.tool, args, self.facts)  # the pack's own order of a card's arguments
        open_ = self.domain.undecided(card.tool, args, self.facts)
        if open_:  # the user's words leave a choice open (a tie): ask it, never let the model pick
            about, options = open_
            self.counters.blocked("undecided_parameter")
            self.emit("tandem.guard", stage="mid", step=step, decision="clarify", violation="undecided_parameter",
                      detail=about)
            q = self.domain.texts.question(about, options=", ".join(options))
            return Outcome(path="clarify", clarify_question=q, clarify_options=list(options), clarify_about=about)
        bad = ungrounded(args, self.domain.arg_kinds(card.tool), self.facts.candidates,
                         optional_empty=self.domain.optional_empty(card.tool))
        if bad:
            self._block(step, "ungrounded_parameter", ",".join(a for a, _ in bad))
            self.counters.fallback("ungrounded_parameter", "policy")
            kinds = self.domain.arg_kinds(card.tool)
            about = self.domain.clarify_key(kinds.get(bad[0][0], "")) or "details"
            return Outcome(path="clarify", clarify_question=self.domain.texts.question(about), clarify_about=about)
        if declined_before(self.declined, card.id, args):  # the user said no to this very card: never again
            self._block(step, "declined_card", card.id)
            return declined_outcome(self.domain, card_id=card.id, args=args)
        if declined_before(self.done, card.id, args):  # done already this session: never offered again
            self._block(step, "done_card", card.id)
            return Outcome(path="clarify", clarify_question=self.domain.texts.question("already_done"),
                           clarify_about="already_done")
        kind = self.domain.entity_kind
        entity = args.get(kind) if kind else None
        options = offer.select_ids
        if (isinstance(entity, str) and self.facts.candidates.source_of(kind, entity) == "record"
                and entity not in self.domain.extract_candidates(self.facts.user_text).get(kind or "", [])
                and len(options) > 1):  # one of the user's several records, and not the one they named
            self.counters.blocked("ambiguous_entity")
            self.emit("tandem.guard", stage="mid", step=step, decision="clarify", violation="ambiguous_entity",
                      detail=entity)
            return self.choose(options)
        try:
            async with asyncio.timeout(self.s.tool_timeout_s):
                reason = await self.caller.tools.precheck(card.tool, self.vault.resolve(args), self.caller.session())
        except TimeoutError as exc:
            raise Stop(fallback("tool_timeout", f"precheck {card.tool}")) from exc
        except TandemError as exc:
            raise Stop(fallback("tool_error", f"precheck {card.tool}: {exc.code}")) from exc
        self.emit("tandem.precheck", step=step, card_id=card.id, tool=card.tool, args=args, reason=reason)
        if reason not in (None, "not_confirmed"):
            self.counters.blocked("ineligible_action")
            self.facts.refusals.append({"card_id": card.id, "reason": reason, "entity": entity})
            self.domain.refused(card.tool, args, str(reason), self.facts)
            return Outcome(path="answer", card_id=None, card_title=card.title, card_params=args)
        self.counters.guard("mid", "pass")
        for tool, targs in self.domain.readback_reads(card.tool, args, self.facts)[:4]:  # what its read-back names
            if not self._repeats(tool, targs):
                await self.caller.call(tool, dict(targs), step=step)
        pending = {"card_id": card.id, "title": card.title, "tool": card.tool, "args": args, "turn_id": self.turn_id,
                   # the call as the port will get it: it runs the write only if the yes is to this very call
                   "digest": call_digest(card.tool, self.vault.resolve(args)), "labels": [intent, sub_intent]}
        self.facts.state = {**self.facts.state, "pending": pending}
        return Outcome(path="action_card", card_id=card.id, card_title=card.title, card_params=args)

    async def execute_pending(self, pending: dict[str, Any]) -> Outcome:
        """Run the confirmed write exactly as it was shown; any drift refuses it instead."""
        args = dict(pending["args"])
        # what the card's placeholders hold now, compared by value with the call shown (names are each turn's own)
        drift = [] if call_digest(pending["tool"], self.vault.resolve(args)) == pending.get("digest") else ["call"]
        bad = ungrounded(args, self.domain.arg_kinds(pending["tool"]), self.facts.candidates,
                         optional_empty=self.domain.optional_empty(pending["tool"]))
        if drift or self.vault.unresolved(args) or bad:
            detail = ",".join(drift + self.vault.unresolved(args) + [a for a, _ in bad])
            self._block(0, "pending_drift", detail)
            self.counters.write("refused")
            raise Stop(fallback("inconsistent_observation", f"pending card changed: {detail}"))
        key = write_key(self.facts.session_id, pending["card_id"], pending.get("turn_id", ""))
        card = ConfirmedCard(tool=pending["tool"], digest=pending.get("digest") or "")
        record = await self.caller.call(pending["tool"], args, step=0, confirmed=True, idempotency_key=key,
                                        card=card)
        if not record.ok and record.reason in _LOST:
            # The write may or may not have run: asking again under the same key returns the
            # recorded outcome (or runs it once if it never ran), never a second execution.
            self.emit("tandem.write_retry", card_id=pending["card_id"], trigger=record.reason)
            record = await self.caller.call(pending["tool"], args, step=0, confirmed=True, idempotency_key=key,
                                            card=card)
            if not record.ok and record.reason in _LOST:
                # Still unknown: the card stays pending, so the next "yes" asks the ledger again.
                self.facts.state = {**self.facts.state, "pending": pending}
                self.counters.write("unknown")
                raise Stop(fallback("write_outcome_unknown", f"{pending['tool']}: {record.reason}"))
        if not record.ok:
            self.counters.write("refused")
            self.counters.blocked("ineligible_action")
            kind = self.domain.entity_kind
            self.facts.refusals.append({"card_id": pending["card_id"], "reason": record.reason,
                                        "entity": args.get(kind) if kind else None})
            self.domain.refused(pending["tool"], args, str(record.reason), self.facts)
            return Outcome(path="answer", card_title=pending["title"], card_params=args)
        self.counters.write("executed")
        executed = EligibleAction(card_id=pending["card_id"], title=pending["title"], tool=pending["tool"],
                                  params=args, status="executed")
        return Outcome(path="answer", executed=executed)


class _GroundedSteps:
    """The tandem turn's parts of the one loop: the grounded offer, the append-only prompt, the checks."""

    prefix = "tandem"

    def __init__(self, orch: Orchestrator, w1_messages: list[ChatMessage], w1_raw: str, intent: str,
                 sub_intent: str, *, propose: bool) -> None:
        self.o, self.w1_messages, self.w1_raw = orch, w1_messages, w1_raw
        self.intent, self.sub_intent, self.propose = intent, sub_intent, propose
        self.steps: list[tuple[str, str]] = []
        self.seen = 0

    def offer(self, step: int) -> Offer:
        offer = build_offer(self.o.domain, self.o.facts, intent=self.intent, sub_intent=self.sub_intent)
        return offer.proposal() if self.propose else offer

    def early(self, step: int, offer: Offer) -> Outcome | None:
        if not self.propose or offer.cards:
            return None
        about = offer.clarify[0] if offer.clarify else "details"
        self.o.emit("tandem.step", step=step, raw="", offer=offer.summary(),
                    decision={"decision": "clarify", "about": about}, error=None)
        return Outcome(path="clarify", clarify_question=self.o.domain.texts.question(about), steps=0,
                       clarify_about=about)

    def call(self, step: int, offer: Offer) -> ModelCall:
        facts, s = self.o.facts, self.o.s
        new = facts.observations[self.seen:]
        self.seen = len(facts.observations)
        lines = [observation_line(self.seen - len(new) + i + 1, o) for i, o in enumerate(new)]
        self.steps.append((("Observations:\n" + "\n".join(lines) if lines else "No new observations.") + "\nDecide.",
                           ""))
        return ModelCall(messages=step_messages(self.w1_messages, self.w1_raw, self.steps),
                         max_tokens=s.orchestrator_max_tokens, temperature=0.0, seed=s.seed,
                         priority=s.later_call_priority,
                         structured_output=StructuredOutput(kind="json", spec=decision_schema(offer)))

    def reject(self, step: int, kind: str, detail: str) -> None:
        self.o._block(step, kind, detail)

    def decided(self, step: int, raw: str) -> None:
        self.steps[-1] = (self.steps[-1][0], raw.strip())
        if step == 1:
            self.o.counters.dispatch("orchestrator")

    async def read(self, step: int, decision: dict[str, Any]) -> Outcome | None:
        name, args = decision["decision"], decision["args"]
        if self.o._repeats(name, args):
            # The same read with the same arguments adds nothing: gathering is over, answer from what was
            # observed (never a step spent, or a step cap reached, on a repeat).
            self.o.emit("tandem.repeat_read", step=step, tool=name, args=self.o.vault.redact_obj(dict(args)))
            return Outcome(path="answer")
        await self.o._tool(step, name, args)
        return None

    async def terminal(self, step: int, decision: dict[str, Any], offer: Offer) -> Outcome:
        return await self.o._terminal(step, decision, offer, self.intent, self.sub_intent)
