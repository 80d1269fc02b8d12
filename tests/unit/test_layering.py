"""The top-level folders are the architecture: check the import arrows (docs/architecture.md, Layout).

* ``pipelines/`` imports neither Ray nor vLLM (nor ``serve`` / ``models``, nor the OTel SDK).
* ``models/`` never imports ``serve`` at run time.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(path: Path, *, runtime_only: bool) -> list[tuple[int, str]]:
    """``(line, dotted module)`` of every absolute import in a file, at any depth (functions too)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip: set[int] = set()
    if runtime_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [(node.lineno, node.module)]
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
              and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__")
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value))
    return out


def _hits(package: str, forbidden: tuple[str, ...], *, runtime_only: bool) -> list[str]:
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, mod in imports(path, runtime_only=runtime_only):
            if any(mod == f or mod.startswith(f + ".") for f in forbidden):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {mod}")
    return bad


# -- the checker itself --------------------------------------------------------------------


def test_the_checker_sees_every_import_form(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "import os, ray.serve as rs\n"
        "from vllm.engine import x\n"
        "from . import sibling\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from serve.config import C\n"
        "def f():\n    import models.llm\n    import importlib; importlib.import_module('ray.util')\n"
    )
    got = {m for _, m in imports(src, runtime_only=False)}
    assert {"os", "ray.serve", "vllm.engine", "serve.config", "models.llm", "ray.util"} <= got
    assert "sibling" not in got
    runtime = {m for _, m in imports(src, runtime_only=True)}
    assert "serve.config" not in runtime and "models.llm" in runtime


# -- the arrows ------------------------------------------------------------------------------------


def test_pipelines_has_modules() -> None:
    assert len(list((ROOT / "pipelines").rglob("*.py"))) >= 8


def test_pipelines_never_imports_ray_or_vllm() -> None:
    # Even type-only imports: pipelines reaches models through Protocols, not Ray types.
    assert _hits("pipelines", ("ray", "vllm"), runtime_only=False) == []


def test_pipelines_never_imports_serve_or_models() -> None:
    assert _hits("pipelines", ("serve", "models"), runtime_only=False) == []


def test_pipelines_uses_the_otel_api_only() -> None:
    assert _hits("pipelines", ("opentelemetry.sdk", "opentelemetry.exporter"), runtime_only=False) == []


def test_models_never_imports_serve_at_run_time() -> None:
    assert _hits("models", ("serve",), runtime_only=True) == []


def test_pipelines_imports_leave_ray_and_vllm_unloaded() -> None:
    code = (
        "import json, sys\n"
        "import pipelines.errors, pipelines.events, pipelines.protocols, pipelines.telemetry\n"
        "import pipelines.turn, pipelines.annex.prompting, pipelines.tools\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    loaded = set(json.loads(res.stdout.strip().splitlines()[-1]))
    assert "pipelines" in loaded
    assert not loaded & {"ray", "vllm", "torch", "serve", "models", "fastapi", "grpc"}, loaded


@pytest.mark.parametrize("module", ["models.prepare"])
def test_models_prepare_leaves_serve_unloaded(module: str) -> None:
    code = f"import json, sys, {module}\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))\n"
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    loaded = set(json.loads(res.stdout.strip().splitlines()[-1]))
    assert not loaded & {"serve", "ray", "vllm", "torch", "transformers"}, loaded
