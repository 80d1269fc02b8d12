"""One finding of ``tandem k8s validate``, where it is, and how it prints.

A finding names the source (a file, ``<stdin>``, or a kustomize build), the
document in it (1-based index, kind and name), the JSON path inside the
document, what is wrong with the offending key or value, and, for a near-miss
key or value, the closest allowed one::

    k8s/x.yaml: document 1 (RayService tandem): spec.rayClusterConfig.enableInTreeAutoScaling:
        unknown field 'enableInTreeAutoScaling' (did you mean 'enableInTreeAutoscaling'?) [crd]

Paths continue into ``serveConfigV2`` (a YAML string holding the Serve config) as
if it were nested data: ``spec.serveConfigV2.applications[0].args.pipeline.kind``.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal

__all__ = ["Issue", "JsonPath", "did_you_mean", "json_path", "short"]

JsonPath = tuple[str | int, ...]

_PLAIN_KEY = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$-]*$")


def json_path(parts: Iterable[str | int]) -> str:
    """``("spec", "groups", 0, "app.kubernetes.io/name")`` → ``spec.groups[0]["app.kubernetes.io/name"]``."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif _PLAIN_KEY.match(p):
            out += f".{p}" if out else p
        else:
            out += f"[{p!r}]"
    return out


def did_you_mean(word: str, allowed: Iterable[str]) -> str | None:
    """The allowed word closest to ``word`` (case-insensitive first), or None if none is close."""
    options = [a for a in allowed if isinstance(a, str) and a != word]
    lowered = {a.lower(): a for a in options}
    if word.lower() in lowered and lowered[word.lower()] != word:
        return lowered[word.lower()]
    close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.75)
    return lowered[close[0]] if close else None


def short(value: Any, limit: int = 80) -> str:
    """A value as it appears in a message: its repr, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclasses.dataclass(frozen=True)
class Issue:
    """One problem (or warning) found in one document."""

    path: JsonPath
    message: str
    check: str  # crd | core | serve | tandem | cross | yaml | kustomize | input
    suggestion: str | None = None
    severity: Literal["error", "warning"] = "error"
    # where: filled in by the validator that knows the source and the document
    source: str = ""
    index: int | None = None  # 1-based document index in the source
    kind: str | None = None
    name: str | None = None

    def at(self, prefix: Sequence[str | int]) -> Issue:
        """The same issue with ``prefix`` put before its path (a nested document's place)."""
        return dataclasses.replace(self, path=(*prefix, *self.path))

    def located(self, source: str, index: int | None, kind: str | None, name: str | None) -> Issue:
        return dataclasses.replace(self, source=source, index=index, kind=kind, name=name)

    def format(self) -> str:
        where = [self.source or "<input>"]
        if self.index is not None:
            what = " ".join(x for x in (self.kind, self.name) if x)
            where.append(f"document {self.index}" + (f" ({what})" if what else ""))
        if self.path:
            where.append(json_path(self.path))
        text = ": ".join(where) + f": {self.message}"
        if self.suggestion:
            text += f" (did you mean {self.suggestion!r}?)"
        text += f" [{self.check}]"
        return ("warning: " + text) if self.severity == "warning" else text
