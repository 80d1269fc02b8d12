"""Smoke runs of the benchmark scripts that need no Ray: they must not rot while their app moves on."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipelines.registry import KINDS
from serve.config import load_serve_file

REPO = Path(__file__).resolve().parents[2]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"_smoke_{name}", REPO / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_bench_first_token_config_loads_for_every_app_kind(kind: str, tmp_path: Path) -> None:
    """The bench's app config: the embedded default's pipeline settings narrowed to the app's kind."""
    bench = _script("bench_first_token")
    raw = yaml.safe_load((REPO / "configs" / "embedded.yaml").read_text())
    entry = raw["applications"][0]
    entry["args"]["pipeline"] = bench.pipeline_for_kind(entry["args"]["pipeline"], kind)
    if kind not in ("tandem",) and entry["args"].get("domain", {}).get("name") == "support":
        domains = KINDS[kind].domains
        if domains is not None and "support" not in domains:
            entry["args"]["domain"] = {"name": domains[0]}
    (tmp_path / "app.yaml").write_text(yaml.safe_dump(raw))
    args = load_serve_file(tmp_path / "app.yaml").applications[0].args
    assert args.pipeline.kind == kind
    # the settings every kind reads keep the config's values
    assert args.pipeline.max_reply_tokens == 96 and args.pipeline.seed == 0


def test_pipeline_for_kind_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown pipeline kind 'nope'"):
        _script("bench_first_token").pipeline_for_kind({}, "nope")


@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "scripts").glob("device_*.py")))
def test_device_scripts_parse_their_arguments_without_a_gpu(name: str) -> None:
    source = (REPO / "scripts" / f"{name}.py").read_text()
    compile(source, name, "exec")  # every device script is valid Python here
    if "argparse" not in source:
        return  # takes no arguments: compiling it is all that runs without a GPU
    res = subprocess.run([sys.executable, str(REPO / "scripts" / f"{name}.py"), "--help"], cwd=REPO,
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "usage:" in res.stdout


def _run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([sys.executable, str(REPO / "scripts" / f"{name}.py"), *args], cwd=REPO,
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return res


def test_bench_kernels_smallest_run_writes_its_summary(tmp_path: Path) -> None:
    import json

    out = tmp_path / "k.json"
    _run_script("bench_kernels", "--sessions", "2", "--turns", "3", "--out", str(out))
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "sgc_kernels" and doc["turns"] == 6 and doc["sessions"] == 2
    assert set(doc["kernels"]) >= {"total"} and doc["kernels"]["total"]["p50_us"] > 0


def test_bench_span_export_smallest_run_writes_both_modes_and_their_ratio(tmp_path: Path) -> None:
    import json

    out = tmp_path / "s.json"
    _run_script("bench_span_export", "--turns", "4", "--warmup", "1", "--out", str(out))
    doc = json.loads(out.read_text())
    assert doc["sync"]["n"] == 4 and doc["batch"]["n"] == 4
    assert set(doc["ratio_sync_over_batch"]) == {"p50", "p90"}
    # both modes wrote every span of every turn (5 turns), the same number
    assert doc["spans_per_turn"]["sync"] == doc["spans_per_turn"]["batch"] > 1
