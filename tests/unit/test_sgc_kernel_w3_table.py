"""W3 by fixed examples: leak, weighted pick, cooldown, cap, window — expected values by hand.

The kernel draws ``u`` for every candidate (sorted by id), then one ``r`` for the
pick. A scripted RNG stands in for :class:`random.Random` inside the kernel, so
each case states its draws and the expected pick follows from the rules in the
module docstring:

* leak: a candidate survives when ``u < p`` (strict);
* pick: ``target = r * sum(w_i)``; the first survivor whose running sum exceeds
  ``target`` (strictly) is picked;
* cooldown write-back: the entry's ``cooldown``, else the table's
  ``default_cooldown``; nothing is written for 0;
* a meta of turn ``t`` with cooldown ``n`` keeps the subject cooling through
  turn ``t + n``;
* the cap counts issues among the last ``HISTORY_WINDOW`` (= 20) metas.
"""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pytest

from pipelines.domains.coach.pack import load_coach_rule_tables
from pipelines.sgc import w3
from pipelines.sgc.w3 import (
    AnswerMeta,
    BranchTable,
    Candidate,
    IntentContext,
    SessionRng,
    resolve_cross_turn_state,
    schedule,
    schedule_turn,
)

C1 = IntentContext(intent="teaching", sub_intent="natures")


class ScriptedRandom:
    """Stands in for random.Random in the kernel: returns the scripted draws in order."""

    draws: list[float] = []
    seeds: list[int] = []

    def __init__(self, seed: int) -> None:
        ScriptedRandom.seeds.append(seed)
        self._draws = list(ScriptedRandom.draws)

    def random(self) -> float:
        return self._draws.pop(0)


@pytest.fixture
def draws(monkeypatch: pytest.MonkeyPatch):
    """``draws([u_a, u_b, ..., r])`` scripts the next schedule call's draws."""
    monkeypatch.setattr(w3, "random", SimpleNamespace(Random=ScriptedRandom))
    ScriptedRandom.seeds = []

    def set_draws(values: list[float]) -> None:
        ScriptedRandom.draws = list(values)

    return set_draws


def table(**kw) -> BranchTable:
    base = {"version": "t-1", "branch": "teaching", "default_cooldown": 0, "pool": []}
    base.update(kw)
    return BranchTable.model_validate(base)


def meta(turn: int, subject: str | None = None, cooldown: dict[str, int] | None = None) -> AnswerMeta:
    return AnswerMeta(turn_index=turn, guidance_type="teaching" if subject else "none", subject_id=subject,
                      cooldown_writeback=cooldown or {}, seed="0", candidate_pool_hash="h")


EMPTY = resolve_cross_turn_state([], C1)


# --- leak: u < p, strictly ------------------------------------------------------------------

def test_leak_at_p_is_not_a_survivor(draws) -> None:
    t = table(pool=[{"id": "a", "p": 0.5, "w": 1.0}])
    draws([0.5, 0.0])
    pick, m = schedule(EMPTY, ["a"], 1, t)
    assert pick is None
    assert (m.guidance_type, m.subject_id, m.cooldown_writeback) == ("none", None, {})


def test_leak_just_below_p_survives(draws) -> None:
    t = table(pool=[{"id": "a", "p": 0.5, "w": 1.0}])
    draws([0.4999, 0.0])
    pick, m = schedule(EMPTY, ["a"], 1, t)
    assert pick == "a"
    assert (m.guidance_type, m.subject_id, m.table_version) == ("teaching", "a", "t-1")


def test_p_zero_never_leaks_and_p_one_always_does(draws) -> None:
    t = table(pool=[{"id": "a", "p": 0.0, "w": 1.0}, {"id": "b", "p": 1.0, "w": 1.0}])
    draws([0.0, 0.9999, 0.0])  # a draws 0.0 (0.0 < 0.0 is false), b draws 0.9999 (< 1.0)
    assert schedule(EMPTY, ["a", "b"], 1, t)[0] == "b"


