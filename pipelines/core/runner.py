"""The one in-process tool port: a pack's typed tools over its world, with exactly-once writes.

A write runs only after the user's yes to the card that shows it, whatever the pack's own code checks:
:func:`require_confirmed` refuses it (:class:`~pipelines.errors.UnconfirmedWrite`, before the pack is
reached) unless the session is confirmed, its confirmed card is this call (tool and arguments digest) and
the call carries an idempotency key. :class:`LocalToolRunner` applies it to every write of a pack it runs;
:class:`WriteGate` puts it in front of any runner a pack returns (the tools deployment serves through it).

:class:`LocalToolRunner` implements :class:`~pipelines.core.ports.ToolRunner` for any pack that is
a :class:`ToolBackend` (its tool calls, their eligibility and the grounding of write arguments).
Reads run against the live world. Writes are serialized and run on a fork of the world (the entities
the write may change — its :class:`WriteScope` — copied): a write that changed anything outside its
scope is refused; the changed entities (kind → ids) and, for a keyed call, the outcome are committed to
the write ledger in one transaction, and only then swapped into the live world. A
failed commit raises :class:`~pipelines.errors.ToolError` and changes nothing, in memory or on
disk. A key already in the ledger returns its recorded outcome (``replayed=True``) without running
anything. Every write argument must be grounded (the user's words or their own records), checked at
precheck and again before the write runs. The commit carries the turn's lease token (``ToolSession.fence``):
a ledger that has accepted a higher one for the session refuses it (:class:`~pipelines.errors.LeaseLost`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pipelines.errors import LeaseLost, ToolError, UnconfirmedWrite
from pipelines.tools import ToolContext, ToolObservation, ToolRegistry

from .ports import (
    UNGROUNDED,
    LedgerEntry,
    MemoryLedger,
    ToolCallResult,
    ToolRunner,
    ToolSession,
    WriteLedger,
    call_digest,
)

__all__ = ["WriteScope", "World", "ToolBackend", "ToolOutcome", "CallOutcome", "LocalToolRunner", "WriteGate",
           "require_confirmed", "write_tools_of"]


@dataclass(frozen=True)
class WriteScope:
    """What one write may change: these existing entities (kind → ids), and new entities of the ``creates``
    kinds (ids the world did not have before the write)."""

    existing: Mapping[str, Collection[str]] = field(default_factory=dict)
    creates: frozenset[str] = frozenset()

    def admits(self, changed: Mapping[str, Sequence[str]], world: World) -> bool:
        """Whether every changed entity is in the scope, or new of a kind it may create."""
        for kind, keys in changed.items():
            own = set(self.existing.get(kind, ()))
            for key in keys:
                if key not in own and not (kind in self.creates and not world.has(kind, key)):
                    return False
        return True


@runtime_checkable
class World(Protocol):
    """A pack's world, as the runner writes it: forked for one write, then the changed entities adopted."""

    def write_scope(self, tool: str, args: Mapping[str, Any], user_id: str | None) -> WriteScope:
        """What a write of ``tool`` by ``user_id`` may change (their own records; an inventory the tool's
        arguments name; what it may create)."""
        ...

    def fork(self, scope: WriteScope) -> World:
        """A copy whose scoped entities are private (the rest is shared, read-only by contract)."""
        ...

    def has(self, kind: str, key: str) -> bool:
        """Whether the entity exists."""
        ...

    def adopt(self, other: World, changed: Mapping[str, Sequence[str]]) -> None:
        """Take the changed entities from ``other`` (a fork after a committed write)."""
        ...

    def entity_json(self, kind: str, key: str) -> str:
        """One entity's JSON (what a store persists)."""
        ...

    def diff(self, other: Any, scope: WriteScope) -> Mapping[str, Sequence[str]]:
        """What a write on ``other`` (a fork of this world for ``scope``) changed, kind → ids: the runner
        stores these whatever the pack reports (a world of records compares them; a remote one has none)."""
        ...


