"""Run mutmut over one profile and report the score per module (``make mutation``).

    python -m tests.mutation.run [--profile full|slice] [--check] [--keep] [--max-children N]

The run happens in a scratch copy (``results/mutation/<profile>/work``), never in
the working tree: the sources, tests and a ``pyproject.toml`` whose
``[tool.mutmut]`` section is generated from :mod:`tests.mutation.targets` are
copied there and ``mutmut run`` is started in it. Afterwards every mutant's
verdict is read from mutmut's ``.meta`` files and

* the score per module is printed: killed / (all − equivalent − skipped), a
  timeout counting as killed (the mutant made a test hang);
* every surviving mutant that ``tests/MUTATION.md`` does not list as equivalent
  is printed with its diff;
* ``results/mutation/<profile>/summary.json`` and ``survivors.md`` are written.

``--check`` exits 1 when a module scores under the threshold or (profile
``slice``) when any survivor is not listed as equivalent.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.mutation.table import MODULE as TABLE_MODULE
from tests.mutation.table import run_table_mutants
from tests.mutation.targets import LEAN_PYTEST_ARGS, PROFILES, THRESHOLD, Profile

__all__ = ["ModuleScore", "main", "equivalents", "tally", "write_pyproject"]

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("pipelines", "serve", "models", "configs", "scripts", "tests")
MUTATION_MD = ROOT / "tests" / "MUTATION.md"
_MUTANT_RE = re.compile(r"`?(pipelines(?:\.\w+)+__\w+)`?")
KILLED = {"killed", "timeout", "caught by type check"}


@dataclass
class ModuleScore:
    """The verdicts of one module's mutants."""

    module: str
    counts: dict[str, int] = field(default_factory=dict)
    equivalent: int = 0
    survivors: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def killed(self) -> int:
        return sum(n for status, n in self.counts.items() if status in KILLED)

    @property
    def unchecked(self) -> int:
        """Mutants an interrupted run did not reach (left out of the score, shown apart)."""
        return self.counts.get("not checked", 0)

    @property
    def scored(self) -> int:
        """Mutants the score counts: all but the equivalent, skipped and unchecked ones."""
        return self.total - self.equivalent - self.counts.get("skipped", 0) - self.unchecked

    @property
    def score(self) -> float:
        return self.killed / self.scored if self.scored else 1.0


