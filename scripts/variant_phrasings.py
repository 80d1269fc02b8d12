"""How often the support pack finds the option a customer means, said the ways people say options.

Usage: ``python scripts/variant_phrasings.py [--tau2-dir DIR] [--held N] [--limit N] [--out FILE]``.

The catalogue, not the tasks: for every product of the retail database (``DIR/db.json``, default
``$TANDEM_TAU2_DIR`` or ``../shared/data/tau2-retail``), each of its first ``--held`` variants is the item held
and every other available variant the one wanted; the wish names the option values that differ, in one of several
phrasings, and :func:`pipelines.domains.support.candidates.described_variants` must return exactly the one wanted.
The phrasings:

* ``values`` — the values as the catalogue writes them ("the red and 20 hours one");
* ``option_is`` — "I want the color to be red and the battery life to be 20 hours";
* ``with`` — "one with red color and 20 hours battery life";
* ``spoken`` — values as people say them where that differs: a yes-or-no option by its name or its negation
  ("water resistant", "not waterproof"), letter sizes in words ("extra large"), units spelled out or spaced
  ("16 GB", "1.5 liters", "20,000 mAh", "4 piece", "130°"); only wishes where some value is said otherwise.

Prints one row per phrasing (resolved / wishes, ratio) and the products that fail most, and writes the report as
JSON (default ``results/variant_phrasings.json``). A wish stays ambiguous when two options share the value it names
(sunglasses with a brown frame and brown lenses): those count as misses too, and name their product.
Exit status: 0, or 2 when the database is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.domains.support.candidates import described_variants  # noqa: E402

__all__ = ["PHRASINGS", "main", "run", "spoken"]

_LETTERS = {"XS": "extra small", "S": "small", "M": "medium", "L": "large", "XL": "extra large"}
#: catalogue spellings → how people say them (the first pattern that matches a value)
_SPOKEN: tuple[tuple[str, str | Callable[[re.Match[str]], str]], ...] = (
    (r"^(\d+(?:\.\d+)?)GB$", r"\1 GB"), (r"^(\d+)TB SSD$", r"\1 TB SSD"), (r"^(\d+(?:\.\d+)?)L$", r"\1 liters"),
    (r"^(\d+)ft$", r"\1 feet"), (r"^(\d+) ft$", r"\1 feet"), (r"^(\d+)mAh$", lambda m: f"{int(m.group(1)):,} mAh"),
    (r"^(\d+)MP$", r"\1 megapixels"), (r"^(\d+) inch$", r"\1 inches"), (r"^(\d+)-inch$", r"\1 inches"),
    (r"^(\d+)-(\d+) lbs$", r"\1 to \2 pounds"), (r"^(\d+)-piece$", r"\1 piece"), (r"^(\d+)ml$", r"\1 ml"),
    (r"^(\d+) cups?$", r"\1-cup"), (r"^(\d+) bar$", r"\1-bar"), (r"^(\d+) degrees$", r"\1°"),
    (r"^(\d+)W equivalent$", r"\1 watt equivalent"),
)


def spoken(option: str, value: str) -> str:
    """``value`` of ``option`` as people say it (unchanged where the catalogue's spelling is how it is said)."""
    if value.lower() in ("yes", "no"):
        name = option.replace("resistance", "resistant")
        return name if value.lower() == "yes" else f"not {name}"
    if option.lower().endswith("size") and value in _LETTERS:
        return _LETTERS[value]
    for pattern, rep in _SPOKEN:
        if re.match(pattern, value):
            return re.sub(pattern, rep, value)  # type: ignore[arg-type]
    return value


PHRASINGS: dict[str, Callable[[list[tuple[str, str]]], str]] = {
    "values": lambda diff: "I want to change it to the " + " and ".join(v for _, v in diff) + " one.",
    "option_is": lambda diff: "I want the " + " and the ".join(f"{k} to be {v}" for k, v in diff) + ".",
    "with": lambda diff: "I'd like one with " + " and ".join(f"{v} {k}" for k, v in diff) + ".",
    "spoken": lambda diff: "I want to change it to the " + " and ".join(spoken(k, v) for k, v in diff) + " one.",
}


def run(db: Mapping[str, Any], held_per_product: int = 3, limit: int | None = None) -> dict[str, Any]:
    """The report: per phrasing, wishes and those resolved to exactly the variant meant; misses by product."""
    totals: Counter[str] = Counter()
    resolved: Counter[str] = Counter()
    misses: dict[str, Counter[str]] = {p: Counter() for p in PHRASINGS}
    examples: dict[str, list[dict[str, Any]]] = {p: [] for p in PHRASINGS}
    products = list((db.get("products") or {}).values())[:limit]
    for product in products:
        raw = product.get("variants") or {}
        variants = {vid: {"options": v.get("options") or {}, "available": bool(v.get("available")),
                          "price": v.get("price")} for vid, v in raw.items()}
        for held in list(variants)[:held_per_product]:
            for wanted, v in variants.items():
                if wanted == held or not v["available"]:
                    continue
                diff = [(k, str(x)) for k, x in v["options"].items() if x != variants[held]["options"].get(k)]
                for name, phrase in PHRASINGS.items():
                    if name == "spoken" and all(spoken(k, x) == x for k, x in diff):
                        continue  # said as written: the "values" row has it
                    text = phrase(diff)
                    got = described_variants(variants, [held], [text])
                    totals[name] += 1
                    if got == [wanted]:
                        resolved[name] += 1
                        continue
                    misses[name][str(product.get("name"))] += 1
                    if len(examples[name]) < 20:
                        examples[name].append({"product": product.get("name"), "held": variants[held]["options"],
                                               "said": text, "found": len(got)})
    rows = {name: {"wishes": totals[name], "resolved": resolved[name],
                   "ratio": round(resolved[name] / totals[name], 4) if totals[name] else None,
                   "misses_by_product": dict(misses[name].most_common()), "examples": examples[name]}
            for name in PHRASINGS}
    return {"products": len(products), "held_per_product": held_per_product, "phrasings": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_dir = Path(os.environ.get("TANDEM_TAU2_DIR", "../shared/data/tau2-retail"))
    parser.add_argument("--tau2-dir", type=Path, default=default_dir)
    parser.add_argument("--held", type=int, default=3, help="variants of each product taken as the item held")
    parser.add_argument("--limit", type=int, default=None, help="the first N products only")
    parser.add_argument("--out", type=Path, default=Path("results/variant_phrasings.json"))
    ns = parser.parse_args(argv)
    path = ns.tau2_dir / "db.json"
    if not path.is_file():
        print(f"no retail database at {path}", file=sys.stderr)
        return 2
    report = run(json.loads(path.read_text()), ns.held, ns.limit)
    print(f"{'phrasing':<10} {'resolved':>9} {'wishes':>7} {'ratio':>7}  most misses")
    for name, row in report["phrasings"].items():
        worst = ", ".join(f"{p} {n}" for p, n in list(row["misses_by_product"].items())[:3]) or "-"
        ratio = f"{row['ratio']:.3f}" if row["ratio"] is not None else "-"
        print(f"{name:<10} {row['resolved']:>9} {row['wishes']:>7} {ratio:>7}  {worst}")
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