def test_unlisted_candidates_use_the_defaults_only_when_allowed(draws) -> None:
    open_t = table(pool=[{"id": "a", "p": 1.0, "w": 1.0}], allow_unlisted=True, default_p=0.85,
                   default_cooldown=2)
    draws([0.9, 0.8499, 0.99])  # a: 0.9 < 1.0 survives; x (unlisted): 0.8499 < 0.85 survives; r picks x
    pick, m = schedule(EMPTY, ["x", "a"], 1, open_t)
    assert pick == "x" and m.cooldown_writeback == {"x": 2}
    draws([0.9, 0.85, 0.99])  # x at exactly default_p does not leak: only a survives
    assert schedule(EMPTY, ["x", "a"], 1, open_t)[0] == "a"
    closed = open_t.model_copy(update={"allow_unlisted": False})
    draws([0.9, 0.0, 0.99])  # x is unlisted: filtered even with u = 0
    assert schedule(EMPTY, ["x", "a"], 1, closed)[0] == "a"


# --- weighted pick: target = r * sum(w); first running sum > target ------------------------

@pytest.mark.parametrize(
    ("r", "expected"),
    [
        (0.0, "a"),
        (0.2499, "a"),   # target 0.9996 < 1.0 (a's share)
        (0.25, "b"),     # target 1.0 is not < 1.0: b
        (0.9999, "b"),
    ],
)
def test_weighted_pick_boundary(draws, r: float, expected: str) -> None:
    t = table(pool=[{"id": "a", "p": 1.0, "w": 1.0}, {"id": "b", "p": 1.0, "w": 3.0}])
    draws([0.0, 0.0, r])
    assert schedule(EMPTY, ["b", "a"], 1, t)[0] == expected


@pytest.mark.parametrize(("r", "expected"), [(0.7499, "a"), (0.75, "b")])
def test_candidate_weight_multiplies_the_pool_weight(draws, r: float, expected: str) -> None:
    # a: w 1.0 x weight 3.0 = 3.0; b: 1.0 x 1.0; total 4.0, a's share ends at target 3.0
    t = table(pool=[{"id": "a", "p": 1.0, "w": 1.0}, {"id": "b", "p": 1.0, "w": 1.0}])
    draws([0.0, 0.0, r])
    assert schedule(EMPTY, [Candidate(id="a", weight=3.0), "b"], 1, t)[0] == expected


def test_a_filtered_candidate_still_consumes_its_draw(draws) -> None:
    # a is excluded; its u (0.0) is drawn anyway, so b reads the second draw (0.6 < p 0.5 is false)
    t = table(pool=[{"id": "a", "p": 1.0, "w": 1.0}, {"id": "b", "p": 0.5, "w": 1.0}])
    state = resolve_cross_turn_state([], C1.model_copy(update={"excluded_subjects": ("a",)}))
    draws([0.0, 0.6, 0.0])
    assert schedule(state, ["a", "b"], 1, t)[0] is None
    draws([0.9, 0.4, 0.0])
    assert schedule(state, ["a", "b"], 1, t)[0] == "b"


# --- cooldown write-back ---------------------------------------------------------------------

@pytest.mark.parametrize(
    ("entry_cooldown", "default_cooldown", "expected"),
    [(5, 2, {"a": 5}), (None, 2, {"a": 2}), (0, 2, {}), (None, 0, {}), (1, 0, {"a": 1})],
)
def test_cooldown_writeback(draws, entry_cooldown, default_cooldown, expected) -> None:
    t = table(pool=[{"id": "a", "p": 1.0, "w": 1.0, "cooldown": entry_cooldown}],
              default_cooldown=default_cooldown)
    draws([0.0, 0.0])
    pick, m = schedule(EMPTY, ["a"], 1, t)
    assert pick == "a" and m.cooldown_writeback == expected


def test_coach_teaching_table_writes_back_its_own_cooldowns(draws) -> None:
    # coach teaching: topic:counters has cooldown 4; topic:natures none (default_cooldown 3)
    teaching = load_coach_rule_tables().w3["teaching"]
    draws([0.6999, 0.0])  # p(topic:counters) = 0.7
    pick, m = schedule(EMPTY, ["topic:counters"], 1, teaching)
    assert (pick, m.cooldown_writeback, m.table_version) == ("topic:counters", {"topic:counters": 4},
                                                              "coach-w3-teaching-1")
    draws([0.7, 0.0])  # at p exactly: no leak
    assert schedule(EMPTY, ["topic:counters"], 1, teaching)[0] is None
    draws([0.5999, 0.0])  # p(topic:natures) = 0.6
    assert schedule(EMPTY, ["topic:natures"], 1, teaching)[1].cooldown_writeback == {"topic:natures": 3}


