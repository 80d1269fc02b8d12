"""`tandem load` / `tandem sweep` run on any install: nothing they import (eagerly or inside a
function) comes from a distribution that only the `test` extra installs."""

from __future__ import annotations

import ast
import re
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ("serve", "pipelines", "models")
ENTRY_MODULES = ("serve.loadtest.cli", "serve.sweep")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dist(requirement: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert m, requirement
    return _norm(m.group(1))


def extra_only_distributions() -> set[str]:
    """Distributions the `test` extra installs and nothing else does (base deps or another extra)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    others = {_dist(r) for r in project["dependencies"]}
    for name, reqs in project["optional-dependencies"].items():
        if name != "test":
            others |= {_dist(r) for r in reqs}
    return {_dist(r) for r in project["optional-dependencies"]["test"]} - others


def _imports(path: Path) -> set[str]:
    """Dotted names of every absolute import in a file, at any depth (functions too)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def _module_file(dotted: str) -> Path | None:
    base = ROOT.joinpath(*dotted.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def closure(entries: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """(local modules reached from ``entries``, top-level names of the foreign modules they import)."""
    seen: set[str] = set()
    foreign: set[str] = set()
    todo = list(entries)
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        path = _module_file(mod)
        if path is None:
            continue
        seen.add(mod)
        parts = mod.split(".")
        for i in range(1, len(parts)):  # a package's __init__ runs before its modules
            todo.append(".".join(parts[:i]))
        for name in _imports(path):
            if name.split(".")[0] in LOCAL:
                todo.append(name)
            else:
                foreign.add(name.split(".")[0])
    return seen, foreign


def flagged_modules(foreign: set[str], test_only: set[str]) -> dict[str, list[str]]:
    """Foreign top-level modules provided only by test-only distributions."""
    providers = packages_distributions()
    out = {}
    for mod in sorted(foreign):
        dists = {_norm(d) for d in providers.get(mod, [])}
        if dists and dists <= test_only:
            out[mod] = sorted(dists)
    return out


def test_the_load_cli_needs_nothing_from_the_test_extra() -> None:
    seen, foreign = closure(ENTRY_MODULES)
    assert {"serve.loadtest.report", "serve.loadtest.runner", "serve.loadtest.deploy"} <= seen
    assert {"matplotlib", "tqdm", "httpx", "grpc", "yaml"} <= foreign  # lazy imports are seen too
    bad = flagged_modules(foreign, extra_only_distributions())
    assert bad == {}, f"the load CLI imports modules only the `test` extra installs: {bad}"


def test_plots_and_progress_come_from_base_dependencies() -> None:
    base = {_dist(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    assert {"matplotlib", "tqdm"} <= base


def test_the_check_flags_a_lazy_test_only_import(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text("import json\n\ndef f():\n    import pytest\n    from hypothesis import given\n")
    names = {n.split(".")[0] for n in _imports(mod)}
    assert names == {"json", "pytest", "hypothesis"}
    bad = flagged_modules(names, extra_only_distributions())
    assert set(bad) == {"pytest", "hypothesis"}  # json is stdlib: no distribution
    assert flagged_modules(names, set()) == {}  # nothing flagged when the extra adds nothing
