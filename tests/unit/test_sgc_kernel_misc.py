"""Small SGC kernel pieces pinned by fixed examples: canonical form, seeds, table loading, W1 errors.

Expected values follow the documented formulas (SHA-256 of the canonical JSON
of the parts, first 8 bytes big-endian; canonical JSON = sorted keys, no
whitespace, non-ASCII kept) written out here with :mod:`hashlib` and
:mod:`json`, not by calling the kernel.
"""

from __future__ import annotations

import hashlib
import json
import math
import random

import pytest
from pydantic import BaseModel, ValidationError

from pipelines.domains.coach.pack import load_coach_rule_tables
from pipelines.errors import ConfigError, InvalidModelOutput
from pipelines.sgc.canonical import (
    canonical_json,
    derive_seed,
    derived_rng,
    session_seed,
    stable_hash,
)
from pipelines.sgc.config import TableConfig, error_path, load_model
from pipelines.sgc.w1 import parse_perception
from pipelines.sgc.w2_slots import query_slots_schema
from pipelines.sgc.w3 import AnswerMeta, SessionRng


def _seed(*parts) -> int:
    text = json.dumps(list(parts), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


class _M(BaseModel):
    b: int
    a: str


# --- canonical form and seeds ------------------------------------------------------------------

def test_canonical_json_by_hand() -> None:
    value = {"z": (1, 2), "a": {"y", "x"}, "m": _M(b=2, a="é"), 3: [frozenset({2, 1})], "n": None}
    assert canonical_json(value) == '{"3":[[1,2]],"a":["x","y"],"m":{"a":"é","b":2},"n":null,"z":[1,2]}'
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})
    with pytest.raises(ValueError):
        canonical_json([math.inf])


def test_stable_hash_is_a_sha256_prefix() -> None:
    assert stable_hash(["a", 1]) == hashlib.sha256(b'["a",1]').hexdigest()[:16]
    assert stable_hash({"k": "v"}, length=8) == hashlib.sha256(b'{"k":"v"}').hexdigest()[:8]


def test_seeds_by_formula() -> None:
    assert derive_seed("a", 1) == _seed("a", 1)
    assert session_seed("s-9") == _seed("tandem.session", "s-9")
    assert derived_rng(5, "w3", 2).random() == random.Random(_seed(5, "w3", 2)).random()


def test_session_rng_for_turn_uses_the_turn_seed() -> None:
    rng = SessionRng(42)
    assert rng.seed == 42 and SessionRng("42").seed == 42
    assert rng.for_turn(3).random() == random.Random(_seed(42, "w3", 3)).random()
    assert rng.for_turn(3, "gen").random() == random.Random(_seed(42, "gen", 3)).random()


def test_answer_meta_canonical_by_hand() -> None:
    m = AnswerMeta(turn_index=3, guidance_type="teaching", subject_id="a", cooldown_writeback={"a": 2},
                   seed="00ff", candidate_pool_hash="h")
    assert m.canonical() == ('{"candidate_pool_hash":"h","cooldown_writeback":{"a":2},"guidance_type":"teaching",'
                             '"seed":"00ff","subject_id":"a","table_version":"","turn_index":3}')


# --- strict table loading ----------------------------------------------------------------------------

class _T(TableConfig):
    name: str
    n: int = 0


@pytest.mark.parametrize(
    ("where", "loc", "expected"),
    [("phi", ("rows", 3, "tools", 0, "tool"), "phi.rows.3.tools.0.tool"), ("psi", (), "psi"), ("w3", (0,), "w3.0")],
)
def test_error_path(where: str, loc: tuple, expected: str) -> None:
    assert error_path(where, loc) == expected


def test_load_model_errors_name_the_path() -> None:
    ok = _T(name="x")
    assert load_model(_T, ok, "t") is ok
    assert load_model(_T, {"name": "y", "n": 2}, "t") == _T(name="y", n=2)
    with pytest.raises(ConfigError) as info:
        load_model(_T, ["not", "a", "mapping"], "t")
    assert (info.value.message, info.value.details) == ("t: expected a mapping, got list", {"path": "t"})
    with pytest.raises(ConfigError) as info:
        load_model(_T, {"n": "many", "extra": 1}, "t")
    d = info.value.details
    assert d["path"] == "t.name" and info.value.message.startswith("t.name: ")
    assert [e["path"] for e in d["errors"]] == ["t.name", "t.n", "t.extra"]
    with pytest.raises(ValidationError):  # frozen
        ok.name = "z"


def test_rule_table_versions_by_hand() -> None:
    tables = load_coach_rule_tables()
    assert tables.versions() == {
        "rules": tables.version, "phi": tables.phi.version, "psi": "coach-psi-1", "tiers": "coach-tiers-1",
        "w3.knowledge_qa": "coach-w3-knowledge_qa-1", "w3.recommend": "coach-w3-recommend-1",
        "w3.teaching": "coach-w3-teaching-1",
    }
    assert list(tables.versions())[4:] == ["w3.knowledge_qa", "w3.recommend", "w3.teaching"]
    assert tables.version == "coach:" + "+".join([tables.phi.version, "coach-psi-1", "coach-tiers-1",
                                                    "coach-w3-knowledge_qa-1", "coach-w3-recommend-1",
                                                    "coach-w3-teaching-1"])