@pytest.mark.parametrize(
    ("turn", "cooling"),
    [(4, {"a": 2}), (5, {"a": 1}), (6, {})],  # issued at 3 with cooldown 2: cools through turn 5
)
def test_cooldown_resolution(turn: int, cooling: dict[str, int]) -> None:
    state = resolve_cross_turn_state([meta(3, "a", {"a": 2})], C1, turn_index=turn)
    assert state.cooling == cooling
    assert state.turn_index == turn


def test_cooling_subject_is_filtered_then_free_again(draws) -> None:
    t = table(pool=[{"id": s, "p": 1.0, "w": 1.0} for s in "abc"])
    history = [meta(3, "a", {"a": 2}), meta(4, "c")]
    at5 = resolve_cross_turn_state(history, C1)  # a cools (through 5), c was the previous pick
    assert (at5.turn_index, at5.cooling, at5.last_issued) == (5, {"a": 1}, "c")
    draws([0.0, 0.0, 0.0, 0.0])
    assert schedule(at5, ["a", "b", "c"], 1, t)[0] == "b"
    at6 = resolve_cross_turn_state(history, C1, turn_index=6)  # a free; no pick at turn 5
    assert (at6.cooling, at6.last_issued) == ({}, None)
    draws([0.0, 0.0])
    assert schedule(at6, ["a"], 1, t)[0] == "a"


def test_longest_cooldown_wins_when_two_metas_cool_one_subject() -> None:
    state = resolve_cross_turn_state([meta(0, "a", {"a": 5}), meta(2, "b", {"a": 1})], C1)
    # turn 3: from turn 0, 5 - 3 + 1 = 3 left; from turn 2, 1 - 1 + 1 = 1 left
    assert state.cooling == {"a": 3}
    state = resolve_cross_turn_state([meta(0, "a", {"a": 1}), meta(2, "b", {"a": 4})], C1)
    assert state.cooling == {"a": 4}


# --- cap per window (the capped subject is not the previous pick) ---------------------------

def test_cap_blocks_at_the_limit(draws) -> None:
    t = table(pool=[{"id": s, "p": 1.0, "w": 1.0} for s in "ac"], max_per_window=2)
    state = resolve_cross_turn_state([meta(0, "a"), meta(1, "a"), meta(2, "b")], C1)
    assert state.issued_counts == {"a": 2, "b": 1} and state.last_issued == "b"
    draws([0.0, 0.0, 0.0])  # r = 0 would pick a first if a survived
    pick, m = schedule(state, ["a", "c"], 1, t)
    assert pick == "c" and m.subject_id == "c"


def test_cap_allows_just_under_the_limit(draws) -> None:
    t = table(pool=[{"id": "a", "p": 1.0, "w": 1.0}], max_per_window=3)
    state = resolve_cross_turn_state([meta(0, "a"), meta(1, "a"), meta(2, "b")], C1)
    draws([0.0, 0.0])
    assert schedule(state, ["a"], 1, t)[0] == "a"


def test_no_cap_means_no_limit(draws) -> None:
    t = table(pool=[{"id": "a", "p": 1.0, "w": 1.0}])
    state = resolve_cross_turn_state([meta(i, "a") for i in range(0, 20, 2)] + [meta(20, "b")], C1)
    assert state.issued_counts["a"] == 10
    draws([0.0, 0.0])
    assert schedule(state, ["a"], 1, t)[0] == "a"


