"""``tandem eval``: chosen pipelines over chosen suites through the public API, one table, one plot.

    tandem eval --config configs/embedded.yaml --pipelines tandem,dr,prompting \\
        --suites tau2-openings,flows --limit 20 --out results/eval
    tandem eval --pipelines tandem,sgc_full --suites coach
    tandem eval --http http://127.0.0.1:8000 --telemetry ~/.cache/tandem/telemetry --pipelines tandem
    tandem eval --resummarise results/eval/turns.jsonl

Without ``--http`` it starts one local Ray and, per pipeline kind and domain, one app
from ``--config`` (strictly validated; fresh stores and world in a work folder; the
kind's own pipeline section), warms it up, plays the suites of that domain over HTTP/SSE,
and deletes it. With ``--http`` it plays against a running app (loopback unless
``--allow-remote``); ``--telemetry`` names its event-log folder, without which the
decision measures are not judged. Bounded: ``--limit`` tau2 tasks, ``--pack-sessions``
× ``--pack-turns`` of a pack's generated suites, ``--max-wall-s`` for the whole run (the remaining turns are skipped
and the run is marked partial).

Writes ``<out>/summary.json`` (``pipelines.<kind>`` and ``suites.<suite>``),
``<out>/summary.md``, ``<out>/first_token_cdf.png`` and ``<out>/turns.jsonl`` (every
turn), and prints the table, the first-token ratios and the goals. Interrupted (Ctrl-C), it shuts its
local Ray down, summarises the turns played so far (``run.interrupted``, ``run.partial``) and exits 130.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .report import markdown, plot_first_token_cdf, summary_doc
from .suites import (
    TAU2_SUITES,
    Case,
    SuiteOptions,
    default_domain,
    pack_suite,
    resolve_suites,
    suite_packs,
    tau2_suite,
    tau2_tasks_suite,
)

__all__ = ["build_parser", "main", "build_cases"]

REPO = Path(__file__).resolve().parents[2]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tandem eval", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", type=Path, default=REPO / "configs" / "embedded.yaml")
    p.add_argument("--pipelines", default="tandem,dr,prompting", help="comma-separated pipeline kinds")
    p.add_argument("--suites", default="tau2-openings,flows",
                   help="comma-separated: tau2-openings, tau2-tasks and the installed packs' own suites")
    p.add_argument("--tau2-dir", type=Path, default=None,
                   help="folder with tasks_train.json and db.json (default: the pack's task replay folder)")
    p.add_argument("--domain", default=None,
                   help="the pack a suite runs on when several have it (an installed `tandem.domains` entry point; "
                   "default: the config's domain.name)")
    p.add_argument("--limit", type=int, default=20, help="tau2 tasks in file order (0 = all)")
    p.add_argument("--max-user-turns", type=int, default=30, help="tau2-tasks: user turns per task at most")
    p.add_argument("--user", default="instructed",
                   help="tau2-tasks: the scripted user — instructed (says only what its instructions say; the default) "
                   "or informed (answers from the task's expected actions, for comparison); both, comma-separated, "
                   "play each task with each")
    p.add_argument("--perception", default="model",
                   help="tau2-tasks: model (the turn perceives) or oracle (each turn carries the intent of the request "
                   "the user pursues: the mechanisms after perception measured apart; tandem only); both, "
                   "comma-separated, play each task with each (one app takes the labels and plays both)")
    p.add_argument("--half", choices=("all", "studied", "measured"), default="all",
                   help="tau2 suites: every task, or one half of the fixed split (seed SPLIT_SEED)")
    p.add_argument("--verbatim", action="store_true", help="send reason_for_call unchanged (second person)")
    p.add_argument("--pack-sessions", type=int, default=4, help="sessions of a pack's generated suites")
    p.add_argument("--pack-turns", type=int, default=5, help="turns per session of a pack's generated suites")
    p.add_argument("--seed", type=int, default=0, help="seed of a pack's generated sessions")
    p.add_argument("--warmup", type=int, default=2, help="unmeasured turns after each app start (at most 2)")
    p.add_argument("--out", type=Path, default=REPO / "results" / "eval")
    p.add_argument("--workdir", type=Path, default=None, help="keep stores, worlds and telemetry here "
                   "(default: a temporary folder, removed at the end)")
    p.add_argument("--num-cpus", type=float, default=4, help="logical CPUs of the local Ray")
    p.add_argument("--deploy-timeout-s", type=float, default=900.0)
    p.add_argument("--turn-timeout-s", type=float, default=300.0)
    p.add_argument("--max-wall-s", type=float, default=7200.0, help="stop issuing turns after this long")
    p.add_argument("--http", default=None, help="evaluate a running app at this base URL (one pipeline)")
    p.add_argument("--telemetry", type=Path, default=None, help="with --http: the app's event-log folder")
    p.add_argument("--api-key", default=None)
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --http (never the default)")
    p.add_argument("--resummarise", type=Path, default=None, metavar="TURNS_JSONL",
                   help="recompute summary, table and plot from a saved turns.jsonl (no app)")
    return p


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def build_cases(ns: argparse.Namespace, plan: list[tuple[str, list[str]]], world_seed: int) -> dict[str, list[Case]]:
    """The cases of each suite, built on the pack it runs on (raises ValueError when a suite's data is missing)."""
    from pipelines.core.evaluation import evaluation_of
    from pipelines.domains import load_domain

    from .suites import tau2_dir_of

    out: dict[str, list[Case]] = {}
    for domain, suites in plan:
        pack = load_domain(domain)
        kit = evaluation_of(pack)
        for s in suites:
            if s in TAU2_SUITES:
                base = ns.tau2_dir or tau2_dir_of(pack)
                if base is None or not (base / "tasks_train.json").is_file() or (
                        s == "tau2-tasks" and not (base / "db.json").is_file()):
                    raise ValueError(f"tau2 tasks (tasks_train.json, db.json) of the {domain} pack not found in "
                                     f"{base} (use --tau2-dir)")
                half = getattr(ns, "half", "all")
                if s == "tau2-openings":
                    out[s] = tau2_suite(base, ns.limit, verbatim=ns.verbatim, kit=kit, half=half)
                else:
                    if not kit.plays_tasks:
                        raise ValueError(f"the {domain} pack has no scripted user for whole tau2 tasks")
                    out[s] = tau2_tasks_suite(base, ns.limit, verbatim=ns.verbatim, kit=kit, half=half)
            else:
                out[s] = pack_suite(kit, s)(SuiteOptions(world_seed=world_seed, seed=ns.seed,
                                                         sessions=ns.pack_sessions, turns=ns.pack_turns))
    return out


def plan_suites(ns: argparse.Namespace, suites: list[str],
                known: dict[str, list[str]] | None = None) -> list[tuple[str, list[str]]]:
    """The suites grouped by the pack each runs on (``--domain``, else the config's domain)."""
    return resolve_suites(suites, ns.domain or default_domain(ns.config), suite_packs() if known is None else known)


def _validate(ns: argparse.Namespace) -> tuple[list[str], list[str]]:
    from pipelines.registry import kind_record

    kinds, suites = _split(ns.pipelines), _split(ns.suites)
    if not suites:
        raise ValueError("no suite given")
    for k in kinds:
        kind_record(k)  # raises ValueError for an unknown kind
    if not kinds:
        raise ValueError("no pipeline kind given")
    if ns.http:
        from serve.loadtest.clients import check_target

        check_target(ns.http, allow_remote=ns.allow_remote)
        if len(kinds) != 1:
            raise ValueError("--http evaluates the one pipeline the running app serves: give one kind")
    if ns.pack_sessions * ns.pack_turns > 400 or ns.limit < 0 or ns.limit > 500:
        raise ValueError("bounded runs only: --limit 0..500, pack sessions x turns <= 400")
    users, perceptions = _split(ns.user), _split(ns.perception)
    if not users or set(users) - {"instructed", "informed"}:
        raise ValueError(f"--user: instructed, informed or both (got {ns.user!r})")
    if not perceptions or set(perceptions) - {"model", "oracle"}:
        raise ValueError(f"--perception: model, oracle or both (got {ns.perception!r})")
    return kinds, suites


def _progress(out: Path) -> Any:
    """Print each row and append it to ``<out>/turns.jsonl`` as it comes (a crash keeps what was played)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "turns.jsonl"
    path.write_text("")

    def on_row(row: dict[str, Any]) -> None:
        with path.open("a") as f:
            f.write(json.dumps(row, default=str) + "\n")
        _print_row(row)

    return on_row


def _print_row(row: dict[str, Any]) -> None:
    if row.get("eval_error"):
        print(f"  {row['kind']:9} {row['suite']:13} {row['case'][:22]:22} t{row['turn']} "
              f"EVAL ERROR {row['eval_error']}", flush=True)
        return
    ft = row.get("first_token_ms")
    extra = f"correct={row['correct']}" if row.get("correct") is not None else ""
    if row.get("measures"):
        extra = " ".join(f"{k}={v}" for k, v in row["measures"].items())
    print(f"  {row['kind']:9} {row['suite']:13} {row['case'][:22]:22} t{row['turn']} "
          f"first={'-' if ft is None else f'{ft:.0f}'}ms e2e={row['e2e_ms']:.0f}ms path={row.get('path')} "
          f"{extra}", flush=True)


def _resummarise(path: Path, out: Path) -> int:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    run_file = out / "summary.json"
    run = json.loads(run_file.read_text()).get("run", {}) if run_file.is_file() else {}
    _write(out, rows, {**run, "resummarised_from": str(path)})
    return 0


def _write(out: Path, rows: list[dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
    from serve.loadtest.report import write_json

    out.mkdir(parents=True, exist_ok=True)
    doc = summary_doc(rows, run)
    write_json(out / "summary.json", doc)
    (out / "summary.md").write_text(markdown(doc))
    with (out / "turns.jsonl").open("w") as f:
        for r in rows:
            f.write(json.dumps(r, default=str) + "\n")
    png = plot_first_token_cdf(out / "first_token_cdf.png", rows)
    print()
    print(markdown(doc))
    print(f"wrote {out / 'summary.json'}, {out / 'summary.md'}, {out / 'turns.jsonl'}"
          + (f", {png}" if png else ""))
    return doc


def main(argv: list[str] | None = None) -> int:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    ns = build_parser().parse_args(argv)
    if ns.resummarise:
        return _resummarise(ns.resummarise, ns.out)
    try:
        kinds, suites = _validate(ns)
        import yaml

        base_args = yaml.safe_load(ns.config.read_text())["applications"][0]["args"]
        world_seed = int((base_args.get("domain") or {}).get("seed", 7))
        ns.plan = plan_suites(ns, suites)
        cases = build_cases(ns, ns.plan, world_seed)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from .run import run_all

    try:
        rows, run = run_all(ns, kinds, suites, cases, base_args, world_seed, on_row=_progress(ns.out))
    except ValueError as exc:  # e.g. --http serves another pipeline kind
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the local Ray is already shut down (run_all's finally); keep what was played
        return _interrupted(ns, kinds, suites)
    _write(ns.out, rows, run)
    return 0 if rows else 1


def _interrupted(ns: argparse.Namespace, kinds: list[str], suites: list[str]) -> int:
    """The summary of the turns played before an interrupt (``run.interrupted``, ``run.partial``); exit 130."""
    played = ns.out / "turns.jsonl"
    rows = [json.loads(x) for x in played.read_text().splitlines() if x.strip()] if played.is_file() else []
    print(f"\ninterrupted after {len(rows)} turns", file=sys.stderr)
    if rows:
        _write(ns.out, rows, {"config": str(ns.config), "pipelines": kinds, "suites": suites, "http": ns.http,
                              "interrupted": True, "partial": True})
    return 130


if __name__ == "__main__":
    raise SystemExit(main())

