"""A pack exactly as ``tandem domain new`` writes it, installed outside the environment, served.

The pack is scaffolded into a temporary folder and installed with ``pip install --target`` into another;
only ``domain.paths`` names that folder, so the Serve app's own processes (the builder, the ingress, the
tools and rule-kernel replicas) find the pack's entry point through the app's runtime_env, not through
anything this test process set up for them. One streamed turn over HTTP/SSE ends with exactly one
``done``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from serve.scaffold import scaffold
from tests.integration.conftest import start_app

pytestmark = pytest.mark.integration

NAME = "ledgerbook"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("scaffold-src")
    root = scaffold(NAME, src)
    site = tmp_path_factory.mktemp("scaffold-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(root)], check=True, capture_output=True, timeout=600)
    assert (site / f"tandem_{NAME}" / "pack.py").is_file()
    assert not any(str(site) == p for p in sys.path)  # only domain.paths puts it there
    return site


@pytest.fixture(scope="module")
def app(installed: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("scaffold-serve")
    overrides = {"pipeline": {"kind": "tandem", "max_reply_tokens": 48, "turn_deadline_s": 300},
                 "domain": {"name": NAME, "seed": 7, "paths": [str(installed)],
                            "world_path": str(tmp / "world.db")}}
    yield from start_app(tmp, overrides)


def test_the_generated_pack_serves_one_streamed_turn(app) -> None:
    events = app.turn("scaffold-1", "Please show me my records.", user_id="u001")
    types = [e["type"] for e in events]
    assert types[-1] == "done" and types.count("done") == 1
    assert "error" not in types, events
    assert any(t.startswith("reply") for t in types), types
