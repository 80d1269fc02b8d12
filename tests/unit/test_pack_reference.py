"""The pack authors' reference is the code's: ``docs/domains.md`` holds what ``tandem domain reference``
generates from the ``Domain`` protocol, ``PackBase`` and the pack API's types (every hook there), and the
layout it shows is what ``tandem domain new`` writes."""

from __future__ import annotations

import re
from pathlib import Path

from pipelines.core.domain import REQUIRED, Domain, protocol_members
from serve.pack_reference import BEGIN, END, reference
from serve.scaffold import files

DOC = Path(__file__).resolve().parents[2] / "docs" / "domains.md"


def test_the_reference_in_the_docs_is_the_generated_one() -> None:
    text = DOC.read_text()
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert block == reference().strip(), "docs/domains.md is stale: run `tandem domain reference --write docs/domains.md`"


def test_every_hook_of_the_protocol_has_a_row_that_says_if_it_is_required() -> None:
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)[(:`](?:[^|]|\\\|)*\| (\*\*required\*\*|optional) \|",
                                                        reference(), re.M)}
    assert sorted(rows) == sorted(protocol_members(Domain))
    assert {name for name, how in rows.items() if how == "**required**"} == set(REQUIRED)


def test_the_layout_in_the_docs_is_what_the_scaffold_writes() -> None:
    text = DOC.read_text()
    tree = text.split("## 1. Start: the scaffold", 1)[1].split("```\nlibrary/", 1)[1].split("```", 1)[0]
    shown, folders = set(), []
    for line in tree.splitlines():
        m = re.match(r"^( *)(\S+)", line)
        if not m:
            continue
        depth, name = len(m.group(1)) // 2, m.group(2)
        folders = folders[:depth - 1] if depth else []
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
        else:
            shown.add("/".join([*folders, name]))
    assert shown == set(files("library"))
