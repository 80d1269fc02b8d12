"""What a what-if found: the counts per decision kind, the changed turns, and the gate a CI run applies.

::

    WhatIfReport   ``turns`` logged, ``replayed`` (re-decided), ``changed`` (turns with any changed decision),
                   ``by_kind`` {kind: {same, changed}}, ``newly_refused`` / ``newly_escalated`` turns,
                   ``estimated`` (turns that took a logged model output for a call whose input changed),
                   ``changes`` (per turn: the redacted text, both decisions of each changed kind, the rule or
                   row responsible), ``not_reproduced`` (turns whose baseline re-run differs from the log),
                   ``model_calls`` (where the candidate's model outputs came from), ``skipped`` sessions
    responsible    the Φ row hit on each side, the Ψ rules fired or edited, the tiers, the W3 table (each when
                   the candidate changed that table), the guard rules and gate refusals
    Gate           ``--fail-on card,escalation>2,gate>5%``: a kind (or ``refused`` / ``escalated`` / ``any``)
                   and a bound; :func:`tripped` names the gates a report crosses
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.errors import InvalidInput
from pipelines.sgc.phi import PhiTable
from pipelines.sgc.tables import RuleTables

from .decisions import KINDS

__all__ = ["KindCount", "Change", "WhatIfReport", "responsible", "phi_row", "Gate", "parse_gates", "tripped"]


class KindCount(BaseModel):
    same: int = 0
    changed: int = 0


class Change(BaseModel):
    """One turn whose decisions changed (every text redacted: vault placeholders, personal fields masked)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    turn_id: str
    turn: int
    text: str
    kinds: list[str]
    before: dict[str, Any]
    after: dict[str, Any]
    rules: list[str] = Field(default_factory=list, description="The rule, row or change responsible.")
    newly_refused: list[str] = Field(default_factory=list)
    newly_escalated: bool = False
    model_calls: dict[str, int] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class WhatIfReport(BaseModel):
    """The result of one what-if (see module docstring); ``model_dump(mode="json")`` is ``whatif.json``."""

    model_config = ConfigDict(extra="forbid")

    turns: int = 0
    replayed: int = 0
    changed: int = 0
    by_kind: dict[str, KindCount] = Field(default_factory=lambda: {k: KindCount() for k in KINDS})
    newly_refused: int = 0
    newly_escalated: int = 0
    estimated: int = Field(0, description="Turns whose candidate re-run took a logged output for a model call "
                           "whose input it changed (or found none): their decisions are an estimate.")
    baseline_runs: int = Field(0, description="Sessions re-run as served too (the others the candidate "
                               "decided exactly as served).")
    changes: list[Change] = Field(default_factory=list)
    not_reproduced: list[dict[str, Any]] = Field(default_factory=list)
    model_calls: dict[str, int] = Field(default_factory=dict)
    skipped: list[dict[str, str]] = Field(default_factory=list)
    candidate: dict[str, Any] = Field(default_factory=dict)
    wall_s: float = 0.0
    turns_per_min: float | None = None

    def count(self, kind: str, outcome: str) -> None:
        setattr(self.by_kind[kind], outcome, getattr(self.by_kind[kind], outcome) + 1)


def phi_row(table: PhiTable, intent: str | None, sub_intent: str | None, state: Iterable[str]) -> str:
    """The Φ row a lookup hits with these snapshot keys, described (``no row``: a miss)."""
    keys = set(state)
    for i, r in enumerate(table.rows):
        if r.intent == intent and r.sub_intent == sub_intent and set(r.state_keys()) <= keys:
            tools = ", ".join(t.tool for t in r.tools) or "no tools"
            needs = ", ".join(r.requires_state) or "nothing"
            return f"phi.rows.{i} (needs {needs}; {tools}; then {r.then or 'orchestrate'})"
    return f"no row of {table.version} for {intent}/{sub_intent}"


def _set_diff(before: Iterable[str], after: Iterable[str]) -> str:
    b, a = set(before), set(after)
    return " ".join([f"+{x}" for x in sorted(a - b)] + [f"-{x}" for x in sorted(b - a)]) or "same set"


