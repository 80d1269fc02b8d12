"""``tandem whatif``: re-decide logged sessions under a candidate change and report which decisions change.

    tandem whatif --from results/eval --table phi=my-phi.yaml --out results/whatif
    tandem whatif --from ~/.cache/tandem/telemetry --since 2026-12-01 --sample 200 --table rules=tables/ \\
        --fail-on card,escalation --out results/whatif
    tandem whatif --from alex-1,bob-2 --pack support-next --principal team-a --out results/whatif
    tandem whatif --from results/eval --config candidate.yaml --model orchestrator=fp32 --out results/whatif

``--from``: an eval run's folder (its ``turns.jsonl``; the events in ``--telemetry``, else its
``telemetry/`` folder, else the config's), a telemetry folder (every session it logged; the texts from the
config's session store), or session ids (comma-separated, or a file with one per line). ``--since`` /
``--until`` (a date or epoch seconds, on each session's first turn) and ``--sample N`` narrow the set.

The candidate: ``--table KIND=FILE`` replaces one rule table (``phi``, ``psi``, ``tiers``, ``w3``; ``rules``: a
whole bundle, a YAML file or a folder of the four files; ``guard``: the guardrail table), ``--pack NAME``
serves another installed pack (its own tables unless ``--table`` says otherwise), ``--model ROLE=MODEL`` re-runs
that role's calls on another model entry of ``--config`` (its engine is deployed on a local Ray, or the
running one). Everything else is the baseline: the app as ``--config`` describes it (its tables and guard,
live ``deployments`` user_configs included). Decisions that hang on a model call the candidate does not
change come from the log; with ``--rerun-changed`` the calls it does change are re-run on the config's own
models (else they reuse the logged output and the report counts them as estimated).

Writes ``DIR/whatif.json`` (:class:`pipelines.core.whatif.WhatIfReport`), ``DIR/whatif.md`` and
``DIR/whatif.html``; prints the counts. Exit code 0, or 1 when a ``--fail-on`` gate is crossed (a CI gate
for a rule-table change), or 2 for bad input. An operator tool like ``tandem replay``: it reads the store
and the event log directly; ``--principal ID`` acts for one tenant (another principal's session reads as
unknown). Every text it writes carries vault placeholders, never PII values.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from pipelines.errors import ConfigError, InvalidInput, TandemError

__all__ = ["main", "build_parser", "read_events", "load_sessions", "build_sides", "table_override", "write_report"]

TABLE_KINDS = ("phi", "psi", "tiers", "w3", "rules", "guard")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tandem whatif", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="source", required=True, metavar="RUN",
                   help="an eval run's folder, a telemetry folder, or session ids (comma-separated or a file)")
    p.add_argument("--config", default="configs/embedded.yaml", help="the Serve file the app ran with (baseline)")
    p.add_argument("--telemetry", type=Path, default=None, help="the event-log folder (overrides the default)")
    p.add_argument("--table", action="append", default=[], metavar="KIND=FILE",
                   help=f"a candidate rule table ({', '.join(TABLE_KINDS)}); repeatable")
    p.add_argument("--pack", default=None, help="a candidate pack: another installed `tandem.domains` entry")
    p.add_argument("--model", action="append", default=[], metavar="ROLE=MODEL",
                   help="re-run ROLE's calls on the models entry MODEL of --config; repeatable")
    p.add_argument("--rerun-changed", action="store_true",
                   help="re-run the model calls the candidate changes on the config's own models")
    p.add_argument("--out", type=Path, required=True, help="where whatif.json / .md / .html go")
    p.add_argument("--since", default=None, help="sessions whose first turn started at or after (date or epoch)")
    p.add_argument("--until", default=None, help="... and before")
    p.add_argument("--sample", type=int, default=None, help="re-decide a random sample of N sessions")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed")
    p.add_argument("--principal", default=None, help="act for this principal only (its sessions; others: unknown)")
    p.add_argument("--fail-on", default="", metavar="KINDS",
                   help="exit 1 when a kind changed: card,escalation>2,gate>5%% (also any, refused, escalated)")
    p.add_argument("--first", type=int, default=50, help="changed turns listed in the report (all are counted)")
    p.add_argument("--concurrency", type=int, default=8, help="sessions re-decided at once (live calls batch)")
    p.add_argument("--num-cpus", type=float, default=None, help="logical CPUs of a local Ray (with --model)")
    return p


# -- the sessions ------------------------------------------------------------------------------------------


def _when(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError as exc:
        raise InvalidInput(f"--since/--until: {text!r} is neither a date nor epoch seconds") from exc


def _run_rows(path: Path) -> dict[str, list[dict[str, Any]]]:
    """An eval run's ``turns.jsonl``: session id → its played turns in order (a turn that never started is
    left out: it has no id)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("session_id") and row.get("turn_id") and isinstance(row.get("text"), str):
            out.setdefault(row["session_id"], []).append(row)
    for rows in out.values():
        rows.sort(key=lambda r: int(r.get("turn") or 0))
    return out