def equivalents(text: str) -> dict[str, str]:
    """Mutant name → reason, from the equivalent-mutant table of ``tests/MUTATION.md``.

    A row is ``| `pipelines.x.y.x_f__mutmut_3` | reason |``; other lines are ignored.
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2:
            m = _MUTANT_RE.fullmatch(cells[0])
            if m and cells[1]:
                out[m.group(1)] = cells[1]
    return out


def _existing(tests: tuple[str, ...]) -> list[str]:
    missing = [t for t in tests if not (ROOT / t).exists()]
    if missing:
        raise SystemExit(f"test files listed in tests/mutation/targets.py are missing: {missing}")
    return list(dict.fromkeys(tests))  # a file listed by two parts of a profile, once


def write_pyproject(src: Path, dst: Path, profile: Profile) -> None:
    """Copy ``pyproject.toml`` with a ``[tool.mutmut]`` section for ``profile``."""
    text = src.read_text()
    text = re.sub(r"(?ms)^\[tool\.mutmut\].*?(?=^\[|\Z)", "", text)
    section = [
        "[tool.mutmut]",
        'source_paths = ["pipelines"]',
        f"only_mutate = {json.dumps(list(profile.modules))}",
        f"also_copy = {json.dumps([p for p in COPIED if p not in ('pipelines', 'tests')])}",
        f"pytest_add_cli_args_test_selection = {json.dumps(_existing(profile.tests))}",
        f"pytest_add_cli_args = {json.dumps(list(LEAN_PYTEST_ARGS))}",
        "use_git_change_detection = false",
        "use_setproctitle = false",
        "timeout_multiplier = 10.0",
    ]
    dst.write_text(text.rstrip() + "\n\n" + "\n".join(section) + "\n")


def _sync(work: Path, profile: Profile, keep: bool) -> None:
    if not keep and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for name in COPIED:
        shutil.copytree(ROOT / name, work / name, dirs_exist_ok=True, ignore=ignore)
    # A kept run keeps its mutmut section: a changed test selection would make mutmut drop
    # every verdict. New tests in the listed files are still found (mutmut collects them).
    if not (keep and (work / "pyproject.toml").exists()):
        write_pyproject(ROOT / "pyproject.toml", work / "pyproject.toml", profile)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MUTANT_UNDER_TEST")}
    # the scratch copy is not beside the shared data folder: point at it explicitly
    shared = Path(os.environ.get("TANDEM_SHARED_DATA") or ROOT.parent / "shared" / "data")
    env.setdefault("TANDEM_SHARED_DATA", str(shared))
    env.setdefault("TANDEM_TAU2_DIR", str(shared / "tau2-retail"))
    env["TANDEM_STRICT_SKIPS"] = "0"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


_STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
           36: "timeout", 37: "caught by type check", 24: "timeout", -24: "timeout", 152: "timeout",
           255: "timeout", 2: "interrupted", None: "not checked"}


def _status(code: int | None) -> str:
    return _STATUS.get(code, "suspicious")


def tally(mutants_dir: Path, equivalent: dict[str, str]) -> dict[str, ModuleScore]:
    """Per module, the verdict counts read from mutmut's ``.meta`` files."""
    out: dict[str, ModuleScore] = {}
    for meta in sorted(mutants_dir.rglob("*.py.meta")):
        rel = meta.relative_to(mutants_dir).as_posix()[: -len(".meta")]
        data = json.loads(meta.read_text())
        codes = data.get("exit_code_by_key", {})
        if not codes:
            continue
        score = ModuleScore(module=rel)
        counts: Counter[str] = Counter()
        for name, code in sorted(codes.items(), key=lambda kv: _natural(kv[0])):
            status = _status(code)
            counts[status] += 1
            if status in KILLED or status == "not checked":
                continue
            if name in equivalent:
                score.equivalent += 1
            else:
                score.survivors.append(name)
        score.counts = dict(counts)
        out[rel] = score
    return out


_ERROR_TABLE_TESTS = ("tests/unit/test_errors.py",)


def _table_score(table: dict[str, list[str]], equivalent: dict[str, str]) -> ModuleScore:
    score = ModuleScore(module=TABLE_MODULE)
    counts: Counter[str] = Counter()
    for name, (status, _) in table.items():
        counts[status] += 1
        if status not in KILLED:
            if name in equivalent:
                score.equivalent += 1
            else:
                score.survivors.append(name)
    score.counts = dict(counts)
    return score


def _natural(name: str) -> tuple[str, int]:
    head, _, num = name.rpartition("_")
    return (head, int(num) if num.isdigit() else -1)


def _diffs(work: Path, names: list[str]) -> dict[str, str]:
    if not names:
        return {}
    code = (
        "import json, sys\n"
        "from mutmut.mutation.diff_apply import get_diff_for_mutant\n"
        "out = {}\n"
        "for n in json.loads(sys.stdin.read()):\n"
        "    try:\n"
        "        out[n] = get_diff_for_mutant(n)\n"
        "    except Exception as e:\n"
        "        out[n] = f'(no diff: {e})'\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=work, env=_env(), input=json.dumps(names),
                         capture_output=True, text=True, check=False)
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {n: f"(no diff: {res.stderr.strip()[-200:]})" for n in names}


