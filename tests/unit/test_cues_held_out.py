"""Cues and test phrases are held out of the tau2 tasks: none reproduces a span of four words of a task's instructions.

A pack's cue patterns must follow from a policy, a schema or how people talk, never from one task's wording; a test
phrase that quotes a task tests the task, not the rule. Both are checked against every task of the shared tau2 data
(retail and airline): a span of four consecutive words of a task's instructions (as written, and turned into the
first person as the scripted user says them) that a pattern can produce, or that a test's string holds, is a copy
when one of its words is neither an English function word, nor a word of the domains' policies, nor of the retail
catalogue (the policies' vocabulary — order, cancel, address, payment… — and the catalogue's — product names, their
options — are the domain's, not a task's).

Patterns are expanded into the literal strings they match (alternations taken one by one, repeats at their least
count, a character class as a word break), bounded per pattern.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import re._parser as sre_parse  # the standard library's pattern parser (Python 3.11)
from collections.abc import Iterator
from pathlib import Path
from re._constants import (
    ANY,
    AT,
    BRANCH,
    IN,
    LITERAL,
    MAX_REPEAT,
    MIN_REPEAT,
    NOT_LITERAL,
    SUBPATTERN,
)
from typing import Any

import pytest

from pipelines.core.evaluation import first_person

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
DOMAINS = ("tau2-retail", "tau2-airline")
#: The modules whose patterns read the user's words (the packs' cues and extractors).
CUE_MODULES = ("pipelines.domains.support.labels", "pipelines.domains.support.candidates",
               "pipelines.domains.support.pack", "pipelines.domains.coach.domain", "pipelines.core.tau2_user",
               "tandem_airline.labels", "tandem_airline.candidates", "tandem_airline.pack")
TEST_DIRS = (REPO / "tests" / "unit", REPO / "examples" / "airline" / "tests", REPO / "tests" / "integration")
_WORD = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")  # a record id (mei_kovacs_8020) is one word
#: English function words and the words of any conversation with a shop (greetings, wanting, asking).
FUNCTION = frozenset("""
a an the and or but if then so to of in on at by for with from into onto about as is are was were be been being am do
does did done have has had i me my mine you your yours we our us it its this that these those there here what which who
whom whose when where why how not no yes can could would should will shall may might must want wants wanted wish like
need needs needed please just also too very more most less least some any all each every one two three s t m d ll re
ve don didn doesn isn aren wasn weren won wouldn couldn shouldn cannot get got make made let know him her his she he
they them their theirs own same other another than up out over only again still now today hi hello thanks thank talk
speak help received receive ending end part someone something anything everything way thing things really
""".split())
SPAN = 4
EXPANSIONS = 400


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _spans(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + SPAN]) for i in range(len(words) - SPAN + 1)}


def _tasks() -> list[tuple[str, str, set[tuple[str, ...]]]]:
    out = []
    for dom in DOMAINS:
        for t in json.loads((DATA / dom / "tasks_train.json").read_text()):
            ins = t["user_scenario"]["instructions"]
            text = " ".join(str(ins.get(k) or "") for k in ("reason_for_call", "known_info", "unknown_info",
                                                             "task_instructions"))
            out.append((dom, str(t["id"]), _spans(_words(text)) | _spans(_words(first_person(text)))))
    return out


def _generic() -> frozenset[str]:
    """Function words, the policies' words, and the catalogue's (product names, their option names and values)."""
    words: set[str] = set()
    for dom in DOMAINS:
        words |= set(_words((DATA / dom / "policy.md").read_text()))
    db = json.loads((DATA / "tau2-retail" / "db.json").read_text())
    for product in (db.get("products") or {}).values():
        words |= set(_words(str(product.get("name", ""))))
        for variant in (product.get("variants") or {}).values():
            for key, value in (variant.get("options") or {}).items():
                words |= set(_words(f"{key} {value}"))
    return FUNCTION | words


def copied(spans: set[tuple[str, ...]], tasks: list[tuple[str, str, set[tuple[str, ...]]]],
           generic: frozenset[str]) -> list[str]:
    """The spans shared with a task's instructions that hold a word of neither the function words nor the policies."""
    out = []
    for span in sorted(spans):
        if all(w in generic for w in span):
            continue
        for dom, tid, task_spans in tasks:
            if span in task_spans:
                out.append(f"{' '.join(span)!r} (from {dom} task {tid})")
                break
    return out