def read_events(directory: Path) -> list[dict[str, Any]]:
    """Every event record under ``directory`` (``events-*.jsonl``), in file order; unreadable lines skipped."""
    out: list[dict[str, Any]] = []
    for f in sorted(directory.glob("events-*.jsonl")):
        with f.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict):
                    out.append(rec)
    return out


async def _store_turns(store: Any, ids: list[str], principal: str | None) -> dict[str, list[dict[str, Any]]]:
    """The stored turns of each session (texts restored for the operator, in memory only)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for sid in ids:
        if principal is not None and await store.owner(sid) != principal:
            continue
        rows = [{"turn_id": r.turn_id, "text": r.user_text, "user_id": r.user_id, "locale": r.locale}
                for r in await store.get_history(sid)]
        if rows:
            out[sid] = rows
    return out


def load_sessions(ns: argparse.Namespace, args: Any) -> tuple[list[Any], Path]:
    """The logged sessions ``--from`` names, narrowed by the filters, with their events; and the telemetry
    folder read. Raises :class:`InvalidInput` when nothing is found."""
    from pipelines.core.whatif import LoggedSession, LoggedTurn, group_events, sessions_of_events
    from serve.stores import make_store
    from serve.telemetry import telemetry_dir

    src = Path(ns.source).expanduser()
    default_tele = Path(args.telemetry.jsonl_dir or telemetry_dir()).expanduser()
    rows: dict[str, list[dict[str, Any]]]
    records: list[dict[str, Any]] | None = None
    if src.is_dir() and (src / "turns.jsonl").is_file():
        tele = ns.telemetry or (src / "telemetry" if (src / "telemetry").is_dir() else default_tele)
        rows = _run_rows(src / "turns.jsonl")
        if ns.principal is not None:
            owned = asyncio.run(_store_turns(make_store(args.store), sorted(rows), ns.principal))
            rows = {sid: r for sid, r in rows.items() if sid in owned}
    else:
        if src.is_dir():
            tele = ns.telemetry or src
            records = read_events(tele)
            ids = sorted(sessions_of_events(group_events(records)))
        else:
            tele = ns.telemetry or default_tele
            ids = ([x.strip() for x in src.read_text().splitlines() if x.strip()] if src.is_file()
                   else [x.strip() for x in ns.source.split(",") if x.strip()])
        rows = asyncio.run(_store_turns(make_store(args.store), ids, ns.principal))
    events = group_events(read_events(tele) if records is None else records,
                          {r["turn_id"] for rs in rows.values() for r in rs})
    sessions = [LoggedSession(session_id=sid, turns=[
        LoggedTurn(turn_id=r["turn_id"], index=i, text=r["text"], user_id=r.get("user_id"),
                   locale=r.get("locale") or "en", events=events.get(r["turn_id"], []))
        for i, r in enumerate(rs)]) for sid, rs in sorted(rows.items())]
    since, until = _when(ns.since), _when(ns.until)
    if since is not None or until is not None:
        def inside(s: Any) -> bool:
            t = s.turns[0].started_at
            return t is not None and (since is None or t >= since) and (until is None or t < until)
        sessions = [s for s in sessions if inside(s)]
    if ns.sample is not None and ns.sample < len(sessions):
        sessions = sorted(random.Random(ns.seed).sample(sessions, ns.sample), key=lambda s: s.session_id)
    if not sessions:
        raise InvalidInput(f"no logged session found from {ns.source!r}"
                           + (f" for principal {ns.principal!r}" if ns.principal else ""))
    return sessions, Path(tele)


# -- the two sides ----------------------------------------------------------------------------------------


def _yaml(path: Path) -> Any:
    import yaml

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read table {path}: {exc}", details={"path": str(path)}) from exc


def table_override(bundle: dict[str, Any], kind: str, path: Path, name: str) -> dict[str, Any]:
    """``bundle`` (a rules bundle as a dict) with one table replaced from ``path``; the bundle version names
    the tables it holds, as a pack's does."""
    from pipelines.domain import read_tables

    if kind == "rules":
        return read_tables(path, name) if path.is_dir() else dict(_yaml(path))
    out = {**bundle, kind: _yaml(path)}
    try:
        parts = [out["phi"]["version"], out["psi"]["version"], out["tiers"]["version"]]
        parts += [out["w3"][b]["version"] for b in sorted(out["w3"])]
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"table {kind} in {path}: a versioned table is expected ({exc})",
                          details={"path": str(path)}) from exc
    out["version"] = f"{bundle['version'].split(':', 1)[0]}:" + "+".join(parts)
    return out


