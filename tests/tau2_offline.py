"""Whole tau2-format tasks played in process: the tandem turn over a task's world with a rule-following model
double, the pack's scripted user, tau2's database check. For tests and for studying the turn's mechanisms
quickly; the figures that count come from ``tandem eval`` on the real model.

The model double (:class:`FirstChoiceModel`) follows every decoding constraint the turn sets and always takes
the first thing it allows: the first label, the first offered card with the first candidate of each argument,
else a clarify, else an answer. With ``--perception oracle`` the labels are the request's own, so what the
double decides is what the grounded offer leaves: the mechanisms after perception.

    python -m tests.tau2_offline --tau2-dir ../shared/data/tau2-retail --half studied --perception oracle
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet

from pipelines.core.evaluation import AssistantTurn, evaluation_of
from pipelines.core.kernels import LocalRuleKernels
from pipelines.counters import Counters
from pipelines.domains import load_domain
from pipelines.events import PerceptionLabels, TurnRequest
from pipelines.guardrails import LocalGuardrails
from pipelines.protocols import ModelCall
from pipelines.tandem.pipeline import TandemPipeline
from pipelines.tandem.settings import TandemSettings
from pipelines.turn import TurnRunner
from serve.stores.sqlite import SQLiteSessionStore
from serve.stores.vault import RedactingStore, VaultCipher
from tests.doubles import ListEventSink

__all__ = ["FirstChoiceModel", "play_task", "main"]

_ALT = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _fill(schema: Mapping[str, Any]) -> Any:
    """The first value a JSON schema allows."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("type") != "null"] or schema[key]
            return _fill(options[0])
    kind = schema.get("type")
    if kind == "object":
        return {k: _fill(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [_fill(schema.get("items") or {"type": "string"})]
    return {"string": "", "integer": 0, "number": 0, "boolean": False, "null": None}.get(str(kind), "")


_PREFER = ("action", "clarify", "respond", "select", "escalate")


def first_decision(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An orchestrator step: the first offered card, else a clarify, an answer, a selection, a hand-over, a read."""
    branches = list(schema.get("anyOf") or [schema])

    def rank(b: Mapping[str, Any]) -> int:
        const = ((b.get("properties") or {}).get("decision") or {}).get("const")
        return _PREFER.index(const) if const in _PREFER else len(_PREFER)

    return _fill(sorted(branches, key=rank)[0])


class FirstChoiceModel:
    """A role-addressed model client that follows every constraint and takes the first option (module docstring)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ModelCall]] = []

    def _text(self, role: str, call: ModelCall) -> str:
        so = call.structured_output
        if so is not None and so.kind == "grammar":
            spec = str(so.spec)
            if spec.startswith("start: SENTENCE"):
                return "Let me look into that for you."
            if "NARRATION_TEXT" in spec:
                return " Let me look into that for you. </NARRATION><PLAN>[]</PLAN>"
            alts = _ALT.findall(spec.split("\n", 1)[0])
            return json.loads(f'"{alts[0]}"') if alts else ""
        if so is not None and so.kind == "json":
            spec = so.spec if isinstance(so.spec, dict) else json.loads(str(so.spec))
            if role == "orchestrator":
                return json.dumps(first_decision(spec))
            return json.dumps({k: "" for k in (spec.get("properties") or {})})
        if role == "generator":
            return "Here is what I found."
        return "Let me look into that for you."

    async def stream(self, role: str, call: ModelCall) -> AsyncIterator[str]:
        self.calls.append((role, call))
        text = self._text(role, call)
        if call.prefix and text.startswith(call.prefix):
            text = text[len(call.prefix):]
        yield text


def _settings() -> TandemSettings:
    return TandemSettings(w1_segments=True, w1_parallel_narration=True, continue_after_lead=False,
                          max_history_turns=20, oracle_perception=True)


def play_task(pack_name: str, task: Mapping[str, Any], db: Mapping[str, Any], db_path: Path, *,
              user_kind: str = "instructed", perception: str = "oracle", max_turns: int = 30,
              verbose: bool | str = False) -> dict[str, Any]:
    """One task played in process (see module docstring); its record as ``tandem eval`` keeps it."""
    from serve.eval.tau2_db import db_check

    pack = load_domain(pack_name)
    kit = evaluation_of(pack)
    hook = pack.task_replay(db_path.parent)
    world = hook.fresh_world(db)
    tools = pack.tool_runner(world, None)
    models = FirstChoiceModel()
    # the real app's store: turns at rest redacted with the session's own vault, restored for the next turn
    rest = tempfile.TemporaryDirectory()
    sink, store = ListEventSink(), RedactingStore(SQLiteSessionStore(Path(rest.name) / "sessions.db"),
                                                  VaultCipher(Fernet.generate_key()))
    pipeline = TandemPipeline(pack, models, tools, LocalGuardrails(), LocalRuleKernels.of(pack),
                              settings=_settings(), counters=Counters())
    runner = TurnRunner(pipeline, store, sink=sink, max_history_turns=20)
    card_tools = {c.id: c.tool for c in pack.cards}
    user = kit.scripted_user(task, db, card_tools, max_turns, kind=user_kind)
    text: str | None = user.opening()
    n, writes, cards, readback_missing, log = 0, [], [], 0, []
    while text is not None:
        n += 1
        start = len(sink.events)
        labels = kit.oracle_labels(user.pursuing()) if perception == "oracle" else None
        req = TurnRequest(text=text, perception=None if labels is None else PerceptionLabels(
            intent=labels[0], sub_intent=labels[1]))

        async def go(req: TurnRequest = req, n: int = n) -> list[Any]:
            return [e async for e in runner.run("s1", req, trace_id="tr", turn_id=f"t{n}")]

        events = [e.model_dump(mode="json") for e in asyncio.run(go())]
        for kind, fields in sink.events[start:]:
            if kind == "tandem.tool" and fields.get("confirmed") and fields.get("ok"):
                writes.append((str(fields.get("tool")), dict(fields.get("args") or {})))
        shown = [(str(e.get("card_id")), dict(e.get("params") or {})) for e in events if e.get("type") == "action_card"]
        said = " ".join(" ".join(str(e.get("text") or "") for e in events
                                 if e.get("type") in ("narration.delta", "reply.delta")).casefold().split())
        for cid, params in shown:
            terms = kit.readback_terms(cid, params, db)
            if any(" ".join(str(t).casefold().split()) not in said for ts in terms.values() for t in ts):
                readback_missing += 1
        cards += shown
        seen = AssistantTurn.from_sse(events)
        reply = user.respond(seen)
        log.append({"user": text, "assistant": seen.text, "cards": shown, "rule": reply.rule})
        if verbose:
            print(f"  U: {text}\n  A: {seen.text}" + (f"  CARD {shown}" if shown else ""), flush=True)
            if verbose == "events":
                for kind, f in sink.events[start:]:
                    if kind in ("tandem.phi", "tandem.tool", "tandem.ask", "tandem.guard", "tandem.step", "tandem.precheck"):
                        keep = {k: f.get(k) for k in ("tools", "then", "tool", "args", "ok", "step", "picked",
                                                      "violation", "detail", "decision", "about", "reason") if k in f}
                        print(f"     · {kind} {json.dumps(keep, default=str)[:300]}")
        text = reply.text

    def live(kind: str, key: str) -> dict[str, Any] | None:
        return json.loads(world.entity_json(kind, key)) if world.has(kind, key) else None

    check = db_check(pack, db_path, task, live, writes, db=db)
    rest.cleanup()
    tools_of = {c.id: c.tool for c in pack.cards}
    from pipelines.core.tau2_user import same_arguments

    first_ok = (None if not user.writes else bool(cards) and any(
        a["name"] == tools_of.get(cards[0][0]) and same_arguments(cards[0][1], a["arguments"]) for _, a in user.writes))
    return {"task_id": str(task["id"]), "passed": check["passed"], "differ": check["differ"], "ended": user.ended,
            "user_turns": user.turns, "actions_expected": len(user.writes), "actions_matched": len(user.done),
            "cards_refused": user.cards_refused, "repeated_asks": user.repeated_asks,
            "reoffered_after_no": user.reoffered_after_no, "readback_missing": readback_missing,
            "first_card_ok": first_ok, "log": log}


def main(argv: list[str] | None = None) -> int:
    from serve.eval.suites import tau2_tasks

    p = argparse.ArgumentParser(prog="python -m tests.tau2_offline", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tau2-dir", type=Path, required=True)
    p.add_argument("--domain", default="support")
    p.add_argument("--half", choices=("all", "studied", "measured"), default="studied")
    p.add_argument("--user", choices=("instructed", "informed"), default="instructed")
    p.add_argument("--perception", choices=("oracle", "model"), default="oracle")
    p.add_argument("--tasks", default="", help="comma-separated task ids (default: every task of the half)")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--events", action="store_true", help="with --verbose: the turn's Φ, tool and guard events")
    p.add_argument("--out", type=Path, default=None, help="write the records as JSON lines here")
    ns = p.parse_args(argv)
    db_path = ns.tau2_dir / "db.json"
    db = json.loads(db_path.read_text())
    tasks = tau2_tasks(ns.tau2_dir, ns.limit, ns.half)
    if ns.tasks:
        wanted = set(ns.tasks.split(","))
        tasks = [t for t in tasks if str(t["id"]) in wanted]
    records = []
    for t in tasks:
        if ns.verbose:
            print(f"# task {t['id']}", flush=True)
        rec = play_task(ns.domain, t, db, db_path, user_kind=ns.user, perception=ns.perception,
                        verbose="events" if ns.events else ns.verbose)
        records.append(rec)
        print(f"task {rec['task_id']:>4} passed={rec['passed']!s:5} ended={rec['ended']:10} "
              f"matched={rec['actions_matched']}/{rec['actions_expected']} refused={rec['cards_refused']} "
              f"reoffered={rec['reoffered_after_no']} readback_missing={rec['readback_missing']} "
              f"repeated={rec['repeated_asks']} turns={rec['user_turns']} first_card_ok={rec['first_card_ok']}",
              flush=True)
    passed = sum(1 for r in records if r["passed"])
    print(f"passed {passed}/{len(records)}")
    if ns.out:
        ns.out.write_text("".join(json.dumps(r) + "\n" for r in records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
