"""The airline eval slice: ``tandem eval`` over two tau2-airline openings, the real embedded model serving
the pack (``examples/airline/airline.yaml``) through the tandem turn. Starts Ray, Serve and the engine.

What must hold on any opening, whatever the model decides: the turn streams and ends (``ok`` or a logged
``fallback``), its events are found and judged, and no card carries an argument the user never gave
(``invented``), no card is offered for an action the user did not ask for (``unrequested``), no action is
delivered that the decision did not select (``unselected``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tandem_airline.data import default_data_dir

DATA = default_data_dir()
CONFIG = Path(__file__).resolve().parents[1] / "airline.yaml"
pytestmark = pytest.mark.skipif(not (DATA / "tasks_train.json").is_file(),
                                reason="tau2-airline data not found (set TANDEM_AIRLINE_DIR)")


def test_two_airline_openings_through_the_tandem_turn(tmp_path: Path) -> None:
    from serve.eval import main

    out = tmp_path / "out"
    rc = main(["--config", str(CONFIG), "--domain", "airline", "--tau2-dir", str(DATA), "--pipelines", "tandem",
               "--suites", "tau2-openings", "--limit", "2", "--warmup", "0", "--num-cpus", "4",
               "--out", str(out), "--workdir", str(tmp_path / "work")])
    assert rc == 0
    rows = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for r in rows:
        assert not r.get("eval_error") and r["status"] in ("ok", "fallback"), r
        assert r["first_token_ms"] is not None and r["first_token_ms"] <= r["e2e_ms"]
        assert r["terminal"] is not None, r  # the turn's events were found and its decision read
        assert r["invented"] == [] and r["unrequested"] == [] and r["unselected"] == [], r
    doc = json.loads((out / "summary.json").read_text())
    assert doc["pipelines"]["tandem"]["turns"] == 2
    assert doc["run"]["apps"][0]["kind"] == "tandem" and doc["run"]["apps"][0]["domain"] == "airline"
