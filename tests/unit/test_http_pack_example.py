"""``examples/http_pack``: the pack over an HTTP service passes the conformance suite, and its own tests
(the tools against its records service on a free local port) pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipelines.domains.conformance import check_pack
from serve.scaffold import files

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "http_pack"


def test_the_example_pack_passes_the_conformance_suite(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    from tandem_http_pack import service
    from tandem_http_pack.pack import DomainPack

    url, _, stop = service.start(service.seeded(7))  # the suite reads through the pack's service
    try:
        failed = [r for r in check_pack(DomainPack(base_url=url)) if not r.ok]
    finally:
        stop()
    assert failed == []


def test_the_example_packs_own_tests_pass() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(REPO)])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=EXAMPLE,
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout and "skipped" not in run.stdout


def test_the_example_is_what_the_scaffold_writes() -> None:
    """One source: ``examples/http_pack`` is exactly ``tandem domain new http_pack --backend http``."""
    written = files("http_pack", "http")
    on_disk = {str(p.relative_to(EXAMPLE)): p.read_text() for p in EXAMPLE.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and ".egg-info" not in str(p)}
    assert sorted(on_disk) == sorted(written)
    assert [rel for rel, text in written.items() if on_disk[rel] != text] == []
