"""tests/coverage_floor.py: per-package sums and the floor verdict."""

from __future__ import annotations

import json

from tests import coverage_floor as cf

REPORT = {"files": {
    "pipelines/a.py": {"summary": {"covered_lines": 9, "num_statements": 10}},
    "pipelines/sub/b.py": {"summary": {"covered_lines": 10, "num_statements": 10}},
    "serve/c.py": {"summary": {"covered_lines": 1, "num_statements": 4}},
    "pipelinesx/d.py": {"summary": {"covered_lines": 0, "num_statements": 50}},
}}


def test_package_sums() -> None:
    assert cf.package_coverage(REPORT, "pipelines/") == (19, 20)
    assert cf.package_coverage(REPORT, "serve/") == (1, 4)
    assert cf.package_coverage(REPORT, "models/") == (0, 0)


def test_floor_verdict(tmp_path, monkeypatch, capsys) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(REPORT))
    monkeypatch.setattr(cf, "FLOORS", {"pipelines/": 95.0, "serve/": 25.0})
    assert cf.main([str(path)]) == 0  # 95.0 % and 25.0 %: both exactly at the floor
    assert "coverage pipelines/    95.0% of 20 lines (floor 95%) ok" in capsys.readouterr().out
    monkeypatch.setattr(cf, "FLOORS", {"pipelines/": 95.1, "serve/": 25.0})
    assert cf.main([str(path)]) == 1
    assert "UNDER THE FLOOR" in capsys.readouterr().out
