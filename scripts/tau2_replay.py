"""Replay tau2-retail's training tasks through the support domain's tool registry.

Usage: ``python scripts/tau2_replay.py [--tau2-dir DIR] [--out results/tau2_replay.json]``.
The data directory defaults to ``$TANDEM_TAU2_DIR`` or ``../shared/data/tau2-retail``.
Prints one line per task that is not ok, a summary, and writes the full report as JSON.
Exit status: 0 when no task mismatches, 1 otherwise, 2 when the data is missing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.domains.support.replay import default_tau2_dir, replay_all  # noqa: E402

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the replay, print the findings and the summary, write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tau2-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("results/tau2_replay.json"))
    ns = parser.parse_args(argv)
    base = ns.tau2_dir or default_tau2_dir()
    if not (base / "db.json").is_file() or not (base / "tasks_train.json").is_file():
        print(f"tau2-retail data not found in {base} (set TANDEM_TAU2_DIR)", file=sys.stderr)
        return 2
    report = replay_all(base)
    for task in report.tasks:
        for action in task.actions:
            print(f"task {task.task_id:>3} {action.status:<8} {action.action_id:<6} {action.name}: "
                  f"{action.reason or ''} {action.detail or ''}".rstrip())
    counts = report.counts
    print(f"tasks: {len(report.tasks)}  ok: {counts['ok']}  refused: {counts['refused']}  "
          f"mismatch: {counts['mismatch']}")
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    print(f"report written to {ns.out}")
    return 0 if counts["mismatch"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
