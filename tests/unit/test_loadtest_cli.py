"""The ``tandem load`` entry point without a server: guards, skips and argument errors."""

from __future__ import annotations

import pytest

from serve.loadtest import main
from serve.loadtest.cli import build_parser, slo_from_args, spec_from_args


def test_defaults_are_loopback_and_bounded():
    ns = build_parser().parse_args([])
    assert ns.http == "http://127.0.0.1:8000" and ns.grpc == "127.0.0.1:9000" and not ns.allow_remote
    spec = spec_from_args(ns, "http", ns.http)
    assert spec.requests == 100 and spec.duration_s == 60.0


def test_remote_target_is_refused_before_any_request(tmp_path, capsys):
    assert main(["--http", "http://10.0.0.7:8000", "--mix", "simple", "--out", str(tmp_path)]) == 2
    assert "--allow-remote" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_over_cap_is_an_argument_error(tmp_path, capsys):
    assert main(["--requests", "100000000", "--mix", "simple", "--out", str(tmp_path)]) == 2
    assert "requests" in capsys.readouterr().err


def test_absent_tau2_skips_cleanly(tmp_path, capsys):
    assert main(["--mix", "tau2", "--tau2", str(tmp_path / "none"), "--out", str(tmp_path / "o")]) == 0
    assert "skipped" in capsys.readouterr().err


def test_slo_flags():
    ns = build_parser().parse_args(["--slo-ttft-ms", "500", "--slo-e2e-ms", "5000"])
    assert slo_from_args(ns).as_dict() == {"ttft_ms": 500.0, "e2e_ms": 5000.0}


def test_unknown_flag_exits_2():
    with pytest.raises(SystemExit) as exc:
        main(["--bogus"])
    assert exc.value.code == 2
