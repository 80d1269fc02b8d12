"""The what-if: every logged session re-decided twice, as served (baseline) and under the candidate, turn by turn.

::

    Setup          one side: how its pipeline is built from the playback ports, its guard, its rule
                   kernels and tables, and which model roles (if any) it re-runs on a live client
    rerun_session  the session's turns in order through the real turn runner and pipeline on the playback
                   ports (each turn reads the history its own side wrote), one :class:`TurnRun` per turn
    what_if        the candidate over every session, and the baseline wherever the candidate does not
                   decide every turn as served on the logged model outputs alone; per turn the decisions
                   of both (:mod:`.decisions`) are compared kind by kind, and the baseline against the log
                   (``not_reproduced``: where the playback does not reproduce what was served)

Both sides play the same log back, so what differs between them is the candidate's doing; where the
baseline itself does not reproduce the log (a logged turn under older tables, a value the log masks) the
report says so per turn. A session the candidate decides exactly as served needs no baseline: nothing
changed there (the no-op candidate runs each session once). The report is :class:`~.report.WhatIfReport`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from pipelines.events import TurnRequest
from pipelines.protocols import ModelClient
from pipelines.sgc.tables import RuleTables
from pipelines.turn import TurnRunner

from .decisions import KINDS, changed_kinds, decisions_of, refusals, without_candidates
from .log import LoggedSession, turn_pipeline
from .playback import (
    SOURCES,
    ListSink,
    MemoryTurns,
    PlaybackGuardrails,
    PlaybackModels,
    PlaybackTools,
    SessionPlay,
    playing,
)
from .report import Change, KindCount, WhatIfReport, responsible

__all__ = ["Setup", "TurnRun", "rerun_session", "what_if", "replayable"]


@dataclass
class Setup:
    """One side of a what-if (see module docstring). ``build(models, tools, guardrails, kernels)`` returns the
    turn pipeline; ``facets`` name what this side changes (for the report's "responsible" column)."""

    label: str
    build: Callable[[Any, Any, Any, Any], Any]
    guardrails: Any
    kernels: Any
    tables: RuleTables
    live: ModelClient | None = None
    live_roles: tuple[str, ...] = ()
    rerun_changed: bool = False
    prefix: str = "tandem"
    facets: list[str] = field(default_factory=list)
    history_turns: int = 20
    deadline_s: float = 60.0

    def pipeline(self) -> Any:
        models = PlaybackModels(self.live, live_roles=self.live_roles, rerun_changed=self.rerun_changed)
        return self.build(models, PlaybackTools(), PlaybackGuardrails(self.guardrails), self.kernels)


@dataclass
class TurnRun:
    """One re-decided turn: its events, its decisions, the redacted text, where its model outputs came from."""

    turn_id: str
    index: int
    events: list[dict[str, Any]]
    decisions: dict[str, Any]
    text: str
    calls: list[dict[str, Any]]
    notes: list[str]


async def rerun_session(session: LoggedSession, setup: Setup, pipeline: Any) -> list[TurnRun]:
    """The session's turns re-decided in order on ``pipeline`` (built by ``setup``) over the playback ports."""
    sink, store = ListSink(), MemoryTurns()
    runner = TurnRunner(pipeline, store, sink=sink, max_history_turns=setup.history_turns,
                        deadline_s=setup.deadline_s)
    out: list[TurnRun] = []
    with playing(SessionPlay(session, prefix=setup.prefix)) as play:
        for turn in session.turns:
            play.begin(turn)
            start = len(sink.events)
            try:
                req = TurnRequest(text=turn.text, locale=turn.locale, user_id=turn.user_id)
            except ValidationError as exc:
                play.notes.append(f"request refused before the turn: {exc.errors()[0]['msg']}")
            else:
                async for _ in runner.run(session.session_id, req, trace_id="whatif", turn_id=turn.turn_id):
                    pass
            events = sink.events[start:]
            out.append(TurnRun(turn.turn_id, turn.index, events,
                               decisions_of(events, prefix=setup.prefix, step_schemas=list(play.schemas)),
                               play.text, list(play.calls), list(play.notes)))
    return out


def replayable(session: LoggedSession, prefix: str = "tandem") -> str | None:
    """Why a session cannot be re-decided (``None``: it can): a turn with no events, a turn of another
    pipeline kind, or a turn whose model calls were not logged."""
    for t in session.turns:
        if not t.events:
            return f"turn {t.index} ({t.turn_id}) has no logged events"
        kind = turn_pipeline(t)
        if kind is not None and kind != prefix:
            return f"turn {t.index} ran the {kind!r} pipeline (the what-if re-decides {prefix!r} turns)"
        if t.of(f"{prefix}.w1", f"{prefix}.step") and not t.of("model.call"):
            return f"turn {t.index} ({t.turn_id}) was logged before model calls were recorded"
    return None


def _as_served(session: LoggedSession, runs: Sequence[TurnRun], prefix: str) -> bool:
    """Whether a re-run decided every turn as the log has it, on the logged model outputs alone (then the
    other side, run on the same log, has nothing to tell apart and need not run)."""
    return all(not changed_kinds(decisions_of(t.events, prefix=prefix), without_candidates(r.decisions))
               and all(x["source"] == "logged" for x in r.calls) for t, r in zip(session.turns, runs, strict=True))


def _sources(runs: Sequence[TurnRun]) -> dict[str, int]:
    counts = dict.fromkeys(SOURCES, 0)
    for r in runs:
        for c in r.calls:
            counts[c["source"]] = counts.get(c["source"], 0) + 1
    return counts


async def what_if(sessions: Sequence[LoggedSession], base: Setup, cand: Setup, *, concurrency: int = 1,
                  keep: int | None = None, describe: dict[str, Any] | None = None) -> WhatIfReport:
    """Re-decide ``sessions`` under ``base`` and ``cand`` and compare (see module docstring).

    ``concurrency`` sessions run at once (with a live model, their calls batch on the engine); ``keep``
    bounds the changes listed (every change is counted)."""
    t0 = time.perf_counter()
    base_pipe, cand_pipe = base.pipeline(), cand.pipeline()
    report = WhatIfReport(turns=sum(len(s.turns) for s in sessions), by_kind={k: KindCount() for k in KINDS},
                          candidate=describe or {"facets": cand.facets})
    gate = asyncio.Semaphore(max(1, concurrency))
    cand_runs: list[TurnRun] = []

    async def one(session: LoggedSession) -> tuple[LoggedSession, list[TurnRun] | None, list[TurnRun]] | None:
        why = replayable(session, base.prefix)
        if why is not None:
            report.skipped.append({"session_id": session.session_id, "why": why})
            return None
        async with gate:
            c = await rerun_session(session, cand, cand_pipe)
            if _as_served(session, c, base.prefix):
                return session, None, c  # every turn decided as served, every model output the logged one
            return session, await rerun_session(session, base, base_pipe), c

    results = await asyncio.gather(*(one(s) for s in sessions))
    for res in results:
        if res is None:
            continue
        session, b_runs, c_runs = res
        cand_runs += c_runs
        report.baseline_runs += b_runs is not None
        earlier: int | None = None
        for turn, b, c in zip(session.turns, b_runs or c_runs, c_runs, strict=True):
            report.replayed += 1
            report.estimated += any(x["source"] in ("estimated", "missing") for x in c.calls)
            logged = decisions_of(turn.events, prefix=base.prefix)
            off = changed_kinds(logged, without_candidates(b.decisions))
            if off:
                report.not_reproduced.append({"session_id": session.session_id, "turn_id": turn.turn_id,
                                              "turn": turn.index, "kinds": off})
            kinds = changed_kinds(b.decisions, c.decisions)
            for k in KINDS:
                report.count(k, "changed" if k in kinds else "same")
            if not kinds:
                continue
            report.changed += 1
            new_refusals = sorted(refusals(c.decisions) - refusals(b.decisions))
            escalated = c.decisions.get("escalation") is not None and b.decisions.get("escalation") is None
            report.newly_refused += bool(new_refusals)
            report.newly_escalated += escalated
            sources = _sources([c])
            rules = responsible(kinds, b.decisions, c.decisions, base.tables, cand.tables)
            if not rules:  # no table row or rule names it: the candidate's other changes (a pack, a model…)
                rules += cand.facets
            if earlier is not None:
                rules.append(f"turn {earlier} of the session changed before it (its history differs)")
            if sources["live"]:
                rules.append(f"{sources['live']} model call(s) re-run live ({', '.join(cand.live_roles) or 'changed'})")
            if sources["estimated"]:
                rules.append(f"{sources['estimated']} model call(s) with a changed input took the logged output")
            if keep is None or len(report.changes) < keep:
                report.changes.append(Change(
                    session_id=session.session_id, turn_id=turn.turn_id, turn=turn.index, text=c.text or b.text,
                    kinds=kinds, before={k: b.decisions.get(k) for k in kinds},
                    after={k: c.decisions.get(k) for k in kinds}, rules=rules, newly_refused=new_refusals,
                    newly_escalated=escalated, model_calls=sources, notes=sorted(set(b.notes + c.notes))))
            earlier = turn.index if earlier is None else earlier
    report.model_calls = _sources(cand_runs)
    report.wall_s = round(time.perf_counter() - t0, 3)
    report.turns_per_min = round(report.replayed / report.wall_s * 60, 1) if report.wall_s > 0 else None
    return report
