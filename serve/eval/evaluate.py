"""One pipeline over its suites: every turn sent through the public API, judged, one row per turn.

:class:`Evaluator` holds what a run shares (the app's URL, the event log, the domain's
vocabulary and world); :meth:`Evaluator.run_case` plays one session turn by turn and
returns its rows. A row carries the client's timings, the turn's facts
(:func:`serve.eval.scoring.analyse_turn`), the decision score, the safety measures, and the
measures of the pack's own judge (``measures``; ``None`` where a measure cannot be judged: no
decision events for the kind, or no event log).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipelines.core.domain import Domain
from pipelines.core.evaluation import AssistantTurn, PackEvaluation, TurnView, evaluation_of

from .measures import (
    SessionLedger,
    delivered_text,
    delivered_unselected_actions,
    domain_vocabulary,
    invented_arguments,
    request_texts,
    unrequested_cards,
)
from .runner import EventLog, run_turn, session_turns
from .scoring import DECIDING_KINDS, analyse_turn, score
from .suites import Case, EvalTurn

__all__ = ["Evaluator", "META_KEYS", "initial_status", "intent_matches", "session_id"]

#: The key of a kind's own record in a stored turn's meta.
META_KEYS = {"tandem": "tandem", "dr": "dr"}


def _tool_records(kind: str, log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turn's tool calls (``confirmed``, ``ok``, the redacted ``result``) from its events."""
    out = []
    for e in log:
        if e["kind"] == "tandem.tool" and kind == "tandem":
            out.append({"confirmed": bool(e.get("confirmed")), "ok": bool(e.get("ok")), "result": e.get("result")})
        elif e["kind"] == "dr.tool" and kind == "dr":
            obs = (e.get("result") or {}).get("observation") or {}
            out.append({"confirmed": bool(e.get("confirmed")), "ok": bool(obs.get("ok")), "result": obs.get("result")})
    return out


@functools.lru_cache(maxsize=2)
def _tau2_data(base_dir: str) -> tuple[dict[str, Any], dict[str, Any]]:
    import json
    from pathlib import Path

    tasks = json.loads((Path(base_dir) / "tasks_train.json").read_text())
    db = json.loads((Path(base_dir) / "db.json").read_text())
    return {str(t["id"]): t for t in tasks}, db


