"""How competent is the real embedded model as the DR orchestrator? Terminal decisions per turn.

Starts the embedded app (real Ray Serve + vLLM on the CPU) with pipeline ``dr`` and the
bundled SmolLM2-135M in every role (orchestrator, generator, slot extractor), exactly as
``tests/integration/conftest.py`` does: the strict config loader, free ports, a fresh
SQLite session store, a fresh synthetic world (seed 7: the fixture users alex / priya) and
the telemetry directory in a work folder. Then, over HTTP/SSE:

(a) **flows** (multi-turn, one session each; the same flows tests/integration/test_dr_scripted.py
    runs with the scripted orchestrator, which is the wiring proof — this measures the model):

    cancel     t1 "Hi, my email is alex.rivera@example.com."   expect authenticate: the session is
                                                                authenticated as alex_rivera_1001
               t2 "Please cancel order #W1000001."             expect action_card: path action_card,
                                                                card.cancel_order for #W1000001 on the wire
               t3 "yes"                                         expect executed: the confirmed write ran
                                                                (outcome.executed) and the order is cancelled
    ambiguous  t1 "My email is priya.shah@example.com"          expect authenticate (priya_shah_2002)
               t2 "I want to return my order."                  expect clarify: path clarify
    human      t1 "I want to talk to a human agent please."     expect escalate user_requested_human
    noauth     t1 "Cancel order #W1000002 now."                 expect no_write: no action_card event,
                                                                order still delivered, no confirmed tool

(b) **tau2 openings**: the first ``--limit`` tasks (file order; 0 = all) of
    ``tasks_train.json`` (``--tau2`` or ``$TANDEM_TAU2_DIR`` or ../shared/data/tau2-retail).
    The user's opening message is the first sentence of ``user_scenario.instructions.reason_for_call``
    turned into the first person by a fixed pronoun swap ("You received your order" ->
    "I received my order"; ``--verbatim`` sends the whole reason_for_call unchanged). One turn,
    fresh session, nobody authenticated. The expected FIRST decision class comes from the
    task's expected actions:

      escalate  the first expected action is transfer_to_human_agents;
      identify  anything else (find_user_id_by_*; and also a write or no action at all: tau2's
                policy requires authenticating the user before any account-specific action, and
                those tasks only leave the lookup out of their action list). A few openings are
                product questions an agent could answer before the lookup (e.g. task 2, "how many
                tshirt options"); the rule still asks for identity first, as the task's actions do.

Scoring (one boolean ``correct`` per turn; no partial credit; the rule lives in
``serve/eval/scoring.py``, shared with ``tandem eval``):

  * flows: the ``expect`` above, read from the turn's dr.outcome event (path, card_id,
    executed, escalation_reason, facts.authenticated_user_id), the SSE events and the
    ToolsServer's order status. ``human`` and ``noauth`` are held by code whatever the model
    does (a pre-guard route; no write card is offered before authentication): they check the
    guarantees, not the model. ``cancel`` and ``ambiguous`` need the model.
  * tau2 ``escalate``: the turn ends on path escalate (a deterministic pre-guard route or a
    model decision; any reason code).
  * tau2 ``identify``: the FIRST decision of the turn is either
      - ``clarify`` whose question asks for identity (mentions email, your / full / first / last
        name, zip / postal code, or verify / identify / authenticate), or
      - ``find_user_id_by_email`` / ``find_user_id_by_name_zip`` whose arguments are grounded in
        the user's text (the email placeholder is in the redacted text; first name, last name
        and a five-digit zip all appear in it as whole words).
    Note: dr.* events are redacted when logged, so an email the model invents shows up as a
    placeholder too ([EMAIL_n]); it counts as grounded only if that placeholder is in the user's
    redacted text.
    A generic clarify ("tell me more"), a select, a respond, any other tool first, or an
    ungrounded lookup is wrong.

Per turn it records: ``terminal`` (the turn reached a terminal decision within the step cap:
a model decision respond / clarify / select / action / escalate at step <= max_steps, or a
deterministic route escalate / execute_pending; a turn that ends on the step cap, a parse
failure or a refused tool call is "no" — the backend may still refuse a terminal decision, e.g. an ineligible card,
which counts as terminal yes and shows up as a fallback), the terminal ``path`` (dr.outcome),
``correct``, ``fallbacks`` by trigger (dr.fallback, orchestrator and generator), ``steps``
(dr.step events) and ``parse_failures`` (dr.step with decision null). Prints a table and the
rates (terminal within cap, correct), writes JSON.

    python scripts/bench_dr.py                       # flows + first 20 tau2 openings
    python scripts/bench_dr.py --limit 0 --out results/bench_dr_all.json
    python scripts/bench_dr.py --no-tau2             # flows only
    python scripts/bench_dr.py --rescore results/bench_dr.json   # re-score a saved run, no app

Shutdown: Serve and Ray are shut down; the /dev/shm ``psm_*`` / ``sem.mp-*`` files that this
run's process tree had mapped are removed (files of other Ray sessions on the box are left).
Never ``ray stop``. Low scores are expected from a 135M model; they are the measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipelines.domains.support.evaluation import FLOWS  # noqa: E402
from serve.eval.runner import shm_held_here, shm_names, shutdown_local  # noqa: E402
from serve.eval.scoring import analyse, score  # noqa: E402
from serve.eval.suites import tau2_cases  # noqa: E402

# ---- helpers ------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(k: int, n: int) -> float:
    return round(100.0 * k / n, 1) if n else float("nan")


# ---- the app ------------------------------------------------------------------------------


class Bench:
    def __init__(self, config: Path, work: Path, max_steps: int, num_cpus: int) -> None:
        self.config, self.work, self.max_steps, self.num_cpus = config, work, max_steps, num_cpus
        self.http = ""
        self.tele = work / "telemetry"
        self._shm_before: set[str] = set()
        self._held: set[str] = set()
        self._started = False
        self.shm_seen = 0

    def start(self) -> float:
        import ray
        import yaml
        from ray import serve
        from ray.serve.config import gRPCOptions

        from serve.config import load_serve_file
        from serve.deploy import deploy_serve_file, wait_app_running
        from serve.launch import wait_ready
        from serve.telemetry import configure_env

        t0 = time.monotonic()
        raw = yaml.safe_load(self.config.read_text())
        entry = raw["applications"][0]
        from serve.config import merge_args

        entry["args"] = merge_args(entry["args"], {
            "store": {"kind": "sqlite", "path": str(self.work / "sessions.db")},
            "telemetry": {"jsonl_dir": str(self.tele)},
            "pipeline": {"kind": "dr", "max_steps": self.max_steps},
            "domain": {"name": "support", "seed": 7, "world_path": str(self.work / "world.db")},
        })
        roles = entry["args"]["roles"]
        cfg = self.work / "app.yaml"
        cfg.write_text(yaml.safe_dump(raw))
        sf = load_serve_file(cfg)  # strict, like production
        models = sf.applications[0].args.models
        self.models = {r: models[roles[r]].model_id for r in roles}
        for m in models.values():
            if m.source == "embedded":
                from models.prepare import prepare_embedded_model

                prepare_embedded_model()
        configure_env(jsonl_dir=str(self.tele), otlp_endpoint=None, sampling_ratio=1.0)
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        self._shm_before = shm_names()
        http_port, grpc_port = free_port(), free_port()
        ray.init(address="local", num_cpus=self.num_cpus, include_dashboard=False, log_to_driver=False)
        self._started = True
        serve.start(http_options={"host": "127.0.0.1", "port": http_port},
                    grpc_options=gRPCOptions(port=grpc_port,
                                             grpc_servicer_functions=sf.grpc_options.grpc_servicer_functions))
        deploy_serve_file(sf, http_host="127.0.0.1", http_port=http_port, grpc_port=grpc_port)
        self.http = f"http://127.0.0.1:{http_port}"
        wait_app_running("tandem", timeout_s=900)
        wait_ready(self.http, timeout_s=300)
        return time.monotonic() - t0

    def stop(self) -> int:
        """Shut down; remove the shm files our process tree held. Returns how many were removed."""
        if not self._started:
            return 0
        self._held |= shm_held_here()
        self.shm_seen = len(self._held)
        return shutdown_local(self._held, self._shm_before)

    def snapshot_shm(self) -> None:
        self._held |= shm_held_here()

    # ---- one turn ----------------------------------------------------------------------

    def turn(self, sid: str, text: str) -> tuple[list[dict[str, Any]], float]:
        t0 = time.perf_counter()
        events: list[dict[str, Any]] = []
        with httpx.stream("POST", f"{self.http}/v1/sessions/{sid}/turns", json={"text": text},
                          headers={"Accept": "text/event-stream"}, timeout=600) as r:
            if r.status_code != 200:
                raise RuntimeError(f"HTTP {r.status_code}: {r.read()[:300]!r}")
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
        return events, time.perf_counter() - t0

    def log_for(self, turn_id: str, wait_s: float = 10.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + wait_s
        while True:
            out: list[dict[str, Any]] = []
            for f in self.tele.glob("events-*.jsonl"):
                for x in f.read_text().splitlines():
                    if turn_id in x and x.strip():
                        try:
                            e = json.loads(x)
                        except json.JSONDecodeError:
                            continue
                        if e.get("turn_id") == turn_id:
                            out.append(e)
            if any(e["kind"] == "dr.outcome" for e in out) or time.monotonic() > deadline:
                return out
            time.sleep(0.2)

    def order_status(self, order_id: str) -> str | None:
        from ray import serve

        try:
            h = serve.get_deployment_handle("ToolsServer", app_name="tandem")
            found = h.entity.remote("order", order_id).result()
            return None if found is None else found["status"]
        except Exception as exc:
            return f"error: {type(exc).__name__}"


# ---- scoring: serve/eval/scoring.py (the same rule `tandem eval` applies) ---------------------


# ---- main ---------------------------------------------------------------------------------


def turn_row(part: str, case: str, sid: str, text: str, expect: dict[str, Any], extra: dict[str, Any],
             sse: list[dict[str, Any]], log: list[dict[str, Any]], status: str | None, elapsed: float,
             max_steps: int) -> dict[str, Any]:
    """One measured turn: its facts (from its SSE and dr.* events), scored against ``expect``."""
    a = analyse(sse, log, max_steps)
    ok, detail = score(expect, a, text, status)
    return {"part": part, "case": case, "session_id": sid, "text": text, "expect": expect,
            "correct": ok, "detail": detail, "order_status": status, "elapsed_s": round(elapsed, 2),
            **extra, **a}


def rates(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    fb: Counter[str] = Counter()
    for r in rows:
        fb.update(r["fallbacks"])
    steps = [r["steps"] for r in rows]
    return {
        "turns": n,
        "terminal_within_cap": sum(r["terminal"] for r in rows),
        "terminal_within_cap_pct": pct(sum(r["terminal"] for r in rows), n),
        "correct": sum(r["correct"] for r in rows),
        "correct_pct": pct(sum(r["correct"] for r in rows), n),
        "paths": dict(Counter(str(r["path"]) for r in rows)),
        "first_decisions": dict(Counter(
            (r["first_decision"] or {}).get("decision", "?") if r["first_decision"] else
            (f"route:{r['route']}" if r["route"] else "none") for r in rows)),
        "fallbacks_by_trigger": dict(fb),
        "parse_failures": sum(r["parse_failures"] for r in rows),
        "model_steps": sum(steps),
        "mean_steps": round(sum(steps) / n, 2) if n else None,
        "mean_turn_s": round(sum(r["elapsed_s"] for r in rows) / n, 2) if n else None,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    hdr = f"{'part':5} {'case':14} {'expect':12} {'first':24} {'path':12} {'term':5} {'st':>2} {'pf':>2} " \
          f"{'ok':3} {'s':>5}  fallbacks / detail"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        first = (r["first_decision"] or {}).get("decision") if r["first_decision"] else (
            f"route:{r['route']}" if r["route"] else "-")
        fb = ",".join(f"{k}x{v}" if v > 1 else k for k, v in r["fallbacks"].items()) or "-"
        print(f"{r['part']:5} {r['case'][:14]:14} {r['expect']['kind'][:12]:12} {str(first)[:24]:24} "
              f"{str(r['path'])[:12]:12} {'yes' if r['terminal'] else 'no':5} {r['steps']:>2} "
              f"{r['parse_failures']:>2} {'yes' if r['correct'] else 'no':3} {r['elapsed_s']:5.1f}  "
              f"{fb} | {r['detail']}")


def report(result: dict[str, Any], out: Path) -> None:
    """Summarise the turns (rates per part), print the table and the rates, write the JSON."""
    rows = result["turns"]
    flows = [r for r in rows if r["part"] == "flow"]
    t2 = [r for r in rows if r["part"] == "tau2"]
    flow_ok = {name: all(r["correct"] for r in flows if r["case"].startswith(name + "."))
               for name, _ in FLOWS if any(r["case"].startswith(name + ".") for r in flows)}
    summary = {"flows": rates(flows), "tau2": rates(t2), "all": rates(rows), "flows_passed": flow_ok}
    print()
    print_table(rows)
    print()
    for part in ("flows", "tau2", "all"):
        s = summary[part]
        if not s["turns"]:
            continue
        print(f"{part:6} turns {s['turns']:3}  terminal within cap {s['terminal_within_cap']}/{s['turns']} "
              f"({s['terminal_within_cap_pct']}%)  correct {s['correct']}/{s['turns']} ({s['correct_pct']}%)  "
              f"parse failures {s['parse_failures']}  mean steps {s['mean_steps']}  "
              f"fallbacks {s['fallbacks_by_trigger'] or '{}'}")
    if flow_ok:
        print("flows passed end to end: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in flow_ok.items()))
    if t2:
        print(f"tau2 expected classes: {dict(Counter(r['expect']['kind'] for r in t2))}; "
              f"first decisions: {summary['tau2']['first_decisions']}")
    result = {**{k: v for k, v in result.items() if k != "turns"}, "summary": summary, "turns": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {out}")


def rescore(path: Path, out: Path) -> int:
    """Re-apply the scoring rule to a saved run (same model outputs, no app start)."""
    result = json.loads(path.read_text())
    for r in result["turns"]:
        r["correct"], r["detail"] = score(r["expect"], r, r["text"], r.get("order_status"))
    result["rescored_from"] = str(path)
    report(result, out)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=REPO / "configs" / "embedded.yaml")
    ap.add_argument("--tau2", type=Path, default=None, help="tau2-retail folder (default $TANDEM_TAU2_DIR or "
                    "../shared/data/tau2-retail)")
    ap.add_argument("--limit", type=int, default=20, help="tau2 tasks, in file order (0 = all)")
    ap.add_argument("--verbatim", action="store_true", help="send reason_for_call unchanged (second person)")
    ap.add_argument("--no-flows", action="store_true")
    ap.add_argument("--no-tau2", action="store_true")
    ap.add_argument("--max-steps", type=int, default=3)
    ap.add_argument("--num-cpus", type=int, default=4, help="logical CPUs of the local Ray")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the store, world and telemetry here "
                    "(default: a temporary folder, removed at the end)")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "bench_dr.json")
    ap.add_argument("--rescore", type=Path, default=None, metavar="JSON",
                    help="re-apply the scoring rule to a saved run's turns (no app start) and write --out")
    ns = ap.parse_args(argv)
    if ns.rescore:
        return rescore(ns.rescore, ns.out)

    tau2: list[dict[str, Any]] = []
    if not ns.no_tau2:
        from pipelines.domains.support.replay import default_tau2_dir

        base = ns.tau2 or default_tau2_dir()
        if not (base / "tasks_train.json").is_file():
            print(f"tau2-retail tasks not found in {base} (use --tau2 or TANDEM_TAU2_DIR, or --no-tau2)",
                  file=sys.stderr)
            return 2
        tau2 = tau2_cases(base, ns.limit, ns.verbatim)

    work = ns.workdir or Path(tempfile.mkdtemp(prefix="bench_dr-"))
    work.mkdir(parents=True, exist_ok=True)
    bench = Bench(ns.config, work, ns.max_steps, ns.num_cpus)
    rows: list[dict[str, Any]] = []
    stamp = time.strftime("%H%M%S")
    ready_s = float("nan")
    removed = 0
    t_all = time.monotonic()
    try:
        print(f"starting the embedded app (pipeline dr, max_steps {ns.max_steps}) in {work} ...", flush=True)
        ready_s = bench.start()
        print(f"ready in {ready_s:.1f} s; roles {bench.models}", flush=True)
        bench.snapshot_shm()

        def run(part: str, case: str, sid: str, text: str, expect: dict[str, Any], extra: dict[str, Any]) -> None:
            sse, elapsed = bench.turn(sid, text)
            done = sse[-1] if sse else {}
            log = bench.log_for(done.get("turn_id", "?"))
            status = bench.order_status(expect["entity"]) if "entity" in expect else None
            row = turn_row(part, case, sid, text, expect, extra, sse, log, status, elapsed, ns.max_steps)
            rows.append(row)
            print(f"  {part} {case:14} {expect['kind']:12} path={row['path']} terminal={row['terminal']} "
                  f"steps={row['steps']} correct={row['correct']} ({elapsed:.1f} s)", flush=True)

        if not ns.no_flows:
            print("(a) flows", flush=True)
            for name, turns in FLOWS:
                sid = f"bench-{name}-{stamp}"
                for i, (text, expect) in enumerate(turns, 1):
                    run("flow", f"{name}.t{i}", sid, text, expect, {})
        if tau2:
            print(f"(b) tau2 openings ({len(tau2)})", flush=True)
            for c in tau2:
                run("tau2", f"task {c['task_id']}", f"bench-tau2-{c['task_id']}-{stamp}", c["text"], c["expect"],
                    {"task_id": c["task_id"], "first_expected_action": c["first_expected_action"]})
        bench.snapshot_shm()
    finally:
        removed = bench.stop()
        if ns.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    result = {
        "config": str(ns.config), "models": getattr(bench, "models", {}), "max_steps": ns.max_steps,
        "tau2_limit": ns.limit, "verbatim": ns.verbatim, "ready_s": round(ready_s, 1),
        "wall_s": round(time.monotonic() - t_all, 1), "shm_files_removed": removed,
        "shm_files_seen_mapped": bench.shm_seen, "turns": rows,
    }
    report(result, ns.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