def responsible(kinds: Sequence[str], before: Mapping[str, Any], after: Mapping[str, Any], base: RuleTables,
                cand: RuleTables) -> list[str]:
    """The rules behind a turn's changed decisions, as far as the tables tell (see module docstring)."""
    out: list[str] = []
    if "phi" in kinds:
        for b, a in zip(before.get("phi") or [], after.get("phi") or [], strict=False):
            rb = phi_row(base.phi, b.get("intent"), b.get("sub_intent"), b.get("state") or [])
            ra = phi_row(cand.phi, a.get("intent"), a.get("sub_intent"), a.get("state") or [])
            if (rb, b.get("then"), b.get("calls")) != (ra, a.get("then"), a.get("calls")):
                out.append(f"Φ {a.get('intent')}/{a.get('sub_intent')}: {rb} ({base.phi.version}) → {ra} "
                           f"({cand.phi.version})")
    pb, pa = before.get("paragraphs") or {}, after.get("paragraphs") or {}
    psi_moved = "paragraphs" in kinds and base.psi != cand.psi  # else the plan follows from other decisions
    if psi_moved and pb.get("psi_fired") != pa.get("psi_fired"):
        out.append(f"Ψ rules fired ({base.psi.version} → {cand.psi.version}): "
                   f"{_set_diff(pb.get('psi_fired') or [], pa.get('psi_fired') or [])}")
    if psi_moved:
        old, new = {r.id: r for r in base.psi.rules}, {r.id: r for r in cand.psi.rules}
        edited = sorted(i for i in set(pb.get("psi_fired") or []) | set(pa.get("psi_fired") or [])
                        if i in old and i in new and old[i] != new[i])
        if edited:
            out.append(f"Ψ rule(s) {', '.join(edited)} changed ({base.psi.version} → {cand.psi.version})")
    tiers = [f"{c.get('kind')} {c.get('tier')} → {d.get('tier')}" for c, d in
             zip(pb.get("conflicts") or [], pa.get("conflicts") or [], strict=False) if c.get("tier") != d.get("tier")]
    if "paragraphs" in kinds and tiers and base.tiers != cand.tiers:
        out.append(f"tiers ({base.tiers.version} → {cand.tiers.version}): {', '.join(tiers)}")
    if "guidance" in kinds and base.w3 != cand.w3:
        gb, ga = before.get("guidance") or {}, after.get("guidance") or {}
        out.append(f"W3 {gb.get('table_version')} → {ga.get('table_version')}: pick {gb.get('pick')} → {ga.get('pick')}")
    if "guard" in kinds:
        hb = ((before.get("guard") or {}).get("pre") or {}).get("hits") or []
        ha = ((after.get("guard") or {}).get("pre") or {}).get("hits") or []
        if hb != ha:
            out.append(f"guard rules: {_set_diff(hb, ha)}")
    if "gate" in kinds:
        kb = [k for g in before.get("gate") or [] for k in g.get("kinds") or []]
        ka = [k for g in after.get("gate") or [] for k in g.get("kinds") or []]
        out.append(f"sentence gate refusals: {_set_diff(kb, ka)}")
    return out


class Gate(BaseModel):
    """One ``--fail-on`` bound: more than ``count`` turns (or ``percent`` of the re-decided ones) changed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    count: int = 0
    percent: float | None = None

    def crossed(self, report: WhatIfReport) -> int | None:
        """The number of turns that crosses the bound, or ``None``."""
        if self.kind == "any":
            n = report.changed
        elif self.kind == "refused":
            n = report.newly_refused
        elif self.kind == "escalated":
            n = report.newly_escalated
        else:
            n = report.by_kind[self.kind].changed
        limit = self.count if self.percent is None else self.percent / 100 * max(report.replayed, 1)
        return n if n > limit else None


_GATE = re.compile(r"^(?P<kind>[a-z_]+)(?:>(?P<n>\d+(?:\.\d+)?)(?P<pct>%)?)?$")
GATE_KINDS = (*KINDS, "any", "refused", "escalated")


def parse_gates(spec: str) -> list[Gate]:
    """``card,escalation>2,gate>5%`` as gates; raises :class:`InvalidInput` naming a bad entry."""
    gates = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        m = _GATE.match(part)
        if m is None or m["kind"] not in GATE_KINDS:
            raise InvalidInput(f"--fail-on: {part!r} is not KIND, KIND>N or KIND>P% with KIND one of "
                               f"{', '.join(GATE_KINDS)}", details={"entry": part})
        n = m["n"]
        if m["pct"]:
            gates.append(Gate(kind=m["kind"], percent=float(n)))
        elif n is not None and "." in n:
            raise InvalidInput(f"--fail-on: {part!r}: a count is a whole number", details={"entry": part})
        else:
            gates.append(Gate(kind=m["kind"], count=int(n or 0)))
    return gates


def tripped(report: WhatIfReport, gates: Sequence[Gate]) -> list[str]:
    """The gates the report crosses, each described (empty: the change may ship)."""
    out = []
    for g in gates:
        n = g.crossed(report)
        if n is not None:
            bound = f"{g.percent:g}% of {report.replayed}" if g.percent is not None else str(g.count)
            out.append(f"{g.kind}: {n} turn(s) changed, more than {bound}")
    return out