def _tau2_task(base_dir: str, task_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    tasks, db = _tau2_data(base_dir)
    return tasks[task_id], db


def _confirmed_writes(kind: str, log: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The confirmed tool calls that succeeded in one turn: ``(tool, args)``."""
    out = []
    for e in log:
        if e["kind"] == f"{kind}.tool" and e.get("confirmed"):
            ok = e.get("ok") if kind == "tandem" else ((e.get("result") or {}).get("observation") or {}).get("ok")
            if ok:
                out.append((str(e.get("tool")), dict(e.get("args") or {})))
    return out


def _split(text: str) -> list[str]:
    return [x.strip() for x in str(text).split(",") if x.strip()]


def _expected(card: tuple[str, dict[str, Any]], tools: dict[str, str], writes: Any) -> bool:
    """Whether a shown card is one of the task's expected writes (its tool and arguments)."""
    from pipelines.core.tau2_user import same_arguments

    tool = tools.get(card[0])
    return any(a["name"] == tool and same_arguments(card[1], a["arguments"]) for _, a in writes)


def intent_matches(pack: Domain, label: str | None, intent: str | None, sub_intent: str | None = None,
                   kit: PackEvaluation | None = None) -> bool | None:
    """Whether a perceived intent fits a tau2 task's intent label (``None``: nothing to judge).

    ``status only`` fits an intent that offers no card; a change label fits the intent of
    the pack card whose tool is the label's write (any of them, when several tools share a label).
    """
    if label is None or intent is None:
        return None
    card_intents = {getattr(c, "intent", None) for c in pack.cards if c.kind == "write"} - {None}
    if label == "status only":
        return intent not in card_intents
    tools = (kit or evaluation_of(pack)).label_tools(label)
    subs = tuple(pack.labels.get(intent, ()))

    def fits(card: Any) -> bool:
        return getattr(card, "intent", None) == intent and (len(subs) <= 1 or (bool(sub_intent) and str(sub_intent) in card.id))

    return any(fits(c) for c in pack.cards if c.tool in tools)


def session_id(kind: str, case: Case, stamp: str) -> str:
    """One session per kind, suite and case of a run (two suites may both have a case ``task-0``)."""
    return f"eval-{kind}-{case.suite}-{case.case_id}-{stamp}"[:120]


def _meta_key(kind: str) -> str:
    return META_KEYS.get(kind, "sgc" if kind.startswith("sgc") or kind == "pe_agent" else kind)


@functools.lru_cache(maxsize=4)
def _seeded_world(domain: str, seed: int) -> Any:
    from pipelines.domains import load_domain

    return load_domain(domain).new_world(seed)


def initial_status(domain: str, world_seed: int, entity: str) -> str | None:
    """A record's status in the pack's freshly seeded world (its evaluation hook reads it)."""
    import json

    world = _seeded_world(domain, world_seed)

    def lookup(kind: str, key: str) -> dict[str, Any] | None:
        return json.loads(world.entity_json(kind, key)) if world.has(kind, key) else None

    from pipelines.domains import load_domain

    return evaluation_of(load_domain(domain)).entity_status(lookup, entity)


@dataclass
class Evaluator:
    """Plays cases against one running app (see module docstring)."""

    kind: str
    domain: str
    http: str
    events: EventLog
    max_steps: int = 3
    world_seed: int = 7
    stamp: str = field(default_factory=lambda: time.strftime("%H%M%S"))
    timeout_s: float = 300.0
    api_key: str | None = None
    entity: Callable[[str, str], dict[str, Any] | None] | None = None
    # the app's world back to its seed before each whole task (None: against a running app, --http, the tasks
    # share one world and a later task may meet an earlier one's writes)
    reset: Callable[[], None] | None = None
    max_user_turns: int = 30
    user_kind: str = "instructed"
    """The scripted user of whole tasks: ``instructed`` (its instructions only) or ``informed``; several,
    comma-separated, play each task once with each (``users`` × ``perceptions``, in the order given)."""
    perception: str = "model"
    """``model``: the turn perceives; ``oracle``: each turn carries the labels of the request the user pursues;
    several, comma-separated, as ``user_kind``."""
    _pack: Domain = None  # type: ignore[assignment]  # set in __post_init__
    _kit: PackEvaluation = field(default_factory=PackEvaluation)
    _vocab: set[str] | None = None
    _client: Any = None

    def __post_init__(self) -> None:
        import httpx

        from pipelines.domains import load_domain

        self._client = httpx.Client()
        self._pack = load_domain(self.domain)
        self._kit = evaluation_of(self._pack)
        self._vocab = domain_vocabulary(self._pack)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    @property
    def logged(self) -> bool:
        return self.events.directory is not None

    def _status_of(self, entity: str, session_tools: list[dict[str, Any]]) -> str | None:
        """A record's status: live from the app's world, else after the session's last confirmed write of it,
        else in the freshly seeded world."""
        if self.entity is not None:
            try:
                status = self._kit.entity_status(self.entity, entity)
            except Exception:  # a measurement: fall back to what the session's tools returned
                status = None
            if status is not None:
                return status
        key = self._pack.entity_kind
        for t in reversed(session_tools):  # the status after the last confirmed write of that record
            result = t.get("result") or {}
            if key and t.get("confirmed") and t.get("ok") and result.get(key) == entity and result.get("status"):
                return str(result["status"])
        try:
            return initial_status(self.domain, self.world_seed, entity)
        except (NotImplementedError, TypeError, ValueError):  # a pack without a seeded world
            return None

    def run_case(self, case: Case, *, on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        """Play one session; one row per turn (a tau2 task: turns asked of its scripted user, once per user and
        perception asked for)."""
        if case.suite == "tau2-tasks":
            rows: list[dict[str, Any]] = []
            for user in _split(self.user_kind):
                for perception in _split(self.perception):
                    rows += self.run_task(case, on_row=on_row, user_kind=user, perception=perception)
            return rows
        sid = session_id(self.kind, case, self.stamp)
        ledger = SessionLedger(said_as=self._kit.said_as)
        for key in ("user_id", "opponent_id"):
            if case.info.get(key):
                ledger.observed.add(str(case.info[key]).casefold())  # the session's bound live state
        rows: list[dict[str, Any]] = []
        session_tools: list[dict[str, Any]] = []
        judge = self._kit.turn_judge(case, self.world_seed) if case.suite in self._kit.suites() else None
        for i, turn in enumerate(case.turns):
            res = run_turn(self.http, sid, turn.text, user_id=turn.user_id, timeout_s=self.timeout_s,
                           api_key=self.api_key, client=self._client)
            if turn.user_id:
                ledger.observed.add(turn.user_id.casefold())
            red = ledger.add_user_text(turn.text)
            tid = res.done.get("turn_id")
            log = self.events.turn(tid) if tid and self.logged else []
            stored = next((t for t in session_turns(self.http, sid, api_key=self.api_key, client=self._client)
                           if t.get("turn_id") == tid), {}) if tid else {}
            meta = stored.get("meta") or {}
            own = meta.get(_meta_key(self.kind)) or {}
            base: dict[str, Any] = {
                "kind": self.kind, "suite": case.suite, "case": case.case_id, "turn": i, "session_id": sid,
                "text": turn.text, "user_id": turn.user_id, "expect": turn.expect, "label": turn.label,
                "status": res.done.get("status"), "error": res.error, "turn_id": tid,
                "first_token_ms": res.first_token_ms, "first_narration_ms": res.first_narration_ms,
                "first_reply_ms": res.first_reply_ms, "first_visible_ms": res.first_visible_ms,
                "e2e_ms": round(res.e2e_ms, 1), "server": (res.done.get("timings") or {}), "info": case.info,
                "loadavg_1m": round(os.getloadavg()[0], 2),  # the box may be shared: context for the timings
            }
            try:
                row = self._judge(base, case, turn, res.events, log, own, red, ledger, session_tools)
                if i == 0 and "intent_label" in case.info:  # a tau2 opening with its task's label
                    self._intent_verdict(row, case, own)
                if judge is not None:
                    self._pack_measures(judge, row, res.events, turn, case, meta, own)
            except Exception as exc:  # a judging bug is reported on its turn; the run goes on
                row = {**base, "eval_error": f"{type(exc).__name__}: {exc}"[:300]}
            rows.append(row)
            if on_row is not None:
                on_row(row)
        return rows

    def _intent_verdict(self, row: dict[str, Any], case: Case, own: dict[str, Any]) -> None:
        """The opening's perceived intent against its task's label (``intent_ok`` ``None``: not judged — no
        label, or a kind that records no perception)."""
        label = case.info.get("intent_label")
        row["intent_label"] = label
        row["intent_ok"] = (intent_matches(self._pack, label, row.get("intent"), row.get("sub_intent"), self._kit)
                            if self.kind in META_KEYS and own else None)

    def _turn(self, case: Case, sid: str, i: int, turn: EvalTurn, ledger: SessionLedger,
              session_tools: list[dict[str, Any]], perception: tuple[str, str] | None = None
              ) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        """One turn sent and judged: its row, its SSE events, its logged events, its own meta."""
        res = run_turn(self.http, sid, turn.text, user_id=turn.user_id, timeout_s=self.timeout_s,
                       api_key=self.api_key, client=self._client, perception=perception)
        red = ledger.add_user_text(turn.text)
        tid = res.done.get("turn_id")
        log = self.events.turn(tid) if tid and self.logged else []
        stored = next((t for t in session_turns(self.http, sid, api_key=self.api_key, client=self._client)
                       if t.get("turn_id") == tid), {}) if tid else {}
        own = (stored.get("meta") or {}).get(_meta_key(self.kind)) or {}
        base: dict[str, Any] = {
            "kind": self.kind, "suite": case.suite, "case": case.case_id, "turn": i, "session_id": sid,
            "text": turn.text, "user_id": turn.user_id, "expect": None, "label": None,
            "status": res.done.get("status"), "error": res.error, "turn_id": tid,
            "first_token_ms": res.first_token_ms, "first_narration_ms": res.first_narration_ms,
            "first_reply_ms": res.first_reply_ms, "first_visible_ms": res.first_visible_ms,
            "e2e_ms": round(res.e2e_ms, 1), "server": (res.done.get("timings") or {}), "info": case.info,
            "loadavg_1m": round(os.getloadavg()[0], 2),
        }
        try:
            row = self._judge(base, case, turn, res.events, log, own, red, ledger, session_tools)
        except Exception as exc:  # a judging bug is reported on its turn; the run goes on
            row = {**base, "eval_error": f"{type(exc).__name__}: {exc}"[:300]}
        return row, res.events, log, own

    def run_task(self, case: Case, *, on_row: Callable[[dict[str, Any]], None] | None = None,
                 user_kind: str | None = None, perception: str | None = None) -> list[dict[str, Any]]:
        """Play one tau2 task with its scripted user; the last row carries the task's record (``tau2_task``)."""
        from pathlib import Path

        from .tau2_db import db_check

        base_dir = Path(case.info["tau2_dir"])
        task, db = _tau2_task(str(base_dir), case.info["task_id"])
        if self.reset is not None:
            try:
                self.reset()  # every task starts from the seeded world, as tau2's runs do
            except Exception as exc:  # never play a task on a world another task changed: report it, go on
                row = {"kind": self.kind, "suite": case.suite, "case": case.case_id, "turn": 0,
                       "eval_error": f"world reset failed: {type(exc).__name__}: {exc}"[:300],
                       "tau2_task": {"task_id": case.info["task_id"], "passed": None, "ended": "reset_failed"}}
                if on_row is not None:
                    on_row(row)
                return [row]
        user = self._kit.scripted_user(task, db, {c.id: c.tool for c in self._pack.cards}, self.max_user_turns,
                                       kind=user_kind or _split(self.user_kind)[0])
        if user is None:
            raise ValueError(f"the {self.domain} pack has no scripted user for whole tau2 tasks")
        user_kind = user_kind or _split(self.user_kind)[0]
        oracle = (perception or _split(self.perception)[0]) == "oracle" and self.kind in META_KEYS
        sid = session_id(self.kind, case, f"{self.stamp}-{user_kind[:4]}-{'o' if oracle else 'm'}")
        ledger, session_tools = SessionLedger(said_as=self._kit.said_as), []
        rows: list[dict[str, Any]] = []
        writes: list[tuple[str, dict[str, Any]]] = []
        cards: list[tuple[str, dict[str, Any]]] = []
        readback_missing = 0
        text: str | None = user.opening()
        rules: list[str] = ["opening"]
        i = 0
        while text is not None:
            labels = self._kit.oracle_labels(user.pursuing()) if oracle else None
            row, sse, log, own = self._turn(case, sid, i, EvalTurn(text), ledger, session_tools, perception=labels)
            writes += _confirmed_writes(self.kind, log)
            if i == 0:
                self._intent_verdict(row, case, own)
            shown = [(str(e.get("card_id")), dict(e.get("params") or {})) for e in sse if e.get("type") == "action_card"]
            row["readback_missing"] = [self._readback_gap(c, p, sse, db) for c, p in shown]
            row["readback_missing"] = [g for g in row["readback_missing"] if g]
            readback_missing += len(row["readback_missing"])
            cards += shown
            reply = user.respond(AssistantTurn.from_sse(sse)) if not row.get("error") else None
            if reply is not None and reply.rule == "yes":  # a card said yes to closes its request; a no leaves it open
                ledger.request_start = len(ledger.raw_texts) + 1
            row["user_rule"] = rules[-1]
            row["repeated_ask"] = bool(reply and reply.repeated_ask)
            if labels is not None:
                row["oracle_labels"] = list(labels)
            row["run"] = f"{user_kind}/{'oracle' if oracle else 'model'}"
            rows.append(row)
            if reply is None or reply.text is None:
                user.ended = user.ended or ("error" if reply is None else reply.rule)
                break
            rules.append(reply.rule)
            text, i = reply.text, i + 1
        tools = {c.id: c.tool for c in self._pack.cards}
        record: dict[str, Any] = {
            "task_id": case.info["task_id"], "half": case.info.get("half"), "ended": user.ended,
            "user_turns": user.turns, "user": getattr(user, "kind", user_kind),
            "perception": "oracle" if oracle else "model",
            "actions_expected": len(user.writes), "actions_matched": len(user.done),
            "cards_refused": user.cards_refused, "repeated_asks": user.repeated_asks,
            "reoffered_after_no": int(getattr(user, "reoffered_after_no", 0)),
            "readback_missing": readback_missing, "cards_shown": len(cards),
            "first_card_ok": (None if not user.writes else bool(cards) and _expected(cards[0], tools, user.writes)),
            "writes": [w[0] for w in writes],
        }
        if self.entity is not None:
            try:
                record.update(db_check(self._pack, base_dir / "db.json", task, self.entity, writes, db=db))
            except Exception as exc:  # a measurement: report it on the task, go on
                record.update(passed=None, db_error=f"{type(exc).__name__}: {exc}"[:300])
        else:
            record["passed"] = None
        rows[-1]["tau2_task"] = record
        for r in rows:
            if on_row is not None:
                on_row(r)
        return rows

    def _readback_gap(self, card_id: str, params: dict[str, Any], sse: list[dict[str, Any]],
                      db: dict[str, Any]) -> dict[str, list[str]]:
        """The words a card's read-back misses, per argument it changes (empty: every one is named)."""
        said = " ".join(str(e.get("text") or "") for e in sse if e.get("type") in ("narration.delta", "reply.delta"))
        said = " ".join(said.casefold().split())
        gaps: dict[str, list[str]] = {}
        for arg, terms in self._kit.readback_terms(card_id, params, db).items():
            missing = [t for t in terms if " ".join(str(t).casefold().split()) not in said]
            if missing:
                gaps[arg] = missing
        return {"card_id": card_id, "missing": gaps} if gaps else {}

    def _judge(self, base: dict[str, Any], case: Case, turn: Any, sse: list[dict[str, Any]],
               log: list[dict[str, Any]], own: dict[str, Any], red: str, ledger: SessionLedger,
               session_tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The row of one turn: facts, decision score, safety measures."""
        facts = analyse_turn(self.kind, sse, log, own, self.max_steps, user_text_redacted=red,
                             lookups=self._pack.lookup_tools)
        decides = self.kind in DECIDING_KINDS
        row: dict[str, Any] = {
            **base,
            "terminal": facts["terminal"] if decides and self.logged else None,
            **{k: facts.get(k) for k in ("route", "path", "card_id", "executed", "escalation_reason",
                                         "authenticated_user_id", "steps", "decisions", "first_decision",
                                         "parse_failures", "fallbacks", "intent", "sub_intent", "phi")},
            "sse_types": facts["sse_types"], "reply": facts["reply"],
        }
        session_tools += _tool_records(self.kind, log)
        if turn.expect is not None:
            if decides and not self.logged:
                row["correct"], row["detail"] = None, "no event log"
            elif case.suite == "tau2-openings" and not decides:
                row["correct"], row["detail"] = None, "no decision to score"
            else:
                entity = turn.expect.get("entity")
                status = self._status_of(entity, session_tools) if entity else None
                row["correct"], row["detail"] = score(turn.expect, facts, turn.text, status)
                row["entity_status"] = status
        if decides:
            withheld: list[dict[str, str]] = []
            row["invented"] = (invented_arguments(self.kind, log, ledger, self._vocab or set(), withheld)
                               if self.logged else None)
            row["withheld"] = withheld if self.logged else None
        else:  # a kind that calls no tools invents nothing; the others are not judged here
            row["invented"] = [] if self.kind == "prompting" else None
        row["unrequested"] = unrequested_cards(sse, request_texts(ledger), self._kit.card_rules())
        if case.suite != "tau2-tasks" and any(e.get("type") == "action_card" for e in sse):
            ledger.request_start = len(ledger.raw_texts)  # the next request starts after this card
        row["unselected"] = delivered_unselected_actions(sse, own.get("card_id"), recorded=decides and bool(own))
        return row

    def _pack_measures(self, judge: Any, row: dict[str, Any], sse: list[dict[str, Any]], turn: Any, case: Case,
                       meta: dict[str, Any], own: dict[str, Any]) -> None:
        """The pack's own measures of one turn (``row["measures"]``) and the fields its judge adds."""
        perceives = self.kind in ("tandem", "sgc_w1", "sgc_w1w2", "sgc_full") and bool(own)
        reply = "".join(e.get("text", "") for e in sse if e.get("type") == "reply.delta")
        view = TurnView(case=case, turn=turn, delivered=delivered_text(sse), reply=reply, meta=meta, own=own,
                        perceives=perceives)
        measures, fields = judge(view)
        row.update(fields)
        row["measures"] = measures
