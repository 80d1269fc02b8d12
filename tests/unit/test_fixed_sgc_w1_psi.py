"""Fixed-value pins for the SGC W1 / Ψ helpers: the paragraph scheduler's refusals and greedy
order, the plan's sort key, canonical JSON of models, the snapshot's defaults and lookups, Φ's
caller-given index, the held close-tag suffix for tags that contain ``<``, and the W1 run's
counters, forwarded parser / Φ arguments and ``finish``. Expected values are written by hand
from each function's rule (docstrings of ``psi.py``, ``canonical.py``, ``snapshot.py``,
``phi.py``, ``w1.py`` and ``w1_run.py``)."""

from __future__ import annotations

import pytest

from pipelines.errors import ConfigError, InvalidModelOutput
from pipelines.sgc.canonical import canonical_json
from pipelines.sgc.phi import PhiOutcome, PhiRow, PhiTable, phi_lookup
from pipelines.sgc.psi import Paragraph, ParagraphPlan, _plan_key, plan_paragraphs
from pipelines.sgc.snapshot import Snapshot, SnapshotEntry
from pipelines.sgc.w1 import _held_suffix
from pipelines.sgc.w1_run import FallThroughCounters, PerceptionRun
from pipelines.sgc.w2_diff import Conflict


def P(kind: str, cid: str | None = None) -> Paragraph:
    return Paragraph(kind=kind, constraint_id=cid)


def C(cid: str, tier: str) -> Conflict:
    return Conflict(constraint_id=cid, kind="entity_not_owned", tier=tier)


# --- plan_paragraphs: refusals --------------------------------------------------------------------

def test_required_outside_eligible_is_refused_naming_the_missing_sorted() -> None:
    with pytest.raises(ConfigError) as info:
        plan_paragraphs([P("guidance")], [P("guidance"), P("praise", "b"), P("apology", "a")])
    e = info.value
    assert e.message == "paragraph plan: required paragraphs are not all eligible"
    assert e.details == {"missing": ["kind='apology' constraint_id='a'", "kind='praise' constraint_id='b'"]}


def test_contradictory_required_is_refused_with_the_pairs_in_plan_order() -> None:
    req = [P("praise", "x"), P("apology", "x"), P("guidance", "x")]
    with pytest.raises(ConfigError) as info:
        plan_paragraphs(req, req)
    e = info.value
    assert e.message == "paragraph plan: required paragraphs contradict each other"
    # plan order puts apology before praise, so the pair reads (apology, praise)
    assert e.details == {"pairs": [[{"kind": "apology", "constraint_id": "x"},
                                    {"kind": "praise", "constraint_id": "x"}]]}


def test_the_callers_incompatible_pairs_judge_the_required_set() -> None:
    req = [P("guidance", "x"), P("scene_flavor", "x")]
    with pytest.raises(ConfigError):
        plan_paragraphs(req, req, incompatible=[("guidance", "scene_flavor")])
    both = [P("praise", "x"), P("apology", "x")]  # contradictory only under the default pairs
    assert plan_paragraphs(both, both, incompatible=[]).paragraphs == (P("apology", "x"), P("praise", "x"))


# --- plan_paragraphs: greedy choice of optional paragraphs ----------------------------------------

def test_a_constraints_severity_is_its_hardest_conflict() -> None:
    # "b" has a hard and (later) a soft conflict: it ranks hard, ahead of the soft-only "a"
    conflicts = [C("b", "hard"), C("b", "soft"), C("a", "soft")]
    eligible = [P("constraint_account", "a"), P("constraint_account", "b")]
    plan = plan_paragraphs(eligible, [], conflicts, max_paragraphs=1)
    assert plan.paragraphs == (P("constraint_account", "b"),)
    # equal severity: the constraint id decides
    plan = plan_paragraphs(eligible, [], [C("b", "soft"), C("a", "soft")], max_paragraphs=1)
    assert plan.paragraphs == (P("constraint_account", "a"),)


def test_a_turn_level_paragraph_ranks_before_constraint_ones_of_its_kind() -> None:
    # among equals (same kind, no conflict) the turn-level paragraph (id None ~ "") goes first,
    # even against an id that sorts early in ASCII
    plan = plan_paragraphs([P("praise", "B"), P("praise")], [], max_paragraphs=1)
    assert plan.paragraphs == (P("praise"),)


def test_an_incompatible_optional_is_skipped_and_later_ones_still_considered() -> None:
    req = [P("constraint_account", "x")]
    eligible = req + [P("praise", "x"), P("scene_flavor", "x")]
    plan = plan_paragraphs(eligible, req)
    assert plan.paragraphs == (P("constraint_account", "x"), P("scene_flavor", "x"))
    assert plan.required == frozenset(req)


