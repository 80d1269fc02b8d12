"""The learned layer of the pre-guard: a linear model over hashed character and word n-grams.

Beside the rule table, not instead of it: either may block, and a hit names its layer
(``ClassifierHit.layer``). Inference is pure numpy over a small shipped artifact
(``pipelines/guardrails/models/*.npz``), deterministic bit for bit: the same text gives the
same score on every run and every process (no Python ``hash``, no threads, a fixed
summation order).

Features (:func:`features`) are read from the text's skeleton (see :mod:`.normalize`):

    char   n-grams of 2..5 characters over the text with one space around it
           (log(1 + count), the group scaled to unit length)
    word   word unigrams and bigrams (likewise; the artifact says whether it uses them)

Groups are hashed into ``2 ** bits`` buckets by a 64-bit polynomial hash with a fixed mixer,
so training (``scripts/train_guard.py``) and inference share one function. The shipped model
reads characters only: in the method comparison word n-grams added trigger-word bias
("instructions", "mode") without catching more.

A text is scored whole and, when longer than :data:`WINDOW_CHARS`, window by window (runs of
sentences of about that size, overlapping by half): an instruction hidden in the middle of a
long document is judged on its own neighbourhood, not diluted by the document around it.
The text's score is the highest of these.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .hits import ClassifierHit
from .normalize import skeleton

__all__ = [
    "CHAR_NGRAMS",
    "WINDOW_CHARS",
    "MODELS_DIR",
    "features",
    "windows",
    "LinearGuardModel",
    "load_model",
    "score_text",
    "LearnedClassifier",
]

CHAR_NGRAMS = (2, 3, 4, 5)
WINDOW_CHARS = 320
MODELS_DIR = Path(__file__).resolve().parent / "models"

_P = np.uint64(1_000_003)
_MIX1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_WORD = re.compile(r"\w+")
_SENT = re.compile(r"(?<=[.!?:;])\s+|\n+")


def _mix(h: np.ndarray, salt: int) -> np.ndarray:
    """A fixed 64-bit finaliser (MurmurHash3's): well-spread buckets from a polynomial hash."""
    h = h ^ np.uint64(salt)
    h = h ^ (h >> np.uint64(33))
    h = h * _MIX1
    h = h ^ (h >> np.uint64(33))
    h = h * _MIX2
    return h ^ (h >> np.uint64(33))


def _group(idx: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Bucket ids -> (sorted unique buckets, log(1+count) scaled to unit length)."""
    if idx.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    buckets = (idx >> np.uint64(64 - bits)).astype(np.int64)
    uniq, counts = np.unique(buckets, return_counts=True)
    vals = np.log1p(counts.astype(np.float64))
    return uniq, vals / np.sqrt(np.dot(vals, vals))


def _char_hashes(text: str) -> np.ndarray:
    codes = np.frombuffer(f" {text} ".encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    parts = []
    with np.errstate(over="ignore"):
        for n in CHAR_NGRAMS:
            m = codes.size - n + 1
            if m <= 0:
                continue
            h = np.zeros(m, np.uint64)
            for k in range(n):
                h = h * _P + codes[k : k + m]
            parts.append(_mix(h, 0x1000 + n))
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def _word_hashes(text: str) -> np.ndarray:
    words = _WORD.findall(text)
    if not words:
        return np.zeros(0, np.uint64)
    w = np.array([zlib.crc32(x.encode("utf-8")) for x in words], dtype=np.uint64)
    with np.errstate(over="ignore"):
        uni = _mix(w, 0x2001)
        bi = _mix(w[:-1] * _P + w[1:] + np.uint64(1), 0x2002) if w.size > 1 else np.zeros(0, np.uint64)
    return np.concatenate([uni, bi])


def features(text: str, bits: int, words: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The sparse feature vector of an already-skeletonised ``text``: (bucket ids, values).

    Bucket ids are sorted and unique; each group (characters, and words when ``words``) has
    unit length before the two are added.
    """
    ci, cv = _group(_char_hashes(text), bits)
    if not words:
        return ci, cv
    wi, wv = _group(_word_hashes(text), bits)
    idx = np.concatenate([ci, wi])
    val = np.concatenate([cv, wv])
    uniq, inv = np.unique(idx, return_inverse=True)
    out = np.zeros(uniq.size, np.float64)
    np.add.at(out, inv, val)
    return uniq, out


def windows(text: str, size: int = WINDOW_CHARS) -> list[str]:
    """Overlapping runs of whole sentences of about ``size`` characters (empty for a short text)."""
    if len(text) <= size:
        return []
    sents = [s for s in _SENT.split(text) if s.strip()]
    chunks: list[str] = []
    for s in sents:  # a sentence longer than a window is cut into window-sized pieces
        chunks += [s[i : i + size] for i in range(0, len(s), size)] if len(s) > size else [s]
    out: list[str] = []
    i = 0
    while i < len(chunks):
        j, n = i, 0
        while j < len(chunks) and (n == 0 or n + len(chunks[j]) <= size):
            n += len(chunks[j]) + 1
            j += 1
        out.append(" ".join(chunks[i:j]))
        if j >= len(chunks):
            break
        step = max(1, (j - i) // 2)
        i += step
    return out


@dataclass(frozen=True)
class LinearGuardModel:
    """A logistic model over :func:`features`; ``threshold`` was chosen on a validation split."""

    weights: np.ndarray  # float32, 2 ** bits
    bias: float
    bits: int
    threshold: float
    meta: dict
    words: bool = False

    def margin(self, text: str) -> float:
        """The linear score (log-odds) of one skeletonised text, without windows."""
        idx, val = features(text, self.bits, self.words)
        return float(self.bias + np.dot(self.weights[idx].astype(np.float64), val))

    def score(self, text: str) -> float:
        """P(attack) of a skeletonised text: the highest of the whole text and its windows."""
        best = max([self.margin(text), *(self.margin(w) for w in windows(text))])
        return float(1.0 / (1.0 + np.exp(-best)))

    def digest(self) -> str:
        """sha256 of the weights, bias and threshold (what a test pins)."""
        h = hashlib.sha256(self.weights.tobytes())
        h.update(json.dumps([self.bias, self.bits, self.threshold, self.words]).encode())
        return h.hexdigest()


@lru_cache(maxsize=4)
def load_model(artifact: str) -> LinearGuardModel:
    """Load an artifact by file name (in :data:`MODELS_DIR`) or path; cached per process."""
    path = Path(artifact)
    if not path.is_absolute() and not path.exists():
        path = MODELS_DIR / artifact
    with np.load(path, allow_pickle=False) as z:
        weights = z["weights"].astype(np.float32)
        meta = json.loads(bytes(z["meta"]).decode("utf-8"))
    if weights.size != 2 ** int(meta["bits"]):
        raise ValueError(f"{path}: {weights.size} weights for {meta['bits']} bits")
    return LinearGuardModel(weights=weights, bias=float(meta["bias"]), bits=int(meta["bits"]),
                            threshold=float(meta["threshold"]), meta=meta, words="word" in meta["groups"])


def score_text(model: LinearGuardModel, raw: str) -> float:
    """The model's score of a raw (un-normalised) text: its skeleton, scored."""
    return model.score(skeleton(raw))


class LearnedClassifier:
    """The :class:`~pipelines.guardrails.pre.Classifier` of the learned layer: one hit ``clf.linear``
    (``layer="classifier"``, its score attached) when the text's score reaches the threshold."""

    name = "linear"

    def __init__(self, artifact: str, threshold: float | None = None, action: str = "block",
                 views: tuple[str, ...] = ("text",)) -> None:
        self.model = load_model(artifact)
        self.threshold = self.model.threshold if threshold is None else threshold
        self.action = action
        self.views = views

    async def classify(self, text: str) -> list:
        """The hit for ``text`` (already a view: normalised), or nothing."""
        return self.match(text)

    def match(self, text: str) -> list:
        """:meth:`classify`, synchronously."""
        p = self.model.score(text)
        if p < self.threshold:
            return []
        return [ClassifierHit(rule_id="clf.linear", kind="injection", action=self.action,  # type: ignore[arg-type]
                              score=round(p, 6), layer="classifier")]
