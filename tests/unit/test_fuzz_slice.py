"""A bounded slice of scripts/fuzz_api.py in every test run (the full run: ≥ 10,000 requests)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(900)

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fuzz_api.py"


def _fuzz():
    spec = importlib.util.spec_from_file_location("fuzz_api", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fuzzed_http_and_grpc_stay_inside_the_error_table() -> None:
    import os
    import tempfile

    before = set(Path(tempfile.gettempdir()).glob("tandem-fuzz-*"))
    cache = os.environ.get("TANDEM_CACHE")
    res = _fuzz().run_inprocess(http_examples=400, grpc_examples=200, seed=1)
    # its work folder is gone, and the environment is as it was
    assert set(Path(tempfile.gettempdir()).glob("tandem-fuzz-*")) <= before
    assert os.environ.get("TANDEM_CACHE") == cache
    assert res["http_requests"] >= 400 and res["grpc_requests"] == 200
    assert res["outside_table"] == 0, res["examples_outside_table"]
    assert res["hangs"] == 0
    assert res["stored_after_reject"] == 0
    assert res["served_after"] == {"http": True, "grpc": True}
    statuses = set(res["by_status"])
    # the generators reach past the edge: some turns run, some are refused for each reason
    assert {"http 200", "http 400", "http 401", "http 404", "grpc OK", "grpc INVALID_ARGUMENT",
            "grpc UNAUTHENTICATED"} <= statuses
