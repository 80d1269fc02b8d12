"""sgc_full: W3 over generated coach sessions — no candidate in two consecutive turns, the session
seed (derived or injected), byte-identical replay from the stored metas, rules version on the turn."""

from __future__ import annotations

import copy

import pytest

from pipelines.annex.sgc_ladder import SgcSettings
from pipelines.core.kernels import decide_w3
from pipelines.core.replay import all_identical, replay_w3
from pipelines.domains.coach import (
    BRANCH_OF_INTENT,
    generate_coach_world,
    generate_sessions,
    load_coach_rule_tables,
)
from pipelines.sgc.canonical import derive_seed

from .harnesses import LadderHarness as Harness

WORLD = generate_coach_world(7)
TABLES = load_coach_rule_tables()
SESSIONS = generate_sessions(WORLD, TABLES, seed=3, n_sessions=4, turns_per_session=8)


def run_session(session, settings: SgcSettings | None = None) -> Harness:
    h = Harness("sgc_full", user_id=session.user_id, session_id=session.session_id, settings=settings)
    for turn in session.turns:
        h.local.set_state(session.session_id, turn.snapshot, version=turn.live_version)
        out = h.turn(turn.user_text, orch=turn.stream, slots=turn.slots, gen="Here is my advice for you.")
        assert out.ctx.status == "ok", out.ctx.meta
    return h


@pytest.fixture(scope="module")
def ran() -> list[Harness]:
    return [run_session(s) for s in SESSIONS]


def test_no_candidate_is_issued_in_two_consecutive_turns(ran):
    issued = 0
    for h in ran:
        subjects = [t.meta["w3"]["subject_id"] for t in h.history]
        assert [t.meta["w3"]["turn_index"] for t in h.history] == list(range(len(h.history)))
        for a, b in zip(subjects, subjects[1:], strict=False):
            assert a is None or a != b
        issued += sum(s is not None for s in subjects)
    assert issued >= 5  # the check is not vacuous


def test_replay_is_byte_identical(ran):
    for h, session in zip(ran, SESSIONS, strict=True):
        results = replay_w3(h.history, None, tables=TABLES, session_id=session.session_id,
                            branch_of_intent=BRANCH_OF_INTENT)
        assert len(results) == len(session.turns) and all_identical(results)
        assert all(r.stored == r.replayed for r in results)


def test_replay_detects_a_tampered_meta(ran):
    h = ran[0]
    history = [copy.deepcopy(t.meta) for t in h.history]
    history[2]["w3"]["candidate_pool_hash"] = "0" * 16
    results = replay_w3(history, None, tables=TABLES, session_id=SESSIONS[0].session_id, branch_of_intent=BRANCH_OF_INTENT)
    assert not results[2].identical and results[2].reason == "decision differs"


def test_injected_seed_is_used_and_replays_only_with_it():
    settings = SgcSettings(session_seed_fn=lambda sid: 1234)
    h = run_session(SESSIONS[1], settings)
    first = h.history[0].meta["w3"]
    assert first["seed"] == f"{derive_seed(1234, 'w3', 0):016x}"
    assert all_identical(replay_w3(h.history, 1234, tables=TABLES, session_id=SESSIONS[1].session_id, branch_of_intent=BRANCH_OF_INTENT))
    assert not any(r.identical for r in replay_w3(h.history, None, tables=TABLES,
                                                 session_id=SESSIONS[1].session_id,
                                                 branch_of_intent=BRANCH_OF_INTENT))


def test_candidates_match_the_state_reference_and_exclusions_flow_from_w2(ran):
    compared = 0
    for h, session in zip(ran, SESSIONS, strict=True):
        prev_opp = None
        for record, turn in zip(h.history, session.turns, strict=True):
            inputs = record.meta["sgc"]["w3_inputs"]
            # the scripted sessions move the opponent without a version bump: compare where it stayed
            same_opp, prev_opp = prev_opp in (None, turn.snapshot.get("opponent_id")), turn.snapshot.get("opponent_id")
            if BRANCH_OF_INTENT.get(turn.intent) == "recommend" and "opponent_id" in turn.snapshot and same_opp:
                pool = {e.id for e in TABLES.w3["recommend"].pool}
                expected = [c.model_dump() for c in turn.candidates if c.id not in pool]
                assert inputs["candidates"] == expected
                compared += 1
            slots = record.meta["sgc"]["w2"]["slots"]
            assert inputs["c1"]["excluded_subjects"] == [f"creature:{e}" for e in slots["excluded_entities"]]
    assert compared >= 3


def test_rules_version_on_turn_and_events(ran):
    h = ran[0]
    version = TABLES.version
    assert all(t.meta["sgc"]["rules_version"] == version for t in h.history)
    w3_events = h.sink.of("sgc.w3")
    assert w3_events and all(e["rules_version"] == version for e in w3_events)


def test_w3_kernel_is_deterministic_and_avoids_the_last_pick():
    c1 = {"intent": "teaching", "sub_intent": "evolution", "excluded_subjects": []}
    a = decide_w3(TABLES, BRANCH_OF_INTENT, "s9", [], c1, [], 0)
    b = decide_w3(TABLES, BRANCH_OF_INTENT, "s9", [], c1, [], 0)
    assert a.meta.canonical() == b.meta.canonical()
    prior = [a.meta]
    for t in range(1, 12):
        nxt = decide_w3(TABLES, BRANCH_OF_INTENT, "s9", prior, c1, [], t)
        assert nxt.pick is None or nxt.pick != prior[-1].subject_id
        prior.append(nxt.meta)
    chit = decide_w3(TABLES, BRANCH_OF_INTENT, "s9", [], {"intent": "chitchat", "sub_intent": "greeting"}, [], 0)
    assert chit.pick is None and chit.meta.guidance_type == "none" and chit.meta.table_version == TABLES.version
