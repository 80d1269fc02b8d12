"""The bounded chaos slice: ``scripts/chaos.py --quick`` on the multi-node cluster of one machine.

A head with no work, a model node and two CPU nodes (configs/cluster-dev.yaml, serve/cluster.py), Redis for
sessions and rate limits; steady load over HTTP/SSE and gRPC through both CPU nodes' proxies; one CPU node
lost (the one hosting the tools) and added back, one ingress replica killed mid-turn. The smallest settings:
two sessions at a time, two of them ending in a confirmed write. On a shared 2-core box the same command took
515 s (261 s of it starting four raylets and the engine); on a heavily loaded one, 20 minutes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.own_ray]

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_quick_chaos_loses_no_write_and_never_hangs(tmp_path):
    cmd = [sys.executable, str(REPO / "scripts" / "chaos.py"), "--quick", "--workers", "2", "--writes", "2",
           "--baseline-s", "30", "--window-s", "60", "--turn-timeout-s", "180", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=2400)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = json.loads((tmp_path / "chaos.json").read_text())
    assert set(report["faults"]) == {"node_loss", "ingress_kill"}
    for name, row in report["faults"].items():
        assert "error" not in row["detail"], (name, row["detail"])
        assert row["hangs"] == 0, (name, row)
        assert row["recovery_s"] is not None, (name, row)
    w = report["writes"]
    assert (w["lost"], w["doubled"], w["half_written"]) == (0, 0, 0), w["sessions"]
