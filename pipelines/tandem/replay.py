"""Replay of a tandem turn's logged decisions (used by ``tandem replay``).

From the turn's events alone: every Φ lookup is re-run on its logged snapshot
against the rule tables (outcome, tool calls, ``then``), and every orchestrator
step's logged model output is re-parsed against its logged offer — the decision
must come out identical. W3 picks replay from the stored metas
(:func:`pipelines.annex.sgc_ladder.replay_w3`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.core.decisions import DecisionError, Offer, parse_decision
from pipelines.sgc.phi import PhiTable, phi_lookup
from pipelines.sgc.snapshot import Snapshot

__all__ = ["TurnReplay", "replay_turn"]


class TurnReplay(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decisions: int = 0
    mismatches: list[str] = Field(default_factory=list)

    @property
    def identical(self) -> bool:
        return self.decisions > 0 and not self.mismatches


def _offer(summary: dict[str, Any]) -> Offer:
    return Offer(tools={t: {} for t in summary.get("tools", [])},
                 cards={c: (None, {}) for c in summary.get("cards", [])},
                 clarify=list(summary.get("clarify", [])), select_ids=list(summary.get("select", [])),
                 respond=bool(summary.get("respond", True)), select=bool(summary.get("select_allowed", True)),
                 escalate=bool(summary.get("escalate", True)))


def replay_turn(events: Sequence[dict[str, Any]], phi: PhiTable) -> TurnReplay:
    """Re-run the Φ lookups and orchestrator steps of one turn's events."""
    out = TurnReplay()
    for ev in events:
        if ev.get("kind") == "tandem.phi":
            out.decisions += 1
            if ev.get("table_version") and ev["table_version"] != phi.version:
                out.mismatches.append(f"phi: tables {phi.version!r} != logged {ev['table_version']!r}")
                continue
            res = phi_lookup(phi, ev["intent"], ev["sub_intent"], Snapshot.of(ev.get("snapshot") or {}))
            again = {"outcome": res.kind, "calls": [c.model_dump() for c in res.tools], "then": res.then}
            logged = {"outcome": ev.get("outcome"), "calls": ev.get("calls", []), "then": ev.get("then")}
            if again != logged:
                out.mismatches.append(f"phi {ev['intent']}/{ev['sub_intent']}: {again} != {logged}")
        elif ev.get("kind") == "tandem.step" and ev.get("raw"):
            out.decisions += 1
            try:
                again = parse_decision(ev["raw"], _offer(ev.get("offer") or {}))
            except DecisionError as exc:
                again = None
                if ev.get("decision") is not None:
                    out.mismatches.append(f"step {ev.get('step')}: {exc}")
                continue
            if again != ev.get("decision"):
                out.mismatches.append(f"step {ev.get('step')}: {again} != {ev.get('decision')}")
    return out