def expand(node: Any, budget: list[int]) -> list[str]:
    """The literal strings a parsed pattern matches (see module docstring); ``\\x00`` is a word break."""
    outs = [""]
    for op, av in node:
        if budget[0] <= 0:
            return outs
        if op == LITERAL:
            parts = [chr(av)]
        elif op in (NOT_LITERAL, IN, ANY):
            parts = ["\x00"]
        elif op == AT:
            parts = [""]
        elif op == BRANCH:
            parts = [s for alt in av[1] for s in expand(alt, budget)]
        elif op == SUBPATTERN:
            parts = expand(av[-1], budget)
        elif op in (MAX_REPEAT, MIN_REPEAT):
            lo, _hi, sub = av
            inner = expand(sub, budget)
            parts = ([""] if lo == 0 else []) + [s * max(lo, 1) for s in inner]
        else:  # lookarounds, groups referenced: no text of their own
            parts = ["\x00"]
        outs = [a + b for a in outs for b in parts][:EXPANSIONS]
        budget[0] -= len(outs)
    return outs


def _patterns(obj: Any, seen: set[int]) -> Iterator[re.Pattern[str]]:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, re.Pattern) and isinstance(obj.pattern, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _patterns(v, seen)
    elif isinstance(obj, list | tuple | set | frozenset):
        for v in obj:
            yield from _patterns(v, seen)


def cue_patterns() -> list[tuple[str, re.Pattern[str]]]:
    out = []
    for name in CUE_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        seen: set[int] = set()
        for attr, value in vars(mod).items():
            out += [(f"{name}.{attr}", p) for p in _patterns(value, seen)]
    return out


def pattern_spans(pattern: re.Pattern[str]) -> set[tuple[str, ...]]:
    spans: set[tuple[str, ...]] = set()
    try:
        tree = sre_parse.parse(pattern.pattern, pattern.flags)
    except Exception:  # pragma: no cover - a pattern the parser of this Python cannot read
        return spans
    for text in expand(list(tree), [20000]):
        for chunk in text.split("\x00"):
            spans |= _spans(_words(chunk))
    return spans


def phrases_of_the_tests() -> list[tuple[str, str]]:
    out = []
    for d in TEST_DIRS:
        for f in sorted(d.glob("*.py")):
            if f.name == Path(__file__).name:
                continue
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 16:
                    out.append((f"{f.relative_to(REPO)}:{node.lineno}", node.value))
    return out


needs_data = pytest.mark.skipif(not all((DATA / d / "tasks_train.json").is_file() for d in DOMAINS),
                                reason="the shared tau2 data (../shared/data) is not beside the checkout")


def test_the_expansion_reads_alternations_repeats_and_classes() -> None:
    spans = pattern_spans(re.compile(r"\b(?:a|the) new (?:one|pair) for (me|us)\b"))
    assert ("the", "new", "pair", "for") in spans and ("a", "new", "one", "for") in spans
    assert not pattern_spans(re.compile(r"[a-z]+ new pair"))  # a class is a break: no four words in a row
    generic = frozenset({"the", "new", "pair", "for"})
    tasks = [("d", "7", {("a", "less", "bright", "one"), ("the", "new", "pair", "for")})]
    assert copied({("the", "new", "pair", "for")}, tasks, generic) == []  # every word generic: no copy
    assert copied({("a", "less", "bright", "one")}, tasks, generic) == ["'a less bright one' (from d task 7)"]
    assert copied({("a", "less", "dim", "one")}, tasks, generic) == []  # just outside the task's span


@needs_data
def test_no_cue_pattern_reproduces_a_task_span() -> None:
    tasks, generic = _tasks(), _generic()
    found = {name: copied(pattern_spans(p), tasks, generic) for name, p in cue_patterns()}
    assert len(found) > 20  # the cue modules were read
    assert {k: v for k, v in found.items() if v} == {}


@needs_data
def test_no_test_phrase_reproduces_a_task_span() -> None:
    tasks, generic = _tasks(), _generic()
    found = {where: copied(_spans(_words(text)), tasks, generic) for where, text in phrases_of_the_tests()}
    assert {k: v for k, v in found.items() if v} == {}
