"""Sweep grids: value splitting and parsing, Cartesian expansion, dotted overrides validated by
the strict config (a misspelt key fails before anything starts), best point, and the dry-run CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipelines.errors import ConfigError
from serve.sweep import (
    MAX_POINTS,
    best_point,
    derive_config,
    expand_grid,
    main,
    parse_axis,
    parse_value,
    point_label,
    set_dotted,
    split_values,
    validate_points,
)

REPO = Path(__file__).resolve().parents[2]
EMBEDDED = REPO / "configs" / "embedded.yaml"
NGRAM = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'


def test_split_values_respects_brackets_and_quotes():
    assert split_values("8,16") == ["8", "16"]
    assert split_values(f"none,{NGRAM}") == ["none", NGRAM]
    assert split_values("[1, 2],'a,b',\"c,d\"") == ["[1, 2]", "'a,b'", '"c,d"']
    with pytest.raises(ValueError):
        split_values("{a: 1")


def test_parse_value_types():
    assert parse_value("8") == 8 and parse_value("0.5") == 0.5
    assert parse_value("true") is True and parse_value("false") is False
    assert parse_value("none") is None and parse_value("null") is None
    assert parse_value("dr") == "dr"
    assert parse_value(NGRAM) == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4,
                                  "prompt_lookup_min": 2}


def test_parse_axis_and_errors():
    assert parse_axis("a.b.c=1,2") == ("a.b.c", [1, 2])
    assert parse_axis(f"models.m.engine_kwargs.speculative_config=none,{NGRAM}")[1][0] is None
    for bad in ("noequals", "=1,2", "a..b=1", "a.b=1,,2"):
        with pytest.raises(ValueError):
            parse_axis(bad)


def test_expand_grid_is_the_cartesian_product_first_axis_slowest():
    pts = expand_grid([("a", [1, 2]), ("b", ["x", "y", "z"])])
    assert len(pts) == 6 and pts[0] == {"a": 1, "b": "x"} and pts[3] == {"a": 2, "b": "x"}
    assert expand_grid([]) == [{}]
    with pytest.raises(ValueError):
        expand_grid([("a", [1]), ("a", [2])])
    with pytest.raises(ValueError):
        expand_grid([("a", list(range(MAX_POINTS + 1)))])


def test_set_dotted_creates_and_refuses_non_mappings():
    d = {"a": {"b": 1}}
    set_dotted(d, "a.c.d", [1])
    assert d == {"a": {"b": 1, "c": {"d": [1]}}}
    with pytest.raises(ValueError):
        set_dotted(d, "a.b.x", 2)


def test_derive_config_touches_only_the_app_args():
    base = yaml.safe_load(EMBEDDED.read_text())
    out = derive_config(base, {"models.smollm2.engine_kwargs.max_num_seqs": 8, "pipeline.kind": "dr"})
    args = out["applications"][0]["args"]
    assert args["models"]["smollm2"]["engine_kwargs"]["max_num_seqs"] == 8 and args["pipeline"]["kind"] == "dr"
    assert base["applications"][0]["args"]["models"]["smollm2"]["engine_kwargs"]["max_num_seqs"] == 16  # not mutated
    assert out["http_options"] == base["http_options"]


def test_validate_points_writes_strict_configs(tmp_path):
    axes = [parse_axis("models.smollm2.engine_kwargs.max_num_seqs=8,16"),
            parse_axis("models.smollm2.engine_kwargs.enable_prefix_caching=true,false"),
            parse_axis(f"models.smollm2.engine_kwargs.speculative_config=none,{NGRAM}"),
            parse_axis("ingress.autoscaling.target_ongoing_requests=1,4"),
            parse_axis("pipeline.kind=prompting,dr")]
    pts = expand_grid(axes)
    paths = validate_points(EMBEDDED, pts, tmp_path)
    assert len(paths) == 32 and all(p.exists() for p in paths)
    from serve.config import load_serve_file

    last = load_serve_file(paths[-1]).applications[0].args
    assert last.pipeline.kind == "dr" and last.ingress.autoscaling.target_ongoing_requests == 4
    assert last.models["smollm2"].engine_kwargs["speculative_config"]["method"] == "ngram"


@pytest.mark.parametrize("axis", ["ingress.autoscalng.target_ongoing_requests=1,2",
                                  "pipeline.knd=dr", "pipeline.kind=prompting,bogus",
                                  "models.smollm2.deployment.max_ongoing=4",
                                  "ingress.autoscaling.max_replicas=0"])
def test_typos_and_bad_values_fail_via_the_strict_config(tmp_path, axis):
    with pytest.raises(ConfigError, match="p0"):
        validate_points(EMBEDDED, expand_grid([parse_axis(axis)]), tmp_path)


def test_best_point_and_labels():
    rows = [{"status": "ok", "goodput_rps": 1.0, "ttft_p90_ms": 300.0},
            {"status": "ok", "goodput_rps": 1.0, "ttft_p90_ms": 200.0},
            {"status": "failed"},
            {"status": "ok", "goodput_rps": 0.5, "ttft_p90_ms": 50.0}]
    assert best_point(rows) == 1
    assert best_point([{"status": "failed"}]) is None
    assert point_label({"models.m.engine_kwargs.max_num_seqs": 8, "x.speculative_config": {"method": "ngram"},
                        "pipeline.kind": "dr", "a.flag": True}) == "max_num_seqs=8 speculative_config=ngram kind=dr flag=true"
    assert point_label({}) == "base"


def test_cli_dry_run_and_typo_exit_codes(tmp_path, capsys, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # the sweep's own work folders land here
    (tmp_path / "tmp").mkdir()
    assert main([str(EMBEDDED), "--set", "models.smollm2.engine_kwargs.max_num_seqs=8,16", "--dry-run",
                 "--mix", "simple", "--out", str(tmp_path / "ok")]) == 0
    assert len(list((tmp_path / "ok" / "points").glob("p*.yaml"))) == 2
    assert main([str(EMBEDDED), "--set", "pipeline.knd=dr", "--dry-run", "--mix", "simple",
                 "--out", str(tmp_path / "bad")]) == 2
    assert "unknown key" in capsys.readouterr().err
    assert main([str(EMBEDDED), "--dry-run", "--mix", "simple", "--http", "http://10.0.0.1:8000", "--address", "auto",
                 "--out", str(tmp_path / "remote")]) == 2
    assert list((tmp_path / "tmp").iterdir()) == []  # no work folder left behind, on success or refusal