@pytest.mark.parametrize(("others", "count"), [(19, 1), (20, 0)])
def test_the_cap_counts_only_the_last_20_metas(draws, others: int, count: int) -> None:
    # a issued at turns 0 and 1, then `others` turns without guidance
    history = [meta(0, "a"), meta(1, "a")] + [meta(2 + i) for i in range(others)]
    state = resolve_cross_turn_state(history, C1)
    assert state.issued_counts.get("a", 0) == count
    t = table(pool=[{"id": "a", "p": 1.0, "w": 1.0}], max_per_window=1)
    draws([0.0, 0.0])
    assert schedule(state, ["a"], 1, t)[0] == (None if count else "a")


def test_window_is_a_parameter_and_turn_defaults_to_one_past_the_newest() -> None:
    history = [meta(5, "a", {"a": 9}), meta(6, "b")]
    assert resolve_cross_turn_state(history, C1).turn_index == 7
    assert resolve_cross_turn_state([], C1).turn_index == 0
    only_last = resolve_cross_turn_state(history, C1, window=1)
    assert (only_last.issued_counts, only_last.cooling, only_last.last_issued) == ({"b": 1}, {}, "b")


def test_a_pick_of_two_turns_ago_is_not_the_previous_pick() -> None:
    state = resolve_cross_turn_state([meta(0, "a"), meta(1)], C1)
    assert state.last_issued is None and state.issued_counts == {"a": 1}


# --- meta fields, seeds and hashes (from the documented formulas, not from the kernel) -------

def _sha_seed(*parts) -> int:
    text = json.dumps(list(parts), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _sha_hash(value) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_meta_records_turn_seed_and_pool_hash() -> None:
    t = table(pool=[{"id": "a", "p": 0.0, "w": 1.0}])
    state = resolve_cross_turn_state([meta(0), meta(1)], C1)
    _, m = schedule(state, [Candidate(id="a", weight=2.0), "a"], 7, t)
    turn_seed = _sha_seed(7, "w3", 2)
    assert m.turn_index == 2
    assert m.seed == f"{turn_seed:016x}"
    # duplicates collapse to the first occurrence (weight 2.0)
    assert m.candidate_pool_hash == _sha_hash(["teaching", "t-1", [["a", 2.0]]])


def test_session_rng_derives_turn_seeds() -> None:
    rng = SessionRng.for_session("s-1")
    assert rng.seed == _sha_seed("tandem.session", "s-1")
    assert rng.turn_seed(4) == _sha_seed(rng.seed, "w3", 4)
    assert rng.turn_seed(4, "other") == _sha_seed(rng.seed, "other", 4)
    assert rng.for_turn(4).random() == rng.for_turn(4).random()


def test_the_turn_rng_is_seeded_with_the_turn_seed(draws) -> None:
    t = table(pool=[{"id": "a", "p": 1.0, "w": 1.0}])
    draws([0.0, 0.0])
    schedule(resolve_cross_turn_state([meta(0)], C1), ["a"], 11, t)
    assert ScriptedRandom.seeds == [_sha_seed(11, "w3", 1)]


def test_schedule_turn_without_a_branch_issues_nothing() -> None:
    tables = load_coach_rule_tables().w3
    state = resolve_cross_turn_state([meta(0), meta(1), meta(2)], IntentContext(intent="chitchat"))
    pick, m = schedule_turn(state, ["topic:natures"], 5, tables)
    assert pick is None
    assert (m.turn_index, m.guidance_type, m.subject_id, m.cooldown_writeback) == (3, "none", None, {})
    assert m.seed == f"{_sha_seed(5, 'w3', 3):016x}"
    assert m.candidate_pool_hash == _sha_hash(["none", "", []])
    assert m.table_version == ""


def test_schedule_turn_routes_by_intent(draws) -> None:
    tables = load_coach_rule_tables().w3
    state = resolve_cross_turn_state([], IntentContext(intent="knowledge_qa"))
    draws([0.0, 0.0])  # fact:type_chart p 0.5
    pick, m = schedule_turn(state, ["fact:type_chart"], SessionRng(5), tables)
    # knowledge_qa: no per-entry cooldown, default_cooldown 4
    assert (pick, m.guidance_type, m.cooldown_writeback, m.table_version) == (
        "fact:type_chart", "knowledge_qa", {"fact:type_chart": 4}, "coach-w3-knowledge_qa-1")
