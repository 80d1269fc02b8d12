"""The ``monolithic`` pipeline: one generator call over pre-fetched context — DR's predecessor baseline.

No orchestrator, no contract, no post-guard: code pre-fetches what a blended
responder would be given (the authenticated user's record and orders, the
help articles matching the text), and the generator writes the whole reply
itself, streamed as it comes. It keeps the pre-guard's PII redaction (no PII
reaches the model or the event log), its typed limit errors and its two
deterministic routes to a person, and the same session facts
(``meta["dr"]["facts"]``), so DR and monolithic sessions are comparable turn
for turn. It never executes a write.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from pipelines.annex.dr.state import META_KEY, load_facts
from pipelines.core.generate import reply_deltas
from pipelines.core.ports import Guardrails, ToolRunner
from pipelines.core.prologue import open_turn
from pipelines.core.state import TurnState
from pipelines.counters import Counters
from pipelines.events import EscalationEvent, ReplyDelta
from pipelines.guardrails import LocalGuardrails
from pipelines.guardrails.ids import extract_ids
from pipelines.protocols import ChatMessage, ModelCall, ModelClient
from pipelines.turn import TurnContext

from .rungpack import RungPack

__all__ = ["MonolithicSettings", "MonolithicPipeline"]

_SYSTEM = (
    "You are a retail customer-support assistant. Use the context below to answer the user. "
    "Verify the user by email or name and zip before discussing orders. Be brief."
)


@dataclass(frozen=True)
class MonolithicSettings:
    max_reply_tokens: int = 192
    temperature: float = 0.0
    seed: int = 0
    max_orders: int = 3
    help_articles: int = 2
    history_turns: int = 2
    handoff_message: str = "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON."


class MonolithicPipeline:
    """One generator call that sees pre-fetched context and writes the reply itself."""

    name = "monolithic"

    def __init__(self, domain: RungPack, models: ModelClient, tools: ToolRunner, guardrails: Guardrails | None = None,
                 *, settings: MonolithicSettings | None = None, counters: Counters | None = None) -> None:
        self.domain, self.models, self.tools = domain, models, tools
        self.guardrails: Guardrails = guardrails or LocalGuardrails()
        self.settings, self.counters = settings or MonolithicSettings(), counters or Counters()

    async def _prefetch(self, st: TurnState, facts: Any, text: str) -> list[str]:
        """Context lines (redacted): lookup by email, the user's record and orders, help articles."""
        ctx, vault = st.ctx, st.vault
        lines: list[str] = []
        calls: list[dict[str, Any]] = []

        async def call(name: str, args: dict[str, Any]) -> dict[str, Any] | None:
            res = await self.tools.call(name, vault.resolve(args), facts.tool_session(ctx.session_id))
            calls.append({"tool": name, "args": vault.redact_obj(args), "ok": res.observation.ok})
            if res.observation.ok:
                facts.observe(name, res, self.domain.lookup_tools)
            return res.observation.result if res.observation.ok else None

        if not facts.authenticated_user_id:
            for pid in vault.ids():
                if pid.startswith("[EMAIL_") and pid in text:
                    await call("find_user_id_by_email", {"email": pid})
                    break
        uid = facts.authenticated_user_id
        if uid:
            user = await call("get_user_details", {"user_id": uid})
            if user:
                lines.append("user: " + self.domain.summarize("get_user_details", vault.redact_obj(user)))
                wanted = extract_ids(text).get("order", set()) & set(user["orders"])
                for oid in (sorted(wanted) or list(user["orders"]))[: self.settings.max_orders]:
                    order = await call("get_order_details", {"order_id": oid})
                    if order:
                        lines.append("order: " + self.domain.summarize("get_order_details", vault.redact_obj(order)))
        _, hits = self.domain.search_help(text, self.settings.help_articles)
        lines += [f"help [{h.id}] {h.title}: {h.body[:240]}" for h in hits]
        st.emit("mono.context", calls=calls, lines=len(lines), authenticated_user_id=facts.authenticated_user_id)
        return lines

    async def run(self, ctx: TurnContext) -> AsyncIterator[Any]:
        s = self.settings
        facts = load_facts(ctx.history)
        facts.pending_action = None
        ctx.meta[META_KEY] = {"facts": facts.to_meta()}
        st = await open_turn(ctx, self.guardrails, self.counters, pipeline=self.name, prefix="mono")
        pre, vault = st.pre, st.vault
        if pre.route is not None:
            yield EscalationEvent(reason_code=pre.route, message=s.handoff_message)
            yield ReplyDelta(text=s.handoff_message)
            ctx.meta[META_KEY] = {"facts": facts.to_meta(), "path": "escalate", "escalation": pre.route}
            return
        facts.mention(pre.text)
        with st.timed("prefetch"):
            lines = await self._prefetch(st, facts, pre.text)
        messages = [ChatMessage(role="system", content=_SYSTEM + "\nContext:\n" + ("\n".join(lines) or "none"))]
        turns = ctx.history[-s.history_turns:] if s.history_turns else []
        for turn, red in zip(turns, pre.history[-len(turns):] if turns else [], strict=True):
            messages.append(ChatMessage(role="user", content=red))
            if turn.reply_text:
                messages.append(ChatMessage(role="assistant", content=vault.redact(turn.reply_text)))
        messages.append(ChatMessage(role="user", content=pre.text))
        messages = [ChatMessage(role=m.role, content=vault.redact(m.content)) for m in messages]
        call = ModelCall(messages=messages, max_tokens=s.max_reply_tokens, temperature=s.temperature, seed=s.seed)
        async for delta in reply_deltas(ctx, self.models, call,
                                        prompt_chars=len(json.dumps([m.content for m in messages]))):
            yield delta
        facts.vault_ids = vault.ids()
        ctx.meta[META_KEY] = {"facts": facts.to_meta(), "path": "answer", "rules_version": pre.rules_version}
