"""Replay a DR turn from its logged events and check that every decision comes out the same.

The ``dr.start`` event holds the turn's inputs (redacted text, session facts,
pending action, confirmation, route, guard flags, loop settings); ``dr.step``
holds each raw model output; ``dr.tool`` / ``dr.precheck`` hold each tool
result. :func:`replay_turn` feeds those back into a fresh
:class:`~pipelines.annex.dr.orchestrator.Orchestrator` (the core's playback ports,
:mod:`pipelines.core.replay`: a model that plays the logged outputs, a tool port that
plays the logged results; a vault that maps each placeholder to itself) and
compares the decision trace — routes, parsed decisions, tool calls, mid-guard refusals, prechecks, fallbacks and the
outcome with the resulting facts — event by event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.annex.dr.inputs import OrchestratorInput, OrchestratorSettings
from pipelines.annex.dr.state import SessionFacts
from pipelines.annex.rungpack import RungPack
from pipelines.core.contract import PendingCard
from pipelines.core.replay import PlaybackModels, PlaybackTools, normalize_events
from pipelines.counters import Counters
from pipelines.guardrails.pii import Vault

from .orchestrator import Orchestrator

__all__ = ["ReplayReport", "decision_trace", "replay_turn"]

TRACE_KINDS = ("dr.route", "dr.step", "dr.tool", "dr.guard", "dr.precheck", "dr.fallback", "dr.outcome")
_DROP = {"turn_id", "raw", "ts", "component", "trace_id", "pipeline"}  # envelope fields added by event sinks


class ReplayReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turn_id: str
    identical: bool
    logged: list[dict[str, Any]] = Field(default_factory=list)
    replayed: list[dict[str, Any]] = Field(default_factory=list)
    mismatches: list[str] = Field(default_factory=list)


def decision_trace(events: Iterable[Any]) -> list[dict[str, Any]]:
    """The comparable decisions of a turn: DR events of the orchestration, minus volatile fields."""
    trace = []
    for e in normalize_events(events):
        if e.get("kind") not in TRACE_KINDS or (e["kind"] == "dr.guard" and e.get("stage") == "post"):
            continue
        trace.append({k: v for k, v in e.items() if k not in _DROP})
    return trace


async def replay_turn(events: Iterable[Any], domain: RungPack) -> ReplayReport:
    """Re-run the orchestrator's decisions of one turn from its events; report whether they match."""
    evs = normalize_events(events)
    start = next((e for e in evs if e.get("kind") == "dr.start"), None)
    if start is None:
        return ReplayReport(turn_id="", identical=False, mismatches=["no dr.start event"])
    fb = next((e for e in evs if e.get("kind") == "dr.fallback"), None)
    failure = fb["trigger"] if fb else None
    settings = OrchestratorSettings(
        max_steps=start["max_steps"], seed=start["seed"], model_timeout_s=None, tool_timeout_s=None,
        open_tools=tuple(start["open_tools"]), private_reads=tuple(start["private_reads"]),
    )
    models = PlaybackModels([e["raw"] for e in evs if e.get("kind") == "dr.step"], failure)
    tools = PlaybackTools(
        [e for e in evs if e.get("kind") == "dr.tool"], [e for e in evs if e.get("kind") == "dr.precheck"], failure
    )
    vault = Vault.from_entries({p: p for p in start["vault_ids"]})
    inp = OrchestratorInput(
        session_id=start.get("session_id", ""), turn_id=start["turn_id"], user_text=start["user_text"],
        facts=SessionFacts.model_validate(start["facts"]), vault=vault, locale=start.get("locale", "en"),
        pending=PendingCard.model_validate(start["pending"]) if start["pending"] else None,
        confirmation=start["confirmation"], route=start["route"], route_rule=start["route_rule"],
        blocked=start["blocked"], block_rules=list(start["block_rules"]),
    )
    replayed: list[tuple[str, dict[str, Any]]] = []

    def emit(event: str, /, **fields: Any) -> None:
        replayed.append((event, {"turn_id": inp.turn_id, **vault.redact_obj(fields)}))

    orch = Orchestrator(domain, models, tools, counters=Counters(), settings=settings)
    await orch.run(inp, emit)
    logged_trace = decision_trace(evs)
    replay_trace = decision_trace(replayed)
    mismatches = list(tools.mismatches)
    for i, (a, b) in enumerate(zip(logged_trace, replay_trace, strict=False)):
        if a != b:
            mismatches.append(f"event {i}: logged {a.get('kind')} differs from replayed {b.get('kind')}")
    if len(logged_trace) != len(replay_trace):
        mismatches.append(f"logged {len(logged_trace)} decisions, replayed {len(replay_trace)}")
    return ReplayReport(
        turn_id=inp.turn_id, identical=not mismatches, logged=logged_trace, replayed=replay_trace,
        mismatches=mismatches,
    )
