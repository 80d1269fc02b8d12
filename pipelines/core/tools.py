"""Tool calls of a tandem turn: one port, redaction on the way in and out, observations folded by the domain.

Every call goes through the one tool port (:class:`pipelines.core.ports.ToolRunner`):
placeholders are resolved just before the call, the result is redacted before
anything else sees it, a timeout or a port failure becomes a failed observation
(the turn goes on), and the domain folds successful observations of the owner's
records into the session facts and the grounded candidates. A confirmed write carries the card it
runs (:class:`~pipelines.core.ports.ConfirmedCard`) and every call the turn's lease token (``fence``):
a write refused by the port is a failed observation (``unconfirmed_write``); a stale token
(:class:`~pipelines.errors.LeaseLost`) ends the turn, since another turn holds the session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pipelines.core.contract import ObservationRecord
from pipelines.core.domain import Domain, TurnFacts
from pipelines.core.ports import ConfirmedCard, ToolCallResult, ToolRunner, ToolSession
from pipelines.errors import LeaseLost, TandemError
from pipelines.guardrails.pii import Vault
from pipelines.spans import tool_span
from pipelines.tools import ToolObservation

__all__ = ["ToolCaller"]


class ToolCaller:
    """Runs tool calls for one turn and keeps their observation records."""

    def __init__(self, domain: Domain, tools: ToolRunner, facts: TurnFacts, vault: Vault, *, locale: str,
                 timeout_s: float, counters: Any, emit: Callable[..., None], fence: int | None = None) -> None:
        self.domain, self.tools, self.facts, self.vault = domain, tools, facts, vault
        self.locale, self.timeout_s, self.counters, self.emit = locale, timeout_s, counters, emit
        self.fence = fence  # the turn's lease token (TurnContext.fence): the ledger refuses a stale one
        self.records: list[ObservationRecord] = []

    def session(self, *, confirmed: bool = False, idempotency_key: str | None = None,
                card: ConfirmedCard | None = None) -> ToolSession:
        fields = self.domain.session_fields(self.facts)
        extra = {"idempotency_key": idempotency_key} if idempotency_key else {}
        texts = [self.vault.restore(t) for t in self.facts.user_texts]  # the backend grounds write arguments
        return ToolSession(session_id=self.facts.session_id, confirmed=confirmed, locale=self.locale,
                           user_texts=texts, card=card, fence=self.fence, **fields, **extra)

    async def raw(self, name: str, args: dict[str, Any], *, step: int, confirmed: bool = False,
                  idempotency_key: str | None = None, card: ConfirmedCard | None = None) -> ToolCallResult:
        """One call through the port; failures of the port become a failed observation (never raised), but a
        stale lease token (:class:`~pipelines.errors.LeaseLost`) is raised: the turn has lost its session."""
        session = self.session(confirmed=confirmed, idempotency_key=idempotency_key, card=card)
        try:
            with tool_span(name, self.vault.redact_obj(dict(args)), step=step) as span:
                async with asyncio.timeout(self.timeout_s):
                    res = await self.tools.call(name, self.vault.resolve(args), session)
                span.observation(self.vault.redact_obj(res.observation.result), ok=res.observation.ok,
                                 reason=res.reason)
                return res
        except TimeoutError:
            code, message = "tool_timeout", f"no result within {self.timeout_s:g} s"
        except LeaseLost:
            raise
        except TandemError as exc:
            code, message = exc.code, exc.message
        obs = ToolObservation(tool=name, args=args, ok=False, error_code=code, error_message=message)
        return ToolCallResult(observation=obs, reason=code)

    def fold(self, name: str, args: dict[str, Any], result: ToolCallResult, *, step: int,
             confirmed: bool = False) -> ObservationRecord:
        """Redact, record, log, and let the domain fold the observation into the facts."""
        obs = result.observation
        red = self.vault.redact_obj(obs.result) if obs.result is not None else None
        self.counters.tool("ok" if obs.ok else "timeout" if obs.error_code == "tool_timeout" else "failed")
        self.domain.observe(name, red, obs.ok, self.facts)
        record = ObservationRecord(step=step, tool=name, args=self.vault.redact_obj(dict(args)), ok=obs.ok,
                                   reason=result.reason or obs.error_code,
                                   summary=self.domain.summarize(name, red) if obs.ok else "", result=red)
        self.records.append(record)
        self.facts.observations.append(record.model_dump(mode="json"))
        self.emit("tandem.tool", step=step, tool=name, args=record.args, ok=obs.ok, reason=record.reason,
                  confirmed=confirmed, result=red, summary=record.summary)
        return record

    async def call(self, name: str, args: dict[str, Any], *, step: int, confirmed: bool = False,
                   idempotency_key: str | None = None, card: ConfirmedCard | None = None) -> ObservationRecord:
        """Run one call and fold it (sequential use)."""
        result = await self.raw(name, args, step=step, confirmed=confirmed, idempotency_key=idempotency_key,
                                card=card)
        return self.fold(name, args, result, step=step, confirmed=confirmed)
