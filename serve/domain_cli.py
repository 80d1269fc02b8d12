"""``tandem domain``: the packs this install can serve, a new one, and the conformance suite.

    tandem domain list                            the installed packs (entry point group ``tandem.domains``)
    tandem domain new NAME [--out PATH | --dir D] write a new pack into PATH (default ./NAME), or into D/NAME;
                     [--backend records|http]    install it with pip install -e PATH
    tandem domain check NAME [--json]             the conformance suite on an installed pack (exit 1 on any
                                                  problem; each problem names the file, hook and what to fix)
    tandem domain reference [--write FILE]        the pack API reference in Markdown (every hook, declaration
                                                  and type; --write puts it between FILE's markers)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn

__all__ = ["main"]


def _list(ns: argparse.Namespace) -> int:
    from pipelines.domains import pack_names

    for name in pack_names():
        print(name)
    return 0


def _new(ns: argparse.Namespace) -> int:
    from serve.scaffold import scaffold

    try:
        root = scaffold(ns.name, None if ns.dir is None else Path(ns.dir),
                        out=None if ns.out is None else Path(ns.out), backend=ns.backend)
    except (ValueError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote the {ns.name} pack to {root}")
    print(f"next: pip install -e {root} && tandem domain check {ns.name} && tandem run {root}/configs/{ns.name}.yaml")
    return 0


class _Parser(argparse.ArgumentParser):
    """An argument error says which flags the command has (``tandem domain new`` writes with ``--out``)."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        flags = sorted({o for a in self._actions for o in a.option_strings if o not in ("-h", "--help")})
        hint = f" (its options: {', '.join(flags)})" if flags else ""
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}{hint}\n")


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
            print(f"{'ok  ' if r.ok else 'FAIL'} {r.name}" + (f": {r.shown}" if r.shown else ""))
            for p in r.problems:
                print(f"       {p}")
            for note in r.notes:
                print(f"       note: {note}")
    failed = [r.name for r in results if not r.ok]
    print(f"{len(results) - len(failed)}/{len(results)} checks passed" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _reference(ns: argparse.Namespace) -> int:
    from serve.pack_reference import reference, write_into

    if ns.write is None:
        print(reference(), end="")
        return 0
    changed = write_into(Path(ns.write))
    print(f"{ns.write}: {'updated' if changed else 'already current'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(prog="tandem domain", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                 allow_abbrev=False)
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    sub.add_parser("list", help="the installed packs").set_defaults(func=_list)
    n = sub.add_parser("new", help="write a new pack (its own distribution)", allow_abbrev=False)
    n.add_argument("name")
    where = n.add_mutually_exclusive_group()
    where.add_argument("--out", metavar="PATH", help="the pack's folder (new or empty; default: ./NAME)")
    where.add_argument("--dir", metavar="DIR", help="write it into DIR/NAME")
    n.add_argument("--backend", choices=("records", "http"), default="records",
                   help="records: the pack keeps its world (default); http: its tools call a service")
    n.set_defaults(func=_new)
    c = sub.add_parser("check", help="the conformance suite on an installed pack", allow_abbrev=False)
    c.add_argument("name")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=_check)
    r = sub.add_parser("reference", help="the pack API reference (Markdown)", allow_abbrev=False)
    r.add_argument("--write", metavar="FILE", help="put it between the pack-reference markers of FILE")
    r.set_defaults(func=_reference)
    ns, extra = ap.parse_known_args(argv)
    if extra:  # said by the command's own parser, so the error lists the flags it has
        sub.choices[ns.cmd].error(f"unrecognized arguments: {' '.join(extra)}")
    return int(ns.func(ns))
