"""Replay: a turn's logged decisions reproduced from its events and stored metas, byte for byte.

::

    replay_decisions   every ``<prefix>.phi`` lookup re-run on its logged snapshot against the rule
                       tables (outcome, tool calls, ``then``), and every ``<prefix>.step``'s logged model
                       output re-parsed against its logged offer — the decision must come out the same
    replay_w3          every W3 guidance pick re-run from the stored ``answer.meta`` records (the last
                       K before it) with the session's seed: canonical JSON compared byte for byte
    playback ports     a model client and a tool port that play a turn's logged outputs back (a family
                       that re-runs its whole decision loop from its events uses them: ``dr``)

Used by ``tandem replay`` (``serve/replay.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.errors import ModelTimeout, ModelUnavailable, ToolError, ToolTimeout
from pipelines.protocols import ModelCall
from pipelines.sgc.canonical import canonical_json, session_seed
from pipelines.sgc.phi import PhiTable, phi_lookup
from pipelines.sgc.snapshot import Snapshot
from pipelines.sgc.tables import RuleTables
from pipelines.sgc.w3 import HISTORY_WINDOW, AnswerMeta

from .decisions import DecisionError, Offer, parse_decision
from .kernels import decide_w3
from .ports import ToolCallResult, ToolSession

__all__ = ["TurnReplay", "replay_decisions", "ReplayedTurn", "replay_w3", "all_identical", "normalize_events",
           "PlaybackModels", "PlaybackTools"]


class TurnReplay(BaseModel):
    """How many decisions of a turn were re-run, and which came out different."""

    model_config = ConfigDict(extra="forbid")

    decisions: int = 0
    mismatches: list[str] = Field(default_factory=list)

    @property
    def identical(self) -> bool:
        return self.decisions > 0 and not self.mismatches


def normalize_events(events: Iterable[Any]) -> list[dict[str, Any]]:
    """Events as ``{"kind": ..., **fields}`` dicts (accepts dicts or ``(kind, fields)`` pairs)."""
    out: list[dict[str, Any]] = []
    for e in events:
        if isinstance(e, dict):
            out.append(dict(e))
        else:
            kind, fields = e
            out.append({"kind": kind, **fields})
    return out


def replay_decisions(events: Iterable[Any], phi: PhiTable | None, *,
                     prefixes: Sequence[str] = ("tandem", "dr")) -> TurnReplay:
    """Re-run the Φ lookups (when ``phi`` is given) and re-parse the steps of one turn's events."""
    out = TurnReplay()
    phis = {f"{p}.phi" for p in prefixes}
    steps = {f"{p}.step" for p in prefixes}
    for ev in normalize_events(events):
        kind = ev.get("kind")
        if kind in phis and phi is not None and "snapshot" in ev:
            out.decisions += 1
            if ev.get("table_version") and ev["table_version"] != phi.version:
                out.mismatches.append(f"phi: tables {phi.version!r} != logged {ev['table_version']!r}")
                continue
            res = phi_lookup(phi, ev["intent"], ev["sub_intent"], Snapshot.of(ev.get("snapshot") or {}))
            again = {"outcome": res.kind, "calls": [c.model_dump() for c in res.tools], "then": res.then}
            logged = {"outcome": ev.get("outcome"), "calls": ev.get("calls", []), "then": ev.get("then")}
            if again != logged:
                out.mismatches.append(f"phi {ev['intent']}/{ev['sub_intent']}: {again} != {logged}")
        elif kind in steps and ev.get("raw") and "offer" in ev:
            out.decisions += 1
            try:
                again = parse_decision(ev["raw"], Offer.of_summary(ev.get("offer") or {}))
            except DecisionError as exc:
                if ev.get("decision") is not None:
                    out.mismatches.append(f"step {ev.get('step')}: {exc}")
                continue
            if again != ev.get("decision"):
                out.mismatches.append(f"step {ev.get('step')}: {again} != {ev.get('decision')}")
    return out


