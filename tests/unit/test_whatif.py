"""The what-if in process: tandem sessions logged on the real pipeline (scripted model), re-decided under a
changed Φ row, Ψ rule, guard table, pack or model, and the changed turns checked against the ones those
rules govern (written by hand from the tables)."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from pipelines.core.kernels import LocalRuleKernels, load_bundle
from pipelines.core.modelrecord import RecordingModels
from pipelines.core.whatif import (
    LoggedSession,
    LoggedTurn,
    Setup,
    WhatIfReport,
    group_events,
    parse_gates,
    phi_row,
    replayable,
    tripped,
    what_if,
)
from pipelines.counters import Counters
from pipelines.domains import load_domain, register, unregister
from pipelines.errors import InvalidInput
from pipelines.guardrails import LocalGuardrails
from pipelines.guardrails.config import default_guardrail_config
from pipelines.sgc.tables import RuleTablesHolder
from pipelines.tandem.pipeline import TandemPipeline
from tests.doubles import ScriptModels, j, w1

from .harnesses import TandemHarness

ALEX = "alex_rivera_1001"


def log_session(sid: str, turns: list[tuple[str, dict[str, Any]]]) -> tuple[LoggedSession, TandemHarness]:
    """One session played on the real tandem turn (scripted model), its events grouped as the log has them."""
    h = TandemHarness()
    h.pipeline.models = RecordingModels(h.models)
    h.session = sid
    texts = []
    for text, script in turns:
        texts.append(text)
        h.turn(text, **script)
    # turn ids are unique in a real log: the harness numbers each session's turns t1, t2…, so name them apart
    records = [{"kind": k, **f, **({"turn_id": f"{sid}-{f['turn_id']}"} if "turn_id" in f else {})}
               for k, f in h.sink.events]
    by_turn = group_events(records)
    return LoggedSession(session_id=sid, turns=[
        LoggedTurn(turn_id=f"{sid}-t{i + 1}", index=i, text=t, events=by_turn[f"{sid}-t{i + 1}"])
        for i, t in enumerate(texts)]), h


VERIFY = ("Hi, my email is alex.rivera@example.com", {"orch": [w1("greeting", "hello", "Let me find your account.")]})


@pytest.fixture(scope="module")
def sessions() -> list[LoggedSession]:
    """s1: a bare greeting, verification, a cancellation card, yes. s2: verification, a cancellation the policy
    refuses (the order is delivered: a hard conflict)."""
    s1, _ = log_session("s1", [
        ("Hi! What can you help me with?", {"orch": [w1("greeting", "hello", "Happy to help.")]}),
        VERIFY,
        ("Please cancel order #W1000001, I ordered it by mistake", {"orch": [
            w1("cancel", "order", "Let me check that order."),
            j(decision="action", card_id="card.cancel_order",
              params={"order_id": "#W1000001", "reason": "ordered by mistake"})]}),
        ("yes", {}),
    ])
    h = TandemHarness()
    delivered = next(o for o in h.world.users[ALEX].orders if h.world.orders[o].status == "delivered")
    s2, _ = log_session("s2", [
        VERIFY,
        (f"Please cancel order {delivered}, it is no longer needed", {"orch": [
            w1("cancel", "order"),
            j(decision="action", card_id="card.cancel_order", params={"order_id": delivered, "reason": "no longer needed"})]}),
    ])
    return [s1, s2]


PACK = load_domain("support")
RAW = PACK.rule_tables()


def side(label: str, rules: dict[str, Any] | None = None, *, guard: Any = None, pack: Any = PACK,
         **extra: Any) -> Setup:
    tables = load_bundle(pack, rules or RAW)
    kernels = LocalRuleKernels.of(pack, RuleTablesHolder(tables))
    return Setup(label=label, build=lambda m, t, g, k: TandemPipeline(pack, m, t, g, k, counters=Counters()),
                 guardrails=LocalGuardrails(guard), kernels=kernels, tables=tables, **extra)


def run(sessions: list[LoggedSession], cand: Setup, base: Setup | None = None) -> WhatIfReport:
    return asyncio.run(what_if(sessions, base or side("baseline"), cand))


def changed(rep: WhatIfReport) -> dict[tuple[str, int], list[str]]:
    return {(c.session_id, c.turn): c.kinds for c in rep.changes}


def with_row(intent: str, sub: str, state: list[str], **update: Any) -> dict[str, Any]:
    rules = copy.deepcopy(RAW)
    row = next(r for r in rules["phi"]["rows"]
               if (r["intent"], r["sub_intent"], r["requires_state"]) == (intent, sub, state))
    row.update(update)
    rules["phi"]["version"] = "support-phi-candidate"
    return rules


# -- what changes, and only that ----------------------------------------------------------------------------


def test_a_no_op_candidate_changes_nothing_and_the_baseline_reproduces_the_log(sessions):
    rep = run(sessions, side("candidate", copy.deepcopy(RAW)))
    assert (rep.turns, rep.replayed, rep.changed) == (6, 6, 0)
    assert rep.not_reproduced == [] and rep.skipped == []
    assert all(c.changed == 0 and c.same == 6 for c in rep.by_kind.values())
    assert rep.model_calls["missing"] == 0 and rep.model_calls["estimated"] == 0 and rep.model_calls["live"] == 0
    assert rep.model_calls["logged"] == 7  # W1 of the five turns that perceive, the two card steps ("yes" is a route)
    assert rep.changes == []


def test_a_phi_row_changes_exactly_the_turns_it_governs(sessions):
    # greeting/hello with nothing known now asks who the user is: only s1's opening greeting reads that row
    # (every other greeting carries an email, which hits the email row)
    rules = with_row("greeting", "hello", [], then="clarify:identity")
    rep = run(sessions, side("candidate", rules))
    assert changed(rep) == {("s1", 0): ["phi", "clarify", "path"]}
    c = rep.changes[0]
    assert c.before["phi"][0]["then"] == "respond" and c.after["phi"][0]["then"] == "clarify:identity"
    assert c.after["clarify"]["question"] == PACK.texts.question("identity")
    index = next(i for i, r in enumerate(RAW["phi"]["rows"])
                 if (r["intent"], r["sub_intent"], r["requires_state"]) == ("greeting", "hello", []))
    assert any(f"phi.rows.{index} " in r and "then respond" in r and "then clarify:identity" in r for r in c.rules)
    assert rep.by_kind["phi"].changed == 1 and rep.by_kind["phi"].same == 5
    # s1's later turns read a different history (the reply changed): their W1 inputs changed, the logged
    # outputs were kept and counted, and no decision of theirs changed
    assert rep.model_calls["estimated"] >= 1


def test_an_eligibility_rule_of_psi_changes_only_the_turn_with_a_hard_conflict(sessions):
    rules = copy.deepcopy(RAW)
    rule = next(r for r in rules["psi"]["rules"] if r["id"] == "hard_may_apologise")
    rule.pop("allow")
    rule["forbid"] = ["apology"]
    rules["psi"]["version"] = "support-psi-candidate"
    rep = run(sessions, side("candidate", rules))
    assert changed(rep) == {("s2", 1): ["paragraphs"]}
    c = rep.changes[0]
    assert "apology" in c.before["paragraphs"]["plan"] and "apology" not in c.after["paragraphs"]["plan"]
    assert any("hard_may_apologise" in r for r in c.rules)


def test_a_guard_rule_that_blocks_a_request_is_counted_as_newly_refused(sessions):
    table = default_guardrail_config().model_dump(mode="json")
    table["version"] = "guardrails-candidate"
    table["injection"].append({"id": "inj.no_cancel", "kind": "injection", "pattern": r"\bcancel\b", "sure": True})
    rep = run(sessions, side("candidate", guard=table))
    got = changed(rep)
    assert {("s1", 2), ("s2", 1)} <= set(got)  # the two requests that say "cancel"
    assert all("guard" in got[k] and "path" in got[k] for k in (("s1", 2), ("s2", 1)))
    assert rep.newly_refused >= 2
    c = next(c for c in rep.changes if (c.session_id, c.turn) == ("s1", 2))
    assert "pre_guard" in c.newly_refused and any("+inj.no_cancel:block" in r for r in c.rules)
    # "yes" with no card shown is no confirmation of anything: that turn changed because an earlier one did
    follow = next(c for c in rep.changes if (c.session_id, c.turn) == ("s1", 3))
    assert any("turn 2 of the session changed" in r for r in follow.rules)
    assert set(got) <= {("s1", 2), ("s1", 3), ("s2", 1)}


class _NoCancelPack(type(PACK)):  # type: ignore[misc]
    """The support pack, a version whose cancel intent offers no card."""

    def cards_for(self, intent: str, sub_intent: str, facts: Any) -> list[Any]:
        return [c for c in super().cards_for(intent, sub_intent, facts) if c.id != "card.cancel_order"]


def test_another_pack_version_changes_the_offer_of_the_turns_that_offered_its_card(sessions):
    register("support-nocancel", _NoCancelPack)
    try:
        pack = load_domain("support-nocancel")
        cand = side("candidate", pack=pack, facets=["pack support → support-nocancel"])
        rep = run(sessions, cand)
    finally:
        unregister("support-nocancel")
    got = changed(rep)
    assert {("s1", 2), ("s2", 1)} <= set(got) and all("offer" in got[k] for k in (("s1", 2), ("s2", 1)))
    c = next(c for c in rep.changes if (c.session_id, c.turn) == ("s1", 2))
    assert c.before["offer"][0]["cards"] == ["card.cancel_order"] and c.after["offer"][0]["cards"] == []
    assert c.before["card"]["shown"]["card_id"] == "card.cancel_order" and c.after["card"]["shown"] is None
    assert "pack support → support-nocancel" in c.rules
    assert not {k for k in got if k[1] < 2 and k[0] == "s1"}  # nothing before the card turn


def test_a_model_swap_reruns_the_role_live_and_reports_the_decisions_it_changes(sessions):
    # the candidate orchestrator perceives every request as a question for a person
    live = ScriptModels(["human</INTENT><SUB_INTENT>agent</SUB_INTENT><NARRATION>One moment.</NARRATION>"])
    rep = run(sessions, side("candidate", live=live, live_roles=("orchestrator",)))
    assert rep.model_calls["live"] >= 5 and rep.model_calls["logged"] == 0
    assert rep.by_kind["intent"].changed >= 1 and rep.changed >= 1
    assert all(any("re-run live (orchestrator)" in r for r in c.rules) for c in rep.changes if c.model_calls["live"])


# -- what a report may show, and the gate ---------------------------------------------------------------------


def test_reports_carry_placeholders_never_the_typed_email(sessions):
    rules = with_row("greeting", "hello", ["email"], then="clarify:identity")
    rep = run(sessions, side("candidate", rules))
    assert {("s1", 1), ("s2", 0)} <= set(changed(rep))
    text = json.dumps(rep.model_dump(mode="json"))
    assert "alex.rivera@example.com" not in text and "[EMAIL_1]" in text


def test_a_session_logged_without_its_model_calls_is_skipped_with_the_reason(sessions):
    bare = sessions[0].model_copy(deep=True)
    for t in bare.turns:
        t.events = [e for e in t.events if e["kind"] != "model.call"]
    assert "before model calls were recorded" in (replayable(bare) or "")
    rep = run([bare, sessions[1]], side("candidate"))
    assert [s["session_id"] for s in rep.skipped] == ["s1"] and rep.replayed == 2 and rep.turns == 6


def test_gates_parse_and_trip_on_their_bounds():
    gates = parse_gates("card, escalation>2,gate>5%,any")
    assert [(g.kind, g.count, g.percent) for g in gates] == [("card", 0, None), ("escalation", 2, None),
                                                            ("gate", 0, 5.0), ("any", 0, None)]
    rep = WhatIfReport(replayed=40, changed=3)
    rep.by_kind["escalation"].changed = 3
    rep.by_kind["gate"].changed = 2  # 5 % of 40 is 2: not more than it
    assert tripped(rep, gates) == ["escalation: 3 turn(s) changed, more than 2", "any: 3 turn(s) changed, more than 0"]
    rep.by_kind["gate"].changed = 3
    assert "gate: 3 turn(s) changed, more than 5% of 40" in tripped(rep, gates)
    for bad in ("cards", "card>", "card>1.5", "card<2"):
        with pytest.raises(InvalidInput):
            parse_gates(bad)


def test_phi_row_names_the_row_a_lookup_hits():
    tables = load_bundle(PACK, RAW)
    rows = RAW["phi"]["rows"]
    first = next(i for i, r in enumerate(rows) if (r["intent"], r["sub_intent"]) == ("cancel", "order"))
    assert phi_row(tables.phi, "cancel", "order", ["user_id", "order_id", "query"]).startswith(f"phi.rows.{first} ")
    assert phi_row(tables.phi, "cancel", "order", ["user_id"]).startswith(f"phi.rows.{first + 1} ")
    assert phi_row(tables.phi, "human", "agent", ["user_id"]).startswith("no row of support-phi")


def test_rerun_changed_sends_exactly_the_changed_calls_to_the_live_client(sessions):
    rules = with_row("greeting", "hello", [], then="clarify:identity")
    kept = run(sessions, side("candidate", rules))
    live = ScriptModels(["greeting</INTENT><SUB_INTENT>hello</SUB_INTENT><NARRATION>Hi.</NARRATION>"])
    rerun = run(sessions, side("candidate", rules, live=live, rerun_changed=True))
    assert kept.model_calls["estimated"] > 0 and kept.estimated > 0
    assert rerun.model_calls["estimated"] == 0 and rerun.estimated == 0
    assert rerun.model_calls["live"] == len(live.calls) > 0
    # the calls the candidate left as they were still come from the log: s1's opening, all of s2
    assert rerun.model_calls["logged"] >= 4 and all(c.turn > 0 for c in rerun.changes if c.model_calls["live"])


# -- the playback's edges ------------------------------------------------------------------------------------


def test_a_read_the_log_never_saw_fails_as_a_tool_error_and_is_noted(sessions):
    # the verified cancellation now reads the user's record instead of the order: no turn logged that read
    rules = with_row("cancel", "order", ["user_id", "order_id"],
                     tools=[{"tool": "get_user_details", "args_from": {"user_id": "user_id"}}])
    rep = run(sessions, side("candidate", rules))
    c = next(c for c in rep.changes if (c.session_id, c.turn) == ("s1", 2))
    assert "phi" in c.kinds and any("no logged observation of get_user_details" in n for n in c.notes)


def test_the_session_play_finds_a_read_of_an_earlier_turn_but_a_write_only_in_its_own():
    from pipelines.core.whatif import SessionPlay

    read = {"kind": "tandem.tool", "tool": "get_order_details", "args": {"order_id": "#W1"}, "ok": True,
            "result": {"status": "pending"}, "confirmed": False}
    write = {**read, "tool": "cancel_pending_order", "confirmed": True}
    first = LoggedTurn(turn_id="a", index=0, text="x", events=[read, write])
    second = LoggedTurn(turn_id="b", index=1, text="y", events=[])
    play = SessionPlay(LoggedSession(session_id="s", turns=[first, second]))
    play.begin(second)
    assert play.take_tool("get_order_details", {"order_id": "#W1"}, confirmed=False) == (read, 0)
    assert play.take_tool("get_order_details", {"order_id": "#W2"}, confirmed=False) is None
    assert play.take_tool("cancel_pending_order", {"order_id": "#W1"}, confirmed=True) is None
    play.begin(first)
    assert play.take_tool("cancel_pending_order", {"order_id": "#W1"}, confirmed=True) == (write, 0)
    assert play.take_tool("cancel_pending_order", {"order_id": "#W1"}, confirmed=True) is None  # used once


def test_a_logged_model_failure_is_played_back_and_a_call_with_no_log_is_missing():
    from pipelines.core.modelrecord import call_key
    from pipelines.core.whatif import PlaybackModels, SessionPlay
    from pipelines.core.whatif.playback import playing
    from pipelines.errors import ModelUnavailable
    from pipelines.protocols import ChatMessage, ModelCall

    call = ModelCall(messages=[ChatMessage(role="user", content="hi")])
    failed = {"kind": "model.call", "role": "generator", "key": call_key("generator", call), "slot": "x",
              "text": "Half a sen", "picks": {}, "done": False, "error": "model_unavailable"}
    turn = LoggedTurn(turn_id="t", index=0, text="hi", events=[failed])

    async def go() -> list[str]:
        got: list[str] = []
        with playing(SessionPlay(LoggedSession(session_id="s", turns=[turn]))) as p:
            p.begin(turn)
            with pytest.raises(ModelUnavailable, match="logged generator failure"):
                async for d in PlaybackModels().stream("generator", call):
                    got.append(d)
            with pytest.raises(ModelUnavailable, match="no logged output"):
                async for _ in PlaybackModels().stream("generator", call):
                    pass
            assert [c["source"] for c in p.calls] == ["logged", "missing"]
        return got

    assert asyncio.run(go()) == ["Half a sen"]


def test_sessions_another_kind_ran_or_with_a_turn_not_logged_are_not_replayable(sessions):
    other = sessions[1].model_copy(deep=True)
    other.turns[0].events[0]["pipeline"] = "dr"
    assert "ran the 'dr' pipeline" in (replayable(other) or "")
    empty = sessions[1].model_copy(deep=True)
    empty.turns[1].events = []
    assert "has no logged events" in (replayable(empty) or "")
