"""Replay a tau2 domain's training tasks through a domain pack's tools and check the database after each write.

Usage: ``python scripts/tau2_replay.py [--domain NAME] [--tau2-dir DIR] [--out FILE]``.
``--domain`` names an installed pack that supplies a task-replay hook (``support``: tau2-retail, the
default; ``airline`` once its pack is installed). The data directory defaults to the pack's own
(support: ``$TANDEM_TAU2_DIR`` or ``../shared/data/tau2-retail``). Prints one line per action that is not
ok, a summary, and writes the full report as JSON (default ``results/tau2_replay.json`` for support,
``results/tau2_replay_NAME.json`` otherwise).
Exit status: 0 when no task mismatches, 1 otherwise, 2 when the data or the pack's hook is missing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.core.taskreplay import replay_file  # noqa: E402
from pipelines.domains import load_domain, pack_names  # noqa: E402
from pipelines.errors import ConfigError  # noqa: E402

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the replay, print the findings and the summary, write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", default="support", help="an installed domain pack (default: support)")
    parser.add_argument("--tau2-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    ns = parser.parse_args(argv)
    try:
        pack = load_domain(ns.domain)
    except (ConfigError, KeyError, ValueError) as exc:
        print(f"{exc} (installed packs: {', '.join(pack_names())})", file=sys.stderr)
        return 2
    hook = pack.task_replay(ns.tau2_dir) if callable(getattr(pack, "task_replay", None)) else None
    if hook is None:
        print(f"the {ns.domain} pack has no task replay", file=sys.stderr)
        return 2
    base = ns.tau2_dir or hook.default_dir()
    if not (base / "db.json").is_file() or not (base / "tasks_train.json").is_file():
        print(f"tau2 data for {ns.domain} not found in {base}", file=sys.stderr)
        return 2
    report = replay_file(base, hook)
    for task in report.tasks:
        for action in task.actions:
            print(f"task {task.task_id:>3} {action.status:<8} {action.action_id:<6} {action.name}: "
                  f"{action.reason or ''} {action.detail or ''}".rstrip())
    counts = report.counts
    print(f"tasks: {len(report.tasks)}  ok: {counts['ok']}  refused: {counts['refused']}  "
          f"mismatch: {counts['mismatch']}  expected errors: {counts['expected_errors']}")
    out = ns.out or Path("results/tau2_replay.json" if ns.domain == "support" else f"results/tau2_replay_{ns.domain}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    print(f"report written to {out}")
    return 0 if counts["mismatch"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