class ReplayedTurn(BaseModel):
    """One stored W3 decision, re-run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    position: int
    turn_index: int | None
    identical: bool
    stored: str | None = None
    replayed: str | None = None
    reason: str = ""


def _meta_of(turn: Any) -> Mapping[str, Any]:
    """A stored turn's meta: a TurnRecord, or its ``meta`` dict."""
    meta = getattr(turn, "meta", turn)
    return meta if isinstance(meta, Mapping) else {}


def replay_w3(stored_turn_metas: Sequence[Any], session_seed_value: int | None = None, *, tables: RuleTables,
              branch_of_intent: Mapping[str, str], session_id: str = "",
              window: int = HISTORY_WINDOW) -> list[ReplayedTurn]:
    """Re-run every stored W3 decision; one :class:`ReplayedTurn` per turn that has one.

    ``stored_turn_metas`` are the session's turns, oldest first (``TurnRecord`` objects or their ``meta``
    dicts); each holds the AnswerMeta in ``meta["w3"]`` and the decision's inputs in its family's
    ``w3_inputs``. The seed is ``session_seed_value`` when given, else derived from ``session_id``.
    """
    seed = session_seed(session_id) if session_seed_value is None else session_seed_value
    prior: list[dict[str, Any]] = []
    out: list[ReplayedTurn] = []
    for pos, turn in enumerate(stored_turn_metas):
        meta = _meta_of(turn)
        stored = meta.get("w3")
        if not isinstance(stored, Mapping):
            continue
        inputs = (meta.get("tandem") or meta.get("sgc") or {}).get("w3_inputs")
        stored_json = canonical_json(AnswerMeta.model_validate(stored))
        if not isinstance(inputs, Mapping):
            out.append(ReplayedTurn(position=pos, turn_index=stored.get("turn_index"), identical=False,
                                    stored=stored_json, reason="w3_inputs missing"))
        else:
            res = decide_w3(tables, branch_of_intent, session_id, prior[-window:], inputs["c1"],
                            inputs["candidates"], int(inputs["turn_index"]), seed=seed, window=window)
            replayed = canonical_json(res.meta)
            same = replayed == stored_json
            reason = "" if same else (
                f"rules {res.meta.table_version!r} != stored {stored.get('table_version')!r}"
                if res.meta.table_version != stored.get("table_version") else "decision differs")
            out.append(ReplayedTurn(position=pos, turn_index=int(inputs["turn_index"]), identical=same,
                                    stored=stored_json, replayed=replayed, reason=reason))
        prior.append(dict(stored))
    return out


def all_identical(results: Sequence[ReplayedTurn]) -> bool:
    return bool(results) and all(r.identical for r in results)


class PlaybackModels:
    """A model client that plays logged outputs back in order; past them it fails as the turn did."""

    def __init__(self, outputs: list[str], failure: str | None) -> None:
        self.outputs = outputs
        self.failure = failure

    async def stream(self, role: str, call: ModelCall) -> AsyncIterator[str]:
        if not self.outputs:
            raise ModelTimeout("replayed timeout") if self.failure == "model_timeout" else ModelUnavailable("replayed")
        yield self.outputs.pop(0)


class PlaybackTools:
    """A tool port that plays logged results back (``{"tool", "args", "result"}`` / ``{"tool", "reason"}``),
    noting every call that differs from the logged one."""

    def __init__(self, results: list[dict[str, Any]], prechecks: list[dict[str, Any]], failure: str | None) -> None:
        self.results = results
        self.prechecks = prechecks
        self.failure = failure
        self.mismatches: list[str] = []

    def _fail(self, name: str) -> Exception:
        if self.failure == "tool_timeout":
            return ToolTimeout(f"replayed timeout of {name}")
        return ToolError(f"replayed failure of {name}")

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        if not self.results:
            raise self._fail(name)
        logged = self.results.pop(0)
        if logged["tool"] != name or logged["args"] != args:
            self.mismatches.append(f"tool call {name} {args} != logged {logged['tool']} {logged['args']}")
        return ToolCallResult.model_validate(logged["result"])

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        if not self.prechecks:
            raise self._fail(name)
        logged = self.prechecks.pop(0)
        if logged["tool"] != name:
            self.mismatches.append(f"precheck {name} != logged {logged['tool']}")
        return logged["reason"]