@runtime_checkable
class ToolOutcome(Protocol):
    """What one backend call returns: the observation, a refusal reason, and what a write changed."""

    observation: ToolObservation
    reason: str | None
    changed: Mapping[str, Sequence[str]]


@dataclass
class CallOutcome:
    """A :class:`ToolOutcome`: one call's observation, its refusal reason, and what a write changed."""

    observation: ToolObservation
    reason: str | None = None
    changed: Mapping[str, Sequence[str]] = field(default_factory=dict)


@runtime_checkable
class ToolBackend(Protocol):
    """What a pack gives the tool port: its tools, their eligibility, the grounding of write arguments."""

    write_tools: frozenset[str]

    @property
    def registry(self) -> ToolRegistry[Any]: ...

    def invoke(self, name: str, args: dict[str, Any], ctx: ToolContext, world: Any) -> ToolOutcome:
        """Run one call; refusals are failed observations with a reason. A write reaches it only as the card the
        user confirmed (the runner's :func:`require_confirmed`); the pack may check ``ctx.confirmed`` again."""
        ...

    def precheck(self, name: str, args: dict[str, Any], ctx: ToolContext, world: Any) -> str | None:
        """A write's eligibility as if the user had confirmed: ``None`` or the reason code."""
        ...

    def ungrounded(self, name: str, args: dict[str, Any], user_texts: Sequence[str], world: Any,
                   user_id: str) -> list[str]:
        """The write arguments that are neither in the user's texts nor in ``user_id``'s own records."""
        ...


def require_confirmed(name: str, args: Mapping[str, Any], session: ToolSession) -> None:
    """Refuse a write the user has not confirmed as shown: raises :class:`~pipelines.errors.UnconfirmedWrite`
    unless ``session`` is confirmed, its card is ``name(args)`` (tool and arguments digest) and it carries an
    idempotency key. Nothing of the pack runs before this passes."""
    if not session.confirmed:
        reason, why = "not_confirmed", "the session has not confirmed it"
    elif session.card is None or not session.card.matches(name, args):
        reason, why = "card_mismatch", "it is not the card the user confirmed (tool or arguments differ)"
    elif not session.idempotency_key:
        reason, why = "no_idempotency_key", "it carries no idempotency key"
    else:
        return
    raise UnconfirmedWrite(f"write {name!r} refused by the tool port: {why} [{reason}]",
                           details={"reason": reason, "tool": name})


def write_tools_of(domain: Any) -> frozenset[str]:
    """A pack's write tools: those its registry declares ``kind="write"``, and any it lists in ``write_tools``
    (a tool declared either way is gated as a write)."""
    reg = domain.registry
    declared = frozenset(getattr(domain, "write_tools", None) or ())
    return declared | frozenset(n for n in reg.names() if reg.get(n).kind == "write")


class WriteGate:
    """The tool port as served: ``runner`` (whatever a pack's ``tool_runner`` returns) behind
    :func:`require_confirmed` for every write tool, so a refused write never reaches the pack's runner."""

    def __init__(self, runner: ToolRunner, write_tools: Collection[str]) -> None:
        self.runner = runner
        self.write_tools = frozenset(write_tools)

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        if name in self.write_tools:
            require_confirmed(name, args, session)
        return await self.runner.call(name, args, session)

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        return await self.runner.precheck(name, args, session)


