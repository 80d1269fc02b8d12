"""``examples/http_pack``: the pack over an HTTP service passes the conformance suite, and its own tests
(the tools against its records service on a free local port) pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipelines.domains.conformance import check_pack

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "http_pack"


def test_the_example_pack_passes_the_conformance_suite(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    from tandem_http_pack.pack import DomainPack

    assert [r.name for r in check_pack(DomainPack()) if not r.ok] == []


def test_the_example_packs_own_tests_pass() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(REPO)])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=EXAMPLE,
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "13 passed" in run.stdout
