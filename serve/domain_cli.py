"""``tandem domain``: the packs this install can serve, a new one, and the conformance suite.

    tandem domain list                 the installed packs (entry point group ``tandem.domains``)
    tandem domain new NAME [--dir D]   write a new pack into D/NAME (install it with pip install -e D/NAME)
    tandem domain check NAME [--json]  the conformance suite on an installed pack (exit 1 on any problem)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["main"]


def _list(ns: argparse.Namespace) -> int:
    from pipelines.domains import pack_names

    for name in pack_names():
        print(name)
    return 0


def _new(ns: argparse.Namespace) -> int:
    from serve.scaffold import scaffold

    try:
        root = scaffold(ns.name, Path(ns.dir))
    except (ValueError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote the {ns.name} pack to {root}")
    print(f"next: pip install -e {root} && tandem domain check {ns.name} && tandem run {root}/configs/{ns.name}.yaml")
    return 0


def _check(ns: argparse.Namespace) -> int:
    from pipelines.domains import UnknownDomain
    from pipelines.domains.conformance import run_checks

    try:
        results = run_checks(ns.name)
    except UnknownDomain as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if ns.json:
        print(json.dumps([r.model_dump() for r in results], indent=2))
    else:
        for r in results:
            print(f"{'ok  ' if r.ok else 'FAIL'} {r.name}")
            for p in r.problems:
                print(f"       {p}")
    failed = [r.name for r in results if not r.ok]
    print(f"{len(results) - len(failed)}/{len(results)} checks passed" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tandem domain", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the installed packs").set_defaults(func=_list)
    n = sub.add_parser("new", help="write a new pack (its own distribution)")
    n.add_argument("name")
    n.add_argument("--dir", default=".", help="where to write it (default: here)")
    n.set_defaults(func=_new)
    c = sub.add_parser("check", help="the conformance suite on an installed pack")
    c.add_argument("name")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=_check)
    ns = ap.parse_args(argv)
    return int(ns.func(ns))