def _report(scores: dict[str, ModuleScore], diffs: dict[str, str], out: Path, profile: Profile,
            seconds: float) -> list[str]:
    lines = [f"mutation profile {profile.name}: {len(scores)} modules, {seconds:.0f} s"]
    lines.append(f"{'module':48} {'mutants':>7} {'unchecked':>9} {'killed':>6} {'equiv':>5} {'left':>4} {'score':>6}")
    low: list[str] = []
    for mod, s in sorted(scores.items()):
        flag = "" if s.score >= THRESHOLD else "  < threshold"
        if s.unchecked:
            flag += "  (partial)"
        if flag:
            low.append(mod)
        lines.append(f"{mod:48} {s.total:7d} {s.unchecked:9d} {s.killed:6d} {s.equivalent:5d} "
                     f"{len(s.survivors):4d} {100 * s.score:5.1f}%{flag}")
    total = sum(s.total for s in scores.values())
    killed = sum(s.killed for s in scores.values())
    scored = sum(s.scored for s in scores.values())
    unchecked = sum(s.unchecked for s in scores.values())
    lines.append(f"{'all':48} {total:7d} {unchecked:9d} {killed:6d} {'':5} {'':4} "
                 f"{100 * killed / max(scored, 1):5.1f}%")
    print("\n".join(lines))
    md = ["# Surviving mutants (not listed as equivalent in tests/MUTATION.md)", ""]
    for _, s in sorted(scores.items()):
        for name in s.survivors:
            md += [f"## {name}", "", "```diff", diffs.get(name, "").rstrip(), "```", ""]
    (out / "survivors.md").write_text("\n".join(md))
    survivors = [n for s in scores.values() for n in s.survivors]
    if survivors:
        print(f"\n{len(survivors)} surviving mutants (diffs in {out.relative_to(ROOT)}/survivors.md):")
        for name in survivors:
            print(f"--- {name}")
            print(diffs.get(name, "").rstrip())
    summary = {
        "profile": profile.name,
        "seconds": round(seconds, 1),
        "threshold": THRESHOLD,
        "modules": {m: {**asdict(s), "score": round(s.score, 4), "killed": s.killed, "total": s.total}
                    for m, s in sorted(scores.items())},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return low


def main(argv: list[str] | None = None) -> int:
    """Run one profile and print the report; the exit status follows ``--check``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=sorted(PROFILES), default="full")
    ap.add_argument("--check", action="store_true", help="exit 1 under the threshold")
    ap.add_argument("--keep", action="store_true", help="reuse the previous run's scratch copy and verdicts")
    ap.add_argument("--max-children", type=int, default=None)
    ap.add_argument("--report-only", action="store_true", help="re-read the last run's verdicts")
    ap.add_argument("mutants", nargs="*", help="re-run only these mutants (implies --keep)")
    args = ap.parse_args(argv)
    profile = PROFILES[args.profile]
    out = ROOT / "results" / "mutation" / profile.name
    work = out / "work"
    started = time.monotonic()
    if not args.report_only:
        _sync(work, profile, keep=args.keep or bool(args.mutants))
        cmd = [sys.executable, "-m", "mutmut", "run", "--max-children",
               str(args.max_children or profile.max_children), *args.mutants]
        with open(out / "mutmut.log", "w") as log:
            res = subprocess.run(cmd, cwd=work, env=_env(), stdout=log, stderr=subprocess.STDOUT, check=False)
        if res.returncode != 0:
            print(f"mutmut run failed (exit {res.returncode}); see {out / 'mutmut.log'}", file=sys.stderr)
            print((out / "mutmut.log").read_text()[-3000:], file=sys.stderr)
            return 2
    table_file = out / "table.json"
    if "pipelines/errors.py" in profile.modules and not args.report_only and not args.mutants:
        os.environ["TANDEM_STRICT_SKIPS"] = "0"
        table_file.write_text(json.dumps(run_table_mutants(list(_ERROR_TABLE_TESTS)), indent=2) + "\n")
    equivalent = equivalents(MUTATION_MD.read_text()) if MUTATION_MD.exists() else {}
    scores = tally(work / "mutants", equivalent)
    diffs = _diffs(work, [n for s in scores.values() for n in s.survivors])
    if table_file.exists():
        table = json.loads(table_file.read_text())
        scores[TABLE_MODULE] = _table_score(table, equivalent)
        diffs.update({name: desc for name, (_, desc) in table.items()})
    if not scores:
        print("no mutation verdicts found", file=sys.stderr)
        return 2
    low = _report(scores, diffs, out, profile, time.monotonic() - started)
    if args.check:
        if low:
            print(f"\nunder {100 * THRESHOLD:.0f} %: {', '.join(low)}", file=sys.stderr)
            return 1
        if any(s.unchecked for s in scores.values()):
            print("\nthe run did not reach every mutant", file=sys.stderr)
            return 1
        if profile.name == "slice" and any(s.survivors for s in scores.values()):
            print("\nthe slice must kill every mutant not listed as equivalent", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