def _live_tables(entry: Any) -> tuple[Any, Any]:
    """The rules bundle and guard table the app's ``deployments`` user_configs set (``None``: packaged)."""
    rules = guard = None
    for d in entry.deployments:
        if d.name == "RuleKernels":
            rules = d.user_config.get("rules")
        elif d.name == "GuardrailsServer":
            guard = d.user_config.get("table")
        elif d.name == "TandemIngress":
            guard = (d.user_config.get("guardrails") or {}).get("table", guard)
    return rules, guard


def _side(label: str, settings: Any, domain: str, rules: Any, guard: Any, **extra: Any) -> Any:
    from pipelines.core.kernels import LocalRuleKernels
    from pipelines.core.whatif import Setup
    from pipelines.counters import Counters
    from pipelines.domains import load_domain, load_rule_bundle
    from pipelines.guardrails import LocalGuardrails
    from pipelines.registry import Parts, build_pipeline
    from pipelines.sgc.tables import RuleTablesHolder

    try:
        pack = load_domain(domain)
    except ValueError as exc:  # an unknown pack: the installed names are in the message
        raise ConfigError(str(exc)) from exc
    tables = load_rule_bundle(domain, rules)
    kernels = LocalRuleKernels.of(pack, RuleTablesHolder(tables))

    def build(models: Any, tools: Any, guardrails: Any, kern: Any) -> Any:
        return build_pipeline(settings, Parts(models=models, domain=domain, tools=tools, guardrails=guardrails,
                                              kernels=kern, counters=Counters()))

    return Setup(label=label, build=build, guardrails=LocalGuardrails(guard), kernels=kernels, tables=tables,
                 history_turns=max(settings.max_history_turns, 1), deadline_s=settings.turn_deadline_s, **extra)


