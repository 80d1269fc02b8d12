"""Line-coverage floors per package, checked on a coverage.py JSON report (``make coverage``).

    python -m tests.coverage_floor results/coverage/coverage.json

Prints the line coverage of each package measured from ``tests/unit`` and
exits 1 when one is under its floor. The floors only move up: raise one when
the suite reaches more.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["FLOORS", "package_coverage", "main"]

# package prefix -> minimum line coverage in percent, from tests/unit alone. Measured on main
# with the tandem turn, the edges and serve's fake-handle unit tests in: pipelines/ 96.3 %,
# serve/ 84.1 %; the floors leave a little room for noise-free refactors and only move up.
FLOORS: dict[str, float] = {
    "pipelines/": 94.0,
    "serve/": 80.0,
}


def package_coverage(report: dict, prefix: str) -> tuple[int, int]:
    """(covered lines, statements) over the files under ``prefix``."""
    covered = statements = 0
    for path, data in report.get("files", {}).items():
        if Path(path).as_posix().startswith(prefix):
            covered += int(data["summary"]["covered_lines"])
            statements += int(data["summary"]["num_statements"])
    return covered, statements


def main(argv: list[str] | None = None) -> int:
    """Print each package's coverage and compare it with its floor."""
    args = sys.argv[1:] if argv is None else argv
    report = json.loads(Path(args[0] if args else "results/coverage/coverage.json").read_text())
    failed = []
    for prefix, floor in FLOORS.items():
        covered, statements = package_coverage(report, prefix)
        pct = 100.0 * covered / statements if statements else 0.0
        verdict = "ok" if pct >= floor else "UNDER THE FLOOR"
        print(f"coverage {prefix:12} {pct:5.1f}% of {statements} lines (floor {floor:.0f}%) {verdict}")
        if pct < floor:
            failed.append(prefix)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
