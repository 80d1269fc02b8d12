"""W3: cross-turn state, the filter → leak → pick kernel, no consecutive repeats, byte-identical replay."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.domains.coach.pack import load_coach_rule_tables
from pipelines.errors import ConfigError
from pipelines.sgc.canonical import canonical_json, session_seed
from pipelines.sgc.w3 import (
    HISTORY_WINDOW,
    AnswerMeta,
    BranchTable,
    Candidate,
    IntentContext,
    SessionRng,
    load_branch_table,
    resolve_cross_turn_state,
    schedule,
    schedule_turn,
)

TABLES = load_coach_rule_tables()
ALWAYS = BranchTable(version="t", branch="teaching", default_cooldown=0,
                     pool=[{"id": f"topic:{i}", "p": 1.0, "w": 1.0} for i in "abcd"])
C1 = IntentContext(intent="teaching", sub_intent="natures")


def meta(turn, subject=None, cooldown=None):
    return AnswerMeta(turn_index=turn, guidance_type="teaching" if subject else "none", subject_id=subject,
                      cooldown_writeback=cooldown or {}, seed="0", candidate_pool_hash="h")


def test_resolve_cooldowns_window_and_last_issued():
    metas = [meta(0, "topic:a", {"topic:a": 3}), meta(1, "topic:b", {"topic:b": 1}), meta(2)]
    st3 = resolve_cross_turn_state(metas, C1)
    assert st3.turn_index == 3 and st3.last_issued is None
    assert st3.cooling == {"topic:a": 1}  # a cools through turn 3, b only through turn 2
    st2 = resolve_cross_turn_state(metas[:2], C1)
    assert st2.last_issued == "topic:b" and st2.cooling == {"topic:a": 2, "topic:b": 1}
    many = [meta(i, "topic:a") for i in range(30)]
    assert resolve_cross_turn_state(many, C1).issued_counts == {"topic:a": HISTORY_WINDOW}


def test_hard_filter_previous_cooling_excluded_unlisted():
    state = resolve_cross_turn_state([meta(0, "topic:b", {"topic:c": 5}), meta(1, "topic:a")],
                                     C1.model_copy(update={"excluded_subjects": ("topic:d",)}))
    for seed in range(50):
        pick, m = schedule(state, ["topic:a", "topic:b", "topic:c", "topic:d", "topic:zzz"], seed, ALWAYS)
        assert pick == "topic:b" and m.subject_id == "topic:b" and m.guidance_type == "teaching"


def test_no_guidance_when_nothing_survives():
    state = resolve_cross_turn_state([meta(0, "topic:a")], C1)
    pick, m = schedule(state, ["topic:a"], 1, ALWAYS)
    assert pick is None and m.guidance_type == "none" and m.cooldown_writeback == {}
    never = ALWAYS.model_copy(update={"pool": [e.model_copy(update={"p": 0.0}) for e in ALWAYS.pool]})
    assert schedule(resolve_cross_turn_state([], C1), ["topic:a", "topic:b"], 1, never)[0] is None


def test_chitchat_gets_no_guidance_meta():
    state = resolve_cross_turn_state([], IntentContext(intent="chitchat", sub_intent="greeting"))
    pick, m = schedule_turn(state, [], 7, TABLES.w3)
    assert pick is None and m.guidance_type == "none" and m.turn_index == 0


def test_max_per_window_blocks():
    # topic:a was issued twice but is NOT the previous pick (topic:b is), so only the cap blocks it
    capped = ALWAYS.model_copy(update={"max_per_window": 2})
    state = resolve_cross_turn_state([meta(0, "topic:a"), meta(1, "topic:a"), meta(2, "topic:b")], C1)
    assert state.last_issued == "topic:b" and state.issued_counts["topic:a"] == 2
    for seed in range(20):
        assert schedule(state, ["topic:a", "topic:c"], seed, capped)[0] == "topic:c"
    # without the cap (or one above the count) topic:a is a candidate again
    for uncapped in (ALWAYS, ALWAYS.model_copy(update={"max_per_window": 3})):
        assert {schedule(state, ["topic:a", "topic:c"], s, uncapped)[0] for s in range(20)} == {"topic:a", "topic:c"}


def test_weights_and_leak_shape_the_distribution():
    table = BranchTable(version="t", branch="knowledge_qa", default_cooldown=0,
                        pool=[{"id": "heavy", "p": 1.0, "w": 9.0}, {"id": "light", "p": 1.0, "w": 1.0},
                              {"id": "rare", "p": 0.0, "w": 100.0}])
    state = resolve_cross_turn_state([], IntentContext(intent="knowledge_qa"))
    picks = [schedule(state, ["heavy", "light", "rare"], s, table)[0] for s in range(400)]
    assert "rare" not in picks
    assert picks.count("heavy") > 3 * picks.count("light") > 0


def test_candidate_weight_multiplies_pool_weight():
    table = ALWAYS.model_copy(update={"pool": [], "allow_unlisted": True, "default_p": 1.0})
    state = resolve_cross_turn_state([], C1)
    picks = [schedule(state, [Candidate(id="x", weight=50.0), Candidate(id="y", weight=0.01)], s, table)[0]
             for s in range(100)]
    assert picks.count("x") > 90


def _play(session_id: str, turns: list[tuple[str, list[str | Candidate]]], seed: int | None = None):
    rng = SessionRng(seed) if seed is not None else SessionRng.for_session(session_id)
    metas: list[AnswerMeta] = []
    out = []
    for intent, cands in turns:
        state = resolve_cross_turn_state(metas[-HISTORY_WINDOW:], IntentContext(intent=intent))
        pick, m = schedule_turn(state, cands, rng, TABLES.w3)
        metas.append(m)
        out.append(canonical_json([pick, m]))
    return out, metas


def _random_turns(r: random.Random, n: int):
    branches = {b: [e.id for e in t.pool] for b, t in TABLES.w3.items()}
    turns = []
    for _ in range(n):
        intent = r.choice(["recommend", "teaching", "knowledge_qa", "chitchat"])
        pool = list(branches.get(intent, []))
        if intent == "recommend":
            pool += [Candidate(id=f"creature:{s}", weight=r.uniform(0.5, 2.0)) for s in r.sample("ABCDEFG", 3)]
        turns.append((intent, pool))
    return turns


@settings(max_examples=150, deadline=None)
@given(session=st.text(min_size=1, max_size=12), gen_seed=st.integers(0, 2**32), n=st.integers(2, 45))
def test_never_repeats_consecutively_and_replays_byte_identically(session, gen_seed, n):
    turns = _random_turns(random.Random(gen_seed), n)
    out, metas = _play(session, turns)
    picks = [m.subject_id for m in metas]
    for prev, cur in zip(picks, picks[1:], strict=False):
        assert cur is None or cur != prev
    again, _ = _play(session, turns)
    assert again == out  # byte for byte
    assert [m.turn_index for m in metas] == list(range(n))


def test_replay_from_stored_metas_matches_live_run():
    turns = _random_turns(random.Random(3), 30)
    out, metas = _play("s-42", turns)
    stored = [canonical_json(m) for m in metas]  # what writeback persisted
    import json

    reloaded = [AnswerMeta.model_validate(json.loads(s)) for s in stored]
    for t in range(1, 30):
        state = resolve_cross_turn_state(reloaded[:t], IntentContext(intent=turns[t][0]))
        pick, m = schedule_turn(state, turns[t][1], SessionRng.for_session("s-42"), TABLES.w3)
        assert canonical_json([pick, m]) == out[t]


def test_seed_is_injectable_and_stable():
    assert session_seed("abc") == session_seed("abc") != session_seed("abd")
    # pinned: SHA-256 based, so it never changes across processes or PYTHONHASHSEED
    assert session_seed("abc") == 10766972168015033347
    turns = _random_turns(random.Random(5), 25)
    a, _ = _play("x", turns, seed=123)
    b, _ = _play("y", turns, seed=123)
    c, _ = _play("x", turns, seed=124)
    assert a == b and a != c


def test_candidate_order_does_not_matter():
    state = resolve_cross_turn_state([], C1)
    ids = ["topic:a", "topic:b", "topic:c", "topic:d"]
    base = schedule(state, ids, 9, ALWAYS)
    assert schedule(state, list(reversed(ids)), 9, ALWAYS) == base


def test_branch_table_validation():
    with pytest.raises(ConfigError) as info:
        load_branch_table({"version": "v", "branch": "teaching", "pool": [{"id": "a", "p": 1.5, "w": 1}]})
    assert info.value.details["path"] == "w3.pool.0.p"
    with pytest.raises(ConfigError, match="duplicate"):
        load_branch_table({"version": "v", "branch": "teaching", "pool": [{"id": "a", "p": 1, "w": 1}] * 2})
    with pytest.raises(ConfigError, match="empty pool"):
        load_branch_table({"version": "v", "branch": "teaching"})
    with pytest.raises(ConfigError):
        load_branch_table({"version": "v", "branch": "Chit Chat", "allow_unlisted": True})