# --- slot schema bounds ------------------------------------------------------------------------------------

def _walk(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def test_slot_schema_is_bounded_by_40_chars_and_4_items() -> None:
    schema = query_slots_schema()
    nodes = list(_walk(schema))
    strings = [n for n in nodes if n.get("type") == "string" and "enum" not in n and "const" not in n]
    arrays = [n for n in nodes if n.get("type") == "array"]
    assert strings and arrays
    assert {n["maxLength"] for n in strings} == {40}
    assert {n["maxItems"] for n in arrays} == {4}


# --- W1 parse errors are typed and carry their details ---------------------------------------------

_HEAD = "<INTENT>recommend</INTENT><SUB_INTENT>counter_pick</SUB_INTENT><NARRATION>Hm.</NARRATION>"


@pytest.mark.parametrize(
    ("plan", "message", "details"),
    [
        ("[1", "perception stream: PLAN is not valid JSON", {"error"}),
        ('{"tool": "a"}', "perception stream: PLAN must be a JSON list", {"got"}),
        ('[{"nope": 1}]', "perception stream: PLAN item 0 is not a tool call", {"index"}),
        ('[{"tool": "get_inventory", "args": {}}, {"tool": "fly", "args": {}}]',
         "perception stream: PLAN item 1 names unknown tool 'fly'", {"index", "tool"}),
    ],
)
def test_plan_errors(plan: str, message: str, details: set[str]) -> None:
    with pytest.raises(InvalidModelOutput) as info:
        parse_perception([_HEAD + f"<PLAN>{plan}</PLAN>"], tools=["get_inventory"])
    assert info.value.message == message
    assert set(info.value.details) == details
    if "got" in details:
        assert info.value.details["got"] == "dict"
    if "tool" in details:
        assert info.value.details == {"index": 1, "tool": "fly"}


# --- snapshot loading (prewarm at open, fill at tool time) ------------------------------------------

class _Loader:
    """A state loader double: fixed live values at one version; records each call."""

    def __init__(self, values: dict, version: int) -> None:
        self.values, self.version, self.calls = values, version, []

    async def load(self, session_id, keys):
        from pipelines.sgc.snapshot import LoadedState

        self.calls.append((session_id, list(keys)))
        return LoadedState(version=self.version, values={k: self.values[k] for k in keys if k in self.values})


def test_prewarm_loads_the_keys_at_turn_zero() -> None:
    import asyncio

    from pipelines.sgc.snapshot import prewarm

    loader = _Loader({"user_id": "u1", "opponent_id": "o9"}, version=4)
    snap = asyncio.run(prewarm(loader, "s-1", ("user_id", "nope")))
    assert loader.calls == [("s-1", ["user_id", "nope"])]
    assert (snap.session_id, snap.version, snap.loaded_at_turn) == ("s-1", 4, 0)
    assert snap.values() == {"user_id": "u1"}
    assert snap.entries["user_id"].loaded_at_turn == 0 and snap.entries["user_id"].version == 4
    assert snap.has("user_id") and not snap.has("nope")
    assert asyncio.run(prewarm(loader, "s-1", ["user_id"], turn=2)).entries["user_id"].loaded_at_turn == 2


def test_fill_loads_only_missing_keys_unless_refreshing() -> None:
    import asyncio

    from pipelines.sgc.snapshot import Snapshot, fill

    snap = Snapshot.of({"user_id": "old"}, session_id="s-2", version=1, turn=0)
    loader = _Loader({"user_id": "new", "opponent_id": "o9"}, version=3)
    same = asyncio.run(fill(snap, loader, ["user_id"], turn=2))
    assert same is snap and loader.calls == []  # nothing missing: no load
    filled = asyncio.run(fill(snap, loader, ["user_id", "opponent_id"], turn=2))
    assert loader.calls == [("s-2", ["opponent_id"])]
    assert filled.values() == {"user_id": "old", "opponent_id": "o9"}
    assert filled.entries["opponent_id"].loaded_at_turn == 2 and filled.version == 3
    refreshed = asyncio.run(fill(snap, loader, ["user_id"], turn=5, refresh=True))
    assert loader.calls[-1] == ("s-2", ["user_id"])
    assert refreshed.value("user_id") == "new" and refreshed.entries["user_id"].loaded_at_turn == 5


def test_phi_table_is_checked_only_with_both_labels_and_tools() -> None:
    from pipelines.sgc.phi import load_phi_table

    data = {"version": "p", "rows": [{"intent": "a", "sub_intent": "b", "tools": [{"tool": "t"}]}]}
    assert load_phi_table(data, labels={}).version == "p"   # labels alone: no check
    assert load_phi_table(data, tools=[]).version == "p"    # tools alone: no check
    with pytest.raises(ConfigError, match="unknown intent"):
        load_phi_table(data, labels={}, tools=[])