@pytest.mark.parametrize(("para", "key"), [
    (P("apology"), (0, 0, "")),                    # turn-level: 0, empty id
    (P("apology", "a"), (0, 1, "a")),              # constraint-level: 1, its id
    (P("constraint_account", ""), (1, 1, "")),     # an empty id is still constraint-level
    (P("scene_flavor", "z"), (4, 1, "z")),
])
def test_plan_key_is_kind_order_then_turn_level_first_then_id(para: Paragraph, key: tuple) -> None:
    assert _plan_key(para) == key


# --- canonical_json --------------------------------------------------------------------------------

def test_canonical_json_writes_a_model_s_fields_with_a_set_of_models_in_order() -> None:
    # the set's members are dicts, which do not order: sorted by their canonical text
    for required in ({P("praise", "a"), P("apology", "b")}, {P("apology", "b"), P("praise", "a")}):
        plan = ParagraphPlan(paragraphs=(P("praise"),), required=frozenset(required))
        assert canonical_json(plan) == (
            '{"paragraphs":[{"constraint_id":null,"kind":"praise"}],'
            '"required":[{"constraint_id":"a","kind":"praise"},{"constraint_id":"b","kind":"apology"}]}'
        )


def test_equal_models_with_a_set_field_give_the_same_text() -> None:
    import datetime

    from pydantic import BaseModel

    class M(BaseModel):
        s: frozenset[int]
        day: datetime.date = datetime.date(2026, 1, 2)

    a, b = M(s=frozenset([1, 9, 10])), M(s=frozenset([10, 9, 1]))
    assert canonical_json(a) == canonical_json(b) == '{"day":"2026-01-02","s":[1,9,10]}'  # numbers in order


def test_a_tag_name_with_markup_is_refused() -> None:
    import pydantic

    from pipelines.sgc.w1 import W1Tags

    for bad in ("a<b", "a>", "", "1A", "A B"):
        with pytest.raises(pydantic.ValidationError):
            W1Tags(NARRATION=bad)
    assert W1Tags(NARRATION="N_2").close("NARRATION") == "</N_2>"


# --- Snapshot -------------------------------------------------------------------------------------

def test_snapshot_of_defaults_to_an_anonymous_version_zero_turn_zero_snapshot() -> None:
    s = Snapshot.of({"k": 1})
    assert (s.session_id, s.version, s.loaded_at_turn) == ("", 0, 0)
    assert s.entries == {"k": SnapshotEntry(value=1, version=0, loaded_at_turn=0)}


def test_with_values_keeps_the_newest_version_and_turn() -> None:
    s = Snapshot.of({"a": 1}, session_id="s1", version=2, turn=5)
    assert (s.session_id, s.version, s.loaded_at_turn) == ("s1", 2, 5)
    t = s.with_values({"b": 2}, version=1, turn=3)  # an older load does not move either back
    assert (t.session_id, t.version, t.loaded_at_turn) == ("s1", 2, 5)
    assert t.entries["b"] == SnapshotEntry(value=2, version=1, loaded_at_turn=3)
    u = s.with_values({}, version=3, turn=6)
    assert (u.version, u.loaded_at_turn) == (3, 6)


def test_value_falls_back_to_the_default_only_for_an_absent_key() -> None:
    s = Snapshot.of({"a": 1, "n": None})
    assert s.value("absent") is None
    assert s.value("absent", 7) == 7
    assert s.value("a", 7) == 1
    assert s.value("n", 7) is None


def test_stale_keys_passes_over_absent_keys_and_checks_the_rest() -> None:
    s = Snapshot.of({"a": 1, "b": 2}, version=1)
    assert s.stale_keys(["absent", "a", "gone", "b"], live_version=2) == ["a", "b"]
    assert s.stale_keys(["absent", "a"], live_version=1) == []


# --- phi_lookup: the caller's index ---------------------------------------------------------------

ROW = {"intent": "greeting", "sub_intent": "hello", "requires_state": ["user_id"],
       "tools": [{"tool": "lookup", "args_from": {"user_id": "user_id"}}]}
PHI = PhiTable.model_validate({"version": "t1", "max_age_turns": 2, "rows": [ROW]})
USER = Snapshot.of({"user_id": "u1"})


def test_phi_lookup_reads_the_given_index_not_the_tables() -> None:
    assert phi_lookup(PHI, "greeting", "hello", USER).kind == "hit"
    assert phi_lookup(PHI, "greeting", "hello", USER, index={}).kind == "miss_unmapped"
    extra = PhiRow.model_validate({"intent": "cancel", "sub_intent": "order", "tools": [{"tool": "ping"}]})
    out = phi_lookup(PHI, "cancel", "order", USER, index={("cancel", "order"): extra})
    assert out.kind == "hit" and [t.tool for t in out.tools] == ["ping"]


# --- _held_suffix with a close tag that contains "<" ----------------------------------------------
# (W1Tags refuses such names; the function on its own still holds the longest proper prefix it can)

