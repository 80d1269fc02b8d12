"""The coach pack: deterministic world, typed tools, tables, sessions and reference directions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipelines.domains.coach import (
    BRANCH_OF_INTENT,
    INTENT_LABELS,
    PREWARM_KEYS,
    SNAPSHOT_KEYS,
    TOOL_NAMES,
    best_counters,
    build_registry,
    generate_coach_world,
    generate_sessions,
    live_facts_for,
    load_coach_rule_tables,
)
from pipelines.domains.coach.world import STRONG_AGAINST, effectiveness
from pipelines.sgc.canonical import canonical_json
from pipelines.sgc.phi import phi_lookup
from pipelines.sgc.snapshot import Snapshot
from pipelines.sgc.w1 import parse_perception
from pipelines.sgc.w1_grammar import grammar
from pipelines.sgc.w1_run import FallThroughCounters, PerceptionRun
from pipelines.sgc.w2 import check_paragraph_contradictions, ground
from pipelines.tools import ToolContext

WORLD = generate_coach_world(7)
TABLES = load_coach_rule_tables()
ROOT = Path(__file__).resolve().parents[2]


def test_world_is_deterministic_and_seed_sensitive():
    assert canonical_json(generate_coach_world(7)) == canonical_json(WORLD)
    assert canonical_json(generate_coach_world(8)) != canonical_json(WORLD)
    assert len(WORLD.species) == 24 and len(WORLD.opponents) == 10 and len(WORLD.users) == 12


def test_type_chart_is_balanced():
    for el, strong in STRONG_AGAINST.items():
        assert len(strong) == 2 and el not in strong
        weak_to = [a for a, s in STRONG_AGAINST.items() if el in s]
        assert len(weak_to) == 2
    assert effectiveness("water", "fire") == 2.0 and effectiveness("fire", "water") == 0.5
    assert effectiveness("fire", "electric") == 1.0


def test_world_invariants():
    rare = [s for s in WORLD.skills.values() if s.rare]
    assert rare and all(s.unlock_event for s in rare)
    for sp in WORLD.species.values():
        if sp.evolves_to:
            assert WORLD.species[sp.evolves_to].evolves_from == sp.name
    for user in WORLD.users.values():
        ids = {c.creature_id for c in user.creatures}
        for c in user.creatures:
            assert c.evolved == (WORLD.species[c.species].stage == 2)
            assert all(WORLD.skills[k].element == WORLD.species[c.species].element for k in c.skills)
        for lu in user.lineups:
            assert set(lu.members) <= ids and set(lu.swap_group) <= ids and len(lu.members) == 3


def test_tools_are_typed_and_scoped_to_the_user():
    reg = build_registry()
    assert reg.names() == sorted(TOOL_NAMES)
    ctx = ToolContext(authenticated_user_id="u001")
    inv = reg.call("get_inventory", {}, ctx, WORLD)
    assert inv.ok and len(inv.result["creatures"]) == len(WORLD.users["u001"].creatures)
    mu = reg.call("matchup_scores", {"opponent_id": "o03", "top_k": 3}, ctx, WORLD)
    scores = [e["score"] for e in mu.result["scores"]]
    assert scores == sorted(scores, reverse=True) and len(scores) == 3
    assert mu.result["scores"][0]["species"] == best_counters(WORLD, "u001", "o03", 1)[0][0].species
    assert reg.call("get_opponent_info", {"opponent_id": WORLD.opponents["o02"].name}, ctx, WORLD).ok
    assert reg.call("get_lineups", {"user_id": "u002"}, ctx, WORLD).error_code == "ineligible_action"
    assert reg.call("get_opponent_info", {"opponent_id": "o99"}, ctx, WORLD).error_code == "invalid_input"
    assert reg.call("species_info", {"species": "Nope"}, ctx, WORLD).error_code == "invalid_input"
    assert reg.call("matchup_scores", {"opponent_id": "o01", "bogus": 1}, ctx, WORLD).error_code == "invalid_input"
    paths = reg.call("evolution_paths", {}, ctx, WORLD).result["paths"]
    assert len(paths) == 8 and all(p["ready"] in (True, False) for p in paths)


def test_phi_table_covers_about_fifty_rows_and_leaves_some_unmapped():
    rows = {(r.intent, r.sub_intent) for r in TABLES.phi.rows}
    pairs = {(i, s) for i, subs in INTENT_LABELS.items() for s in subs}
    assert 45 <= len(rows) <= 55 and rows < pairs
    assert ("meta", "feedback") in pairs - rows
    keys = {k for r in TABLES.phi.rows for k in r.state_keys()}
    assert keys <= set(SNAPSHOT_KEYS)
    assert set(BRANCH_OF_INTENT.values()) == set(TABLES.w3)


def test_grammar_for_coach_labels_parses_every_session_stream():
    import lark

    g = lark.Lark(grammar(list(INTENT_LABELS), INTENT_LABELS, TOOL_NAMES), parser="earley", lexer="dynamic")
    for session in generate_sessions(WORLD, TABLES, seed=2, n_sessions=3, turns_per_session=10):
        for turn in session.turns:
            g.parse(turn.stream)
            _, result = parse_perception([turn.stream], labels=INTENT_LABELS, tools=TOOL_NAMES)
            assert (result.intent, result.sub_intent) == (turn.intent, turn.sub_intent)


def test_sessions_are_deterministic_with_reference_directions():
    a = generate_sessions(WORLD, TABLES, seed=1, n_sessions=4, turns_per_session=15)
    assert canonical_json(a) == canonical_json(generate_sessions(WORLD, TABLES, seed=1, n_sessions=4,
                                                                  turns_per_session=15))
    refs = [t.reference for s in a for t in s.turns]
    assert {"best_counter", "none"} <= {r.kind for r in refs}
    for s in a:
        for t in s.turns:
            if t.reference.kind == "best_counter":
                owned = {c.species for c in WORLD.users[s.user_id].creatures}
                assert t.reference.subject in owned


def test_sessions_drive_w1_w2_end_to_end():
    counters = FallThroughCounters()
    sessions = generate_sessions(WORLD, TABLES, seed=3, n_sessions=5, turns_per_session=12)
    repairs = 0
    for s in sessions:
        facts = live_facts_for(WORLD, s.user_id)
        for t in s.turns:
            snap = Snapshot.of(t.snapshot, session_id=s.session_id, version=t.live_version, turn=t.index)
            run = PerceptionRun(TABLES.phi, snap, counters=counters, labels=INTENT_LABELS, tools=TOOL_NAMES,
                                turn=t.index, live_version=t.live_version, index=TABLES.phi_index)
            for i in range(0, len(t.stream), 9):
                run.feed(t.stream[i:i + 9])
            out = run.finish()
            assert out.dispatched is not None
            g = ground(t.slots, facts, t.intent, psi_table=TABLES.psi, tiers=TABLES.tiers)
            repairs += len(g.repairs)
            assert check_paragraph_contradictions(g.plan) == []
    assert counters.hits > 0 and counters.unmapped > 0 and counters.state_unavailable > 0
    assert repairs > 0


@pytest.mark.parametrize("key", PREWARM_KEYS)
def test_prewarm_keys_gate_fast_path(key):
    snap = Snapshot.of({k: "x" for k in PREWARM_KEYS if k != key})
    assert phi_lookup(TABLES.phi, "recommend", "lineup_for_opponent", snap).kind == "miss_state_unavailable"


def test_no_ray_or_vllm_imports_under_sgc_and_coach():
    for folder in ("pipelines/sgc", "pipelines/domains/coach"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                for n in names:
                    assert n.split(".")[0] not in ("ray", "vllm"), f"{path}: imports {n}"
