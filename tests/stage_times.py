"""Where `make test`'s time goes: each stage timed, one table at the end.

    python -m tests.stage_times start results/test-times.json
    python -m tests.stage_times run results/test-times.json unit -- python -m pytest tests/unit ...
    python -m tests.stage_times report results/test-times.json

``start`` begins a fresh record; ``run`` runs one stage's command, appends its name, seconds and exit status,
and exits with the command's status (a failing stage still fails the run, after it is recorded);
``report`` prints the stages, their share of the whole and the total, and writes nothing new.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["start", "run", "report", "main"]


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {"stages": []}


def start(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"started": time.time(), "stages": []}))


def run(path: Path, name: str, cmd: list[str]) -> int:
    if not cmd:
        raise SystemExit(f"stage {name!r}: no command after --")
    t0 = time.monotonic()
    rc = subprocess.call(cmd)
    doc = _load(path)
    doc["stages"].append({"stage": name, "seconds": round(time.monotonic() - t0, 1), "rc": rc})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    if rc != 0:  # make stops here: the table so far shows where the run was
        print(report(path), file=sys.stderr)
    return rc


def report(path: Path) -> str:
    stages = _load(path)["stages"]
    total = sum(s["seconds"] for s in stages)
    width = max([len(s["stage"]) for s in stages] + [5])
    lines = [f"{'stage':<{width}}  {'seconds':>8}  {'share':>6}"]
    for s in stages:
        share = 100.0 * s["seconds"] / total if total else 0.0
        flag = "" if s["rc"] == 0 else f"  (exit {s['rc']})"
        lines.append(f"{s['stage']:<{width}}  {s['seconds']:>8.1f}  {share:>5.1f}%{flag}")
    lines.append(f"{'total':<{width}}  {total:>8.1f}  ({int(total // 60)} min {int(total % 60)} s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] not in ("start", "run", "report"):
        print(__doc__, file=sys.stderr)
        return 2
    verb, path = args[0], Path(args[1])
    if verb == "start":
        start(path)
        return 0
    if verb == "report":
        print(report(path))
        return 0
    if len(args) < 3 or "--" not in args:
        print("usage: run PATH NAME -- COMMAND...", file=sys.stderr)
        return 2
    sep = args.index("--")
    return run(path, args[2], args[sep + 1:])


if __name__ == "__main__":
    sys.exit(main())
