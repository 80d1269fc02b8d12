"""The run of ``tandem eval``: one app per pipeline kind and domain (or ``--http``), every case played.

Apps run one after the other on one local Ray (see :class:`serve.eval.runner.LocalApps`);
the load average before and after each app's turns is recorded, since the box may be
shared. A kind whose registry record does not run on a suite's domain is skipped and
named in the run's ``skipped`` list; an app that fails to deploy is recorded and the run
goes on with the next.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .evaluate import Evaluator
from .runner import EventLog, LocalApps, app_overrides, run_turn
from .suites import Case

__all__ = ["run_all"]

WARMUP_TEXTS = ("Hello!", "What can you help me with?")


def _dataset(suites: list[str], cases: dict[str, list[Case]]) -> str | None:
    """The tau2 ``db.json`` the app's world is imported from when the group plays whole tau2 tasks."""
    for c in cases.get("tau2-tasks", []) if "tau2-tasks" in suites else []:
        return str(Path(c.info["tau2_dir"]) / "db.json")
    return None


def _warm(http: str, kind: str, n: int, timeout_s: float, api_key: str | None) -> None:
    for i, text in enumerate(WARMUP_TEXTS[: max(0, n)]):
        run_turn(http, f"eval-warmup-{kind}-{i}-{time.strftime('%H%M%S')}", text, timeout_s=timeout_s,
                 api_key=api_key)


def _play(ev: Evaluator, suites: list[str], cases: dict[str, list[Case]], deadline: float,
          on_row: Callable[[dict[str, Any]], None] | None) -> tuple[list[dict[str, Any]], int]:
    rows: list[dict[str, Any]] = []
    skipped = 0
    for suite in suites:
        for case in cases.get(suite, []):
            if time.monotonic() > deadline:
                skipped += len(case.turns)
                continue
            rows += ev.run_case(case, on_row=on_row)
    return rows, skipped


def _http_run(ns: argparse.Namespace, kind: str, suites: list[str], cases: dict[str, list[Case]], world_seed: int,
              deadline: float, on_row: Any, run: dict[str, Any]) -> list[dict[str, Any]]:
    import httpx

    try:
        served = httpx.get(f"{ns.http.rstrip('/')}/readyz", timeout=30).json().get("pipeline")
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise ValueError(f"no ready app at {ns.http}: {type(exc).__name__}") from exc
    if served != kind:
        raise ValueError(f"the app at {ns.http} serves pipeline {served!r}, not {kind!r}")
    events = EventLog(ns.telemetry)
    rows: list[dict[str, Any]] = []
    for domain, dsuites in ns.plan:
        ev = Evaluator(kind, domain, ns.http.rstrip("/"), events, world_seed=world_seed, timeout_s=ns.turn_timeout_s,
                       api_key=ns.api_key, max_user_turns=getattr(ns, "max_user_turns", 30),
                       user_kind=getattr(ns, "user", "instructed"), perception=getattr(ns, "perception", "model"))
        try:
            got, skipped = _play(ev, dsuites, cases, deadline, on_row)
        finally:
            ev.close()
        rows += got
        run["skipped_turns"] += skipped
    return rows


def run_all(ns: argparse.Namespace, kinds: list[str], suites: list[str], cases: dict[str, list[Case]],
            base_args: dict[str, Any], world_seed: int,
            on_row: Callable[[dict[str, Any]], None] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Play every case of ``suites`` with every kind in ``kinds``; returns the rows and the run's record."""
    from pipelines.errors import TandemError
    from pipelines.registry import kind_record

    t0 = time.monotonic()
    deadline = t0 + ns.max_wall_s
    run: dict[str, Any] = {
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S"), "config": str(ns.config), "pipelines": kinds,
        "suites": suites, "tau2_limit": ns.limit, "verbatim": ns.verbatim,
        "user": getattr(ns, "user", "instructed"), "perception": getattr(ns, "perception", "model"),
        "half": getattr(ns, "half", "all"), "pack_sessions": ns.pack_sessions,
        "pack_turns": ns.pack_turns, "pack_seed": ns.seed, "suite_domains": {s: d for d, ss in ns.plan for s in ss}, "world_seed": world_seed, "warmup": ns.warmup,
        "http": ns.http, "cpus": os.cpu_count(), "apps": [], "skipped": [], "skipped_turns": 0,
    }
    if ns.http:
        rows = _http_run(ns, kinds[0], suites, cases, world_seed, deadline, on_row, run)
        run["wall_s"] = round(time.monotonic() - t0, 1)
        run["partial"] = run["skipped_turns"] > 0
        return rows, run
    work = ns.workdir or Path(tempfile.mkdtemp(prefix="tandem-eval-"))
    work.mkdir(parents=True, exist_ok=True)
    apps = LocalApps(ns.config, work, num_cpus=ns.num_cpus, deploy_timeout_s=ns.deploy_timeout_s)
    events = EventLog(work / "telemetry")
    rows: list[dict[str, Any]] = []
    try:
        for domain, dsuites in ns.plan:
            for kind in kinds:
                rec = kind_record(kind)
                if rec.domains is not None and domain not in rec.domains:
                    run["skipped"].append({"kind": kind, "domain": domain, "why": "kind does not run on this domain"})
                    continue
                if time.monotonic() > deadline:
                    run["skipped"].append({"kind": kind, "domain": domain, "why": "max wall time reached"})
                    continue
                tag = f"{kind}-{domain}"
                over = app_overrides(kind, domain, base_args.get("pipeline") or {}, work, tag, world_seed=world_seed,
                                     dataset=_dataset(dsuites, cases),
                                     oracle_perception="oracle" in getattr(ns, "perception", "model")
                                     and kind == "tandem")
                print(f"[{tag}] deploying ...", flush=True)
                app: dict[str, Any] = {"kind": kind, "domain": domain}
                try:
                    app["ready_s"] = round(apps.deploy(over, tag), 1)
                except (RuntimeError, TimeoutError, TandemError, ValueError) as exc:
                    app["error"] = str(getattr(exc, "message", exc))[:300]
                    print(f"[{tag}] failed: {app['error']}", file=sys.stderr, flush=True)
                    run["apps"].append(app)
                    apps.delete()
                    continue
                print(f"[{tag}] ready in {app['ready_s']} s; warming up", flush=True)
                _warm(apps.http, kind, ns.warmup, ns.turn_timeout_s, None)
                app["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]
                ev = Evaluator(kind, domain, apps.http, events, max_steps=int(over["pipeline"].get("max_steps", 3)),
                               world_seed=world_seed, timeout_s=ns.turn_timeout_s,
                               entity=apps.entity, reset=apps.reset_world,
                               max_user_turns=getattr(ns, "max_user_turns", 30),
                               user_kind=getattr(ns, "user", "instructed"),
                               perception=getattr(ns, "perception", "model"))
                t_app = time.monotonic()
                try:
                    got, skipped = _play(ev, dsuites, cases, deadline, on_row)
                finally:
                    ev.close()
                app.update(turns=len(got), play_s=round(time.monotonic() - t_app, 1),
                           loadavg_after=[round(x, 2) for x in os.getloadavg()])
                rows += got
                run["skipped_turns"] += skipped
                run["apps"].append(app)
                apps.delete()
    finally:
        run["shm_files_removed"] = apps.stop()
        if ns.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    run["wall_s"] = round(time.monotonic() - t0, 1)
    run["partial"] = run["skipped_turns"] > 0 or any(s["why"].startswith("max") for s in run["skipped"])
    return rows, run