@pytest.mark.parametrize(("buf", "close", "held"), [
    ("</a<b", "</a<b>", 5),         # the last "<" ("<b") fails; the longest proper prefix is held
    ("x</a<b", "</a<b>", 5),
    ("</a<b>", "</a<b>", 0),        # the whole tag is not a proper prefix
    ("<</a<b", "</a<b<c>", 5),      # of two earlier "<", the nearer one starts the prefix
    ("</a<x", "</a<b>", 0),
])
def test_held_suffix_looks_past_a_failing_inner_lt(buf: str, close: str, held: int) -> None:
    assert _held_suffix(buf, close) == held


# --- FallThroughCounters / PerceptionRun -----------------------------------------------------------

def _outcome(kind: str) -> PhiOutcome:
    return PhiOutcome(kind=kind, intent="greeting", sub_intent="hello", table_version="t1")


@pytest.mark.parametrize(("kinds", "expected"), [
    (["hit", "hit"], {"hits": 2, "unmapped": 0, "state_unavailable": 0}),
    (["miss_unmapped", "miss_unmapped"], {"hits": 0, "unmapped": 2, "state_unavailable": 0}),
    (["miss_state_unavailable"] * 2, {"hits": 0, "unmapped": 0, "state_unavailable": 2}),
])
def test_counters_accumulate_per_outcome_kind(kinds: list[str], expected: dict[str, int]) -> None:
    counters = FallThroughCounters()
    for k in kinds:
        counters.record(_outcome(k))
    assert counters.as_dict() == {**expected, "plan_ignored": 0}


LABELS = {"greeting": ["hello"], "cancel": ["order"]}
HEAD = "<INTENT>greeting</INTENT><SUB_INTENT>hello</SUB_INTENT><NARRATION>Hi there.</NARRATION>"
PLAN = '<PLAN>[{"tool": "lookup"}]</PLAN>'


def _run(**kw) -> PerceptionRun:
    kw.setdefault("labels", LABELS)
    kw.setdefault("tools", ["lookup"])
    return PerceptionRun(PHI, kw.pop("snapshot", USER), **kw)


def test_run_accumulates_ignored_plans_on_shared_counters() -> None:
    counters = FallThroughCounters()
    for _ in range(2):
        run = _run(counters=counters)
        run.feed(HEAD + PLAN)
        assert run.plan_ignored is True
    assert counters.as_dict() == {"hits": 2, "unmapped": 0, "state_unavailable": 0, "plan_ignored": 2}


def test_run_parser_checks_the_given_labels_and_tools() -> None:
    with pytest.raises(InvalidModelOutput):
        _run().feed("<INTENT>unknown</INTENT>")
    with pytest.raises(InvalidModelOutput):
        _run(index={}).feed(HEAD + '<PLAN>[{"tool": "drop_all"}]</PLAN>')
    run = _run(labels=None, tools=None, index={})
    run.feed("<INTENT>unknown</INTENT><SUB_INTENT>x</SUB_INTENT><NARRATION></NARRATION>"
             '<PLAN>[{"tool": "drop_all"}]</PLAN>')
    assert run.dispatched is not None and run.dispatched.source == "plan"


@pytest.mark.parametrize(("turn", "kind"), [(2, "hit"), (3, "miss_state_unavailable"), (None, "hit")])
def test_run_passes_its_turn_to_phi(turn: int | None, kind: str) -> None:
    # the entry was loaded at turn 0 and the table allows 2 turns of age
    run = _run(turn=turn)
    run.feed(HEAD)
    assert run.phi is not None and run.phi.kind == kind


def test_run_passes_its_index_to_phi() -> None:
    run = _run(index={})
    run.feed(HEAD)
    assert run.phi is not None and run.phi.kind == "miss_unmapped" and run.dispatched is None


def test_run_has_no_phi_decision_before_the_sub_intent_closes() -> None:
    run = _run()
    assert run.phi is None
    run.feed("<INTENT>greeting</INTENT><SUB_INTENT>hel")
    assert run.phi is None
    run.feed("lo</SUB_INTENT>")
    assert run.phi is not None and run.phi.kind == "hit"


def test_run_collects_the_narration_deltas() -> None:
    run = _run()
    run.feed(HEAD[:-len("there.</NARRATION>")])
    run.feed("there.</NARRATION>")
    assert run.narration == ["Hi ", "there."]


def test_finish_accepts_a_missing_plan_only_when_stopped_early_and_moot() -> None:
    run = _run()
    run.feed(HEAD)
    assert run.plan_moot is True
    with pytest.raises(InvalidModelOutput):
        run.finish()  # not stopped early: the stream is incomplete
    out = run.finish(stopped_early=True)
    assert out.result.plan == () and out.result.narration == "Hi there." and out.dispatched is not None
    missed = _run(index={})  # no freeze: the plan is not moot, so stopping early is no excuse
    missed.feed(HEAD)
    assert missed.plan_moot is False
    with pytest.raises(InvalidModelOutput):
        missed.finish(stopped_early=True)
