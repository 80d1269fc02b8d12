"""``tandem replay SESSION``: re-run a session's logged decisions and check they are identical.

* ``dr`` turns: the orchestrator's decisions are re-run against the logged model
  outputs and tool observations (:func:`pipelines.annex.dr.replay.replay_turn`).
* ``tandem`` turns: every Φ lookup is re-run on its logged snapshot and every orchestrator
  step's logged output is re-parsed against its logged offer
  (:func:`pipelines.core.replay.replay_decisions`).
* ``sgc_full`` and ``tandem`` turns: every W3 guidance pick is re-run from the stored
  ``answer.meta`` records with the session's seed and compared byte for byte
  (:func:`pipelines.core.replay.replay_w3`).

Reads the turns from the configured session store and the events from the
telemetry directory (JSON lines). Exit code 0 when every decision is identical.

An operator tool, not a session route: it runs where the store file / Redis URL,
the vault key and the telemetry files are, so whoever runs it can read every
session anyway and tenancy cannot be enforced *by* it. ``--principal ID`` makes
it behave like a session route for that principal (a session owned by anyone
else reads as unknown), for replaying on a tenant's behalf.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["main", "replay_session", "load_events"]


def load_events(directory: Path, turn_ids: set[str]) -> dict[str, list[dict[str, Any]]]:
    """Every logged event of the given turns, grouped by turn id, in file order."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in sorted(directory.glob("events-*.jsonl")):
        for line in f.read_text().splitlines():
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            tid = ev.get("turn_id")
            if tid in turn_ids:
                out[tid].append(ev)
    for evs in out.values():
        evs.sort(key=lambda e: e.get("ts", 0.0))
    return out


async def replay_session(session_id: str, store: Any, telemetry: Path, principal: str | None = None, *,
                         domain: str) -> list[dict[str, Any]]:
    """One result row per replayed decision unit (a DR turn, a tandem turn's Φ lookups and steps, or a W3
    pick); ``domain``: the pack the app ran (its rule tables and tools)."""
    from pipelines.core.replay import replay_decisions, replay_w3
    from pipelines.domains import load_domain, load_rule_bundle
    from pipelines.registry import KINDS, kind_record

    if principal is not None and await store.owner(session_id) != principal:
        raise LookupError(f"no stored turns for session {session_id!r}")
    turns = await store.get_history(session_id)
    if not turns:
        raise LookupError(f"no stored turns for session {session_id!r}")
    events = load_events(telemetry, {t.turn_id for t in turns})
    rows: list[dict[str, Any]] = []
    replayed = [(t, kind_record(t.pipeline)) for t in turns if t.pipeline in KINDS]
    for t, record in replayed:  # a kind that replays its own turns (the dr rung) does so through its record
        if record.replay is None:
            continue
        evs = [e for e in events.get(t.turn_id, []) if str(e.get("kind", "")).startswith(f"{record.name}.")]
        if not evs:
            rows.append({"turn": t.index, "turn_id": t.turn_id, "kind": record.name, "identical": False,
                         "detail": f"no {record.name}.* event in the telemetry directory"})
            continue
        rep = await record.replay(events.get(t.turn_id, []), load_domain(domain))
        rows.append({"turn": t.index, "turn_id": t.turn_id, "kind": record.name, "identical": rep.identical,
                     "decisions": len(rep.logged), "detail": "; ".join(rep.mismatches[:3])})
    tandem = [t for t in turns if t.pipeline == "tandem"]
    if tandem:
        tables = load_rule_bundle(domain)
        for t in tandem:
            rep = replay_decisions(events.get(t.turn_id, []), tables.phi)
            if rep.decisions:
                rows.append({"turn": t.index, "turn_id": t.turn_id, "kind": "tandem", "identical": rep.identical,
                             "decisions": rep.decisions, "detail": "; ".join(rep.mismatches[:3])})
    sgc = [t for t in turns if t.meta.get("w3")]
    if sgc:
        branches = load_domain(domain).branch_of_intent
        tables = load_rule_bundle(domain)
        for r in replay_w3([t.meta for t in turns], tables=tables, session_id=session_id,
                           branch_of_intent=branches):
            rows.append({"turn": r.position, "turn_id": turns[r.position].turn_id, "kind": "w3",
                         "identical": r.identical, "detail": r.reason or (r.stored or "")[:120]})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tandem replay", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("session_id")
    ap.add_argument("--config", default="configs/embedded.yaml", help="the Serve file the app ran with")
    ap.add_argument("--telemetry", default=None, help="override the telemetry directory")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--principal", default=None,
                    help="replay only if this principal (an API key id, or 'local') owns the session")
    ns = ap.parse_args(argv)

    from serve.config import load_serve_file
    from serve.ingress import make_store
    from serve.telemetry import telemetry_dir

    args = load_serve_file(ns.config).applications[0].args
    tele = Path(ns.telemetry or args.telemetry.jsonl_dir or telemetry_dir()).expanduser()
    try:
        rows = asyncio.run(replay_session(ns.session_id, make_store(args.store), tele, ns.principal,
                                          domain=args.domain.name))
    except LookupError as exc:
        print(f"error: {exc}")
        return 2
    if ns.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            mark = "identical" if r["identical"] else "DIFFERENT"
            print(f"turn {r['turn']:>3} {r['turn_id']} {r['kind']:>3}  {mark}  {r.get('detail', '')}")
    same = sum(r["identical"] for r in rows)
    print(f"{same}/{len(rows)} decisions identical")
    return 0 if rows and same == len(rows) else 1