class LocalToolRunner:
    """A pack's tools in process over its world (see module docstring)."""

    def __init__(self, domain: ToolBackend, world: World, *, ledger: WriteLedger | None = None) -> None:
        self.domain = domain
        self.world = world
        self.ledger: WriteLedger = ledger if ledger is not None else MemoryLedger()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._write_lock = asyncio.Lock()

    @property
    def write_tools(self) -> frozenset[str]:
        """The pack's write tools (:func:`write_tools_of`): every one runs through the gated write path."""
        return write_tools_of(self.domain)

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        """Run ``name`` with the session's facts; a write only as the card the user confirmed
        (:func:`require_confirmed`), once per idempotency key."""
        if name in self.write_tools:
            require_confirmed(name, args, session)
            async with self._write_lock:
                return self._write(name, args, session)
        ctx = session.to_context()
        before = set(ctx.observed_ids)
        self.calls.append((name, dict(args)))
        out = self.domain.invoke(name, args, ctx, self.world)
        return ToolCallResult(observation=out.observation, reason=out.reason,
                              observed_ids=sorted(ctx.observed_ids - before))

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        """Eligibility as if confirmed, then grounding; the world is not touched."""
        reason = self.domain.precheck(name, args, session.to_context(), self.world)
        if reason is None:
            missing = self.ungrounded(name, args, session)
            if missing:
                return f"{UNGROUNDED}:{','.join(missing)}"
        return reason

    def ungrounded(self, name: str, args: dict[str, Any], session: ToolSession) -> list[str]:
        """Arguments of a write that are neither the user's words nor the authenticated user's records."""
        if name not in self.write_tools or not session.authenticated_user_id:
            return []
        return self.domain.ungrounded(name, args, session.user_texts, self.world, session.authenticated_user_id)

    def _write(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        # No await inside: once a write starts, cancellation cannot split its commit from its swap.
        key = session.idempotency_key
        request = call_digest(name, args)
        if key is not None:
            prior = self.ledger.recorded(key)
            if prior is not None:
                return _replay(prior, request)
        self.calls.append((name, dict(args)))
        ctx = session.to_context()
        before = set(ctx.observed_ids)
        missing = self.ungrounded(name, args, session)
        changed: dict[str, list[str]] = {}
        trial = self.world
        if missing:
            result = _refusal(name, args, UNGROUNDED, f"arguments not grounded in the user's words or records: {missing}")
        else:
            scope = self.world.write_scope(name, args, ctx.authenticated_user_id)
            trial = self.world.fork(scope)
            out = self.domain.invoke(name, args, ctx, trial)
            # what the pack reports, and what the world itself finds changed on the fork (the pack's
            # bookkeeping may be silent: a world of records knows)
            found = {k: set(v) for k, v in out.changed.items() if v}
            for kind, keys in self.world.diff(trial, scope).items():
                found.setdefault(kind, set()).update(keys)
            changed = {k: sorted(v) for k, v in found.items() if v}
            if not scope.admits(changed, self.world):
                raise ToolError(f"write {name!r} changed entities outside what it may change (its scope)")
            result = ToolCallResult(observation=out.observation, reason=out.reason, changed=changed,
                                    observed_ids=sorted(ctx.observed_ids - before))
        entry = None if key is None else LedgerEntry(key=key, session_id=session.session_id, tool=name,
                                                      request=request, outcome=result)
        if entry is not None or changed:
            try:
                prior = self.ledger.commit_write(entry, trial, changed, fence=session.fence)
            except LeaseLost:
                raise  # another turn holds the session now: nothing was written, and this turn is told so
            except Exception as exc:
                raise ToolError(f"the write {name!r} could not be recorded; nothing was changed",
                                details={"tool": name, "reason": "commit_failed"}) from exc
            if prior is not None:
                return _replay(prior, request)
        if changed:
            self.world.adopt(trial, changed)
        return result



def _refusal(name: str, args: dict[str, Any], reason: str, message: str) -> ToolCallResult:
    obs = ToolObservation(tool=name, args=dict(args), ok=False, error_code="ineligible_action",
                          error_message=f"{message} [{reason}]")
    return ToolCallResult(observation=obs, reason=reason)


def _replay(prior: LedgerEntry, request: str) -> ToolCallResult:
    if prior.request != request:
        raise ToolError("the idempotency key was already used for a different write",
                        details={"reason": "idempotency_key_reused", "tool": prior.tool})
    return prior.outcome.model_copy(update={"replayed": True})