def build_sides(ns: argparse.Namespace, entry: Any, live: Any = None) -> tuple[Any, Any, dict[str, Any]]:
    """The baseline (the app as configured) and the candidate (``--table``, ``--pack``, ``--model``), and the
    candidate's description for the report."""
    from pipelines.domains import load_domain

    args = entry.args
    if args.pipeline.kind != "tandem":
        raise ConfigError(f"the what-if re-decides tandem turns; {ns.config} runs {args.pipeline.kind!r}")
    base_rules, base_guard = _live_tables(entry)
    name = args.domain.name
    cand_name = ns.pack or name
    cand_rules = base_rules if cand_name == name else None
    cand_guard = base_guard
    try:
        bundle = cand_rules or load_domain(cand_name).rule_tables()
    except ValueError as exc:
        raise ConfigError(f"--pack: {exc}") from exc
    facets: list[str] = [f"pack {name} → {cand_name}"] if cand_name != name else []
    for spec in ns.table:
        kind, _, file = spec.partition("=")
        if kind not in TABLE_KINDS or not file:
            raise InvalidInput(f"--table {spec!r}: expected KIND=FILE with KIND one of {', '.join(TABLE_KINDS)}")
        path = Path(file).expanduser()
        if kind == "guard":
            cand_guard = str(path)
        else:
            bundle = table_override(bundle, kind, path, cand_name)
        facets.append(f"{kind} table from {path.name}")
    roles = _model_swaps(ns.model, args)
    facets += [f"model {role} → {model}" for role, model in roles.items()]
    base = _side("baseline", args.pipeline, name, base_rules, base_guard)
    cand = _side("candidate", args.pipeline, cand_name, bundle, cand_guard, live=live,
                 live_roles=tuple(roles), rerun_changed=ns.rerun_changed, facets=facets)
    describe = {"config": str(ns.config), "pack": cand_name, "tables": cand.tables.versions(),
                "baseline_tables": base.tables.versions(), "guard": cand.guardrails.version,
                "baseline_guard": base.guardrails.version, "models": roles, "facets": facets,
                "rerun_changed": ns.rerun_changed}
    return base, cand, describe


def _model_swaps(specs: list[str], args: Any) -> dict[str, str]:
    from pipelines.protocols import ROLES

    out: dict[str, str] = {}
    for spec in specs:
        role, _, model = spec.partition("=")
        if role not in ROLES or model not in args.models:
            raise InvalidInput(f"--model {spec!r}: expected ROLE=MODEL with ROLE one of {', '.join(ROLES)} and MODEL "
                               f"a models entry of the config ({', '.join(args.models)})")
        out[role] = model
    return out


# -- main -------------------------------------------------------------------------------------------------


def write_report(report: Any, out: Path) -> list[Path]:
    """``whatif.json``, ``whatif.md`` and ``whatif.html`` under ``out``."""
    from serve.whatif_render import html, markdown

    out.mkdir(parents=True, exist_ok=True)
    data = report.model_dump(mode="json")
    paths = [out / "whatif.json", out / "whatif.md", out / "whatif.html"]
    paths[0].write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(data), encoding="utf-8")
    paths[2].write_text(html(data), encoding="utf-8")
    return paths


def run(ns: argparse.Namespace) -> int:
    from pipelines.core.whatif import parse_gates, tripped, what_if
    from serve.config import load_serve_file
    from serve.whatif_models import live_models

    gates = parse_gates(ns.fail_on)
    entry = load_serve_file(ns.config).applications[0]
    sessions, tele = load_sessions(ns, entry.args)
    roles = _model_swaps(ns.model, entry.args)
    wanted = dict(roles)
    if ns.rerun_changed:
        wanted.update({r: getattr(entry.args.roles, r) for r in ("orchestrator", "generator", "slot_extractor")
                       if r not in wanted})
    with live_models(entry.args, wanted, num_cpus=ns.num_cpus) as live:
        base, cand, describe = build_sides(ns, entry, live)
        describe.update(sessions=len(sessions), telemetry=str(tele))
        t0 = time.perf_counter()
        report = asyncio.run(what_if(sessions, base, cand, concurrency=ns.concurrency, keep=ns.first,
                                     describe=describe))
    paths = write_report(report, ns.out)
    kinds = ", ".join(f"{k} {c.changed}" for k, c in report.by_kind.items() if c.changed) or "none"
    print(f"{report.replayed}/{report.turns} turns re-decided in {time.perf_counter() - t0:.1f} s "
          f"({report.turns_per_min} turns/min); {report.changed} changed ({kinds}); "
          f"newly refused {report.newly_refused}, newly escalated {report.newly_escalated}; "
          f"baseline differs from the log in {len(report.not_reproduced)}; skipped sessions {len(report.skipped)}")
    print("wrote " + ", ".join(str(p) for p in paths))
    crossed = tripped(report, gates)
    for line in crossed:
        print(f"fail-on: {line}")
    return 1 if crossed else 0


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        return run(ns)
    except TandemError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
