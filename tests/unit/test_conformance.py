"""The conformance suite: the built-in packs pass it, and each check finds the defect it is for."""

from __future__ import annotations

import copy

import pytest

from pipelines import domains
from pipelines.domains.conformance import CHECKS, check_pack, run_checks
from pipelines.domains.testing import PackConformance
from tests.unit import toy_domain


class TestSupportConformance(PackConformance):
    pack_name = "support"


class TestCoachConformance(PackConformance):
    pack_name = "coach"


def test_a_pack_registered_in_process_is_loaded_and_checked() -> None:
    domains.register("toy", toy_domain.DomainPack)
    try:
        assert "toy" in domains.pack_names()
        assert all(r.ok for r in run_checks("toy")), [r for r in run_checks("toy") if not r.ok]
    finally:
        domains.unregister("toy")
    assert "toy" not in domains.pack_names()


def test_an_unknown_pack_names_the_installed_ones() -> None:
    with pytest.raises(domains.UnknownDomain, match="installed packs: .*coach.*support"):
        domains.load_domain("no-such-pack")


def _broken(**changes):
    pack = toy_domain.DomainPack()
    for attr, value in changes.items():
        setattr(pack, attr, value)
    return pack


def _problems(pack, check: str) -> list[str]:
    return CHECKS[check](pack)


def test_each_check_finds_its_defect() -> None:
    """One defect per check on the toy pack (the planted-mistake matrix on a scaffolded pack is
    tests/unit/test_conformance_mistakes.py); each problem names where it is fixed."""
    pack = toy_domain.DomainPack()
    assert all(r.ok for r in check_pack(pack)), [r for r in check_pack(pack) if not r.ok]

    no_method = _broken()
    no_method.w3_candidates = None  # type: ignore[assignment]
    assert _problems(no_method, "protocol") == [
        "DomainPack.w3_candidates (set on the instance): 'w3_candidates' must be a method"]

    assert _problems(_broken(labels={**pack.labels, "empty": ()}), "labels") == [
        "DomainPack.labels (set on the instance): intent 'empty' has no sub-intents"]
    assert _problems(_broken(branch_of_intent={"nope": "weather"}), "labels") == [
        "DomainPack.branch_of_intent (set on the instance): names unknown intent 'nope'"]

    card = pack.cards[0].model_copy(update={"tool": "no_such_tool"})
    found = _problems(_broken(cards=(card,)), "catalogue")
    assert "DomainPack.cards (set on the instance): card 'card.set_alert': tool 'no_such_tool' is not registered" \
        in found
    assert ("DomainPack.cards (set on the instance): write tool 'set_alert' has no card (a write reaches the user "
            "only through a card)") in found
    card = pack.cards[0].model_copy(update={"required_params": ("city", "when")})
    assert _problems(_broken(cards=(card,)), "catalogue") == [
        "DomainPack.cards (set on the instance): card 'card.set_alert': parameter 'when' is not an argument of "
        "'set_alert'"]

    ungrounded = _broken()
    ungrounded.arg_kinds = lambda tool: {}  # type: ignore[method-assign]
    assert _problems(ungrounded, "grounding")[:2] == [
        "DomainPack.arg_kinds (set on the instance): argument 'city' of tool 'get_forecast' has no grounding kind "
        "(add it to arg_kind_table)",
        "DomainPack.arg_kinds (set on the instance): argument 'city' of tool 'set_alert' has no grounding kind "
        "(add it to arg_kind_table)"]

    texts = pack.texts.model_copy(update={"handoff": " ", "clarify": {"city": "Which city?"},
                                          "templates": {**pack.texts.templates, "card:card.set_alert": "at {when}"}})
    assert _problems(_broken(texts=texts), "texts") == [
        "DomainPack.texts (set on the instance): texts.handoff is empty",
        "DomainPack.texts (set on the instance): texts.clarify has no 'details' question (asked when nothing more "
        "specific is missing)",
        "DomainPack.texts (set on the instance): template card:card.set_alert uses ['when'], which are not its "
        "parameters"]
    assert "no refusal text for reason 'too_cold' (declared in DomainPack.reasons (set on the instance))" in \
        _problems(_broken(reasons=("too_cold",)), "texts")[0]

    tables = copy.deepcopy(toy_domain.TABLES)
    tables["phi"]["rows"][0]["tools"][0]["tool"] = "no_such_tool"
    bad_tables = _broken()
    bad_tables.rule_tables = lambda: tables  # type: ignore[method-assign]
    assert "the packaged rule bundle is refused" in _problems(bad_tables, "tables")[0]

    unstorable = _broken()
    unstorable.observe = lambda tool, result, ok, facts: facts.state.update(when={1, 2})  # type: ignore[method-assign]
    assert "the session facts do not survive JSON" in _problems(unstorable, "session facts")[0]


def test_the_confirmed_writes_check_shows_the_core_refusing_a_write_that_ignores_confirmation(monkeypatch) -> None:
    import pipelines.core.runner as core_runner

    pack = toy_domain.DomainPack()
    [result] = [r for r in check_pack(pack) if r.name == "confirmed writes"]
    assert result.ok and result.problems == []
    assert result.shown.startswith("6 planted calls of each of 1 write tool(s) (set_alert) that ignore confirmation "
                                    "refused before the pack")
    # the check is not vacuous: with the core's gate taken out, the planted write runs and every path is reported
    monkeypatch.setattr(core_runner, "require_confirmed", lambda name, args, session: None)
    problems = CHECKS["confirmed writes"](pack)
    assert "write 'set_alert', unconfirmed: ran through the core's runner (not refused)" in problems
    assert "write 'set_alert', unconfirmed: reached the pack's write through the core's runner" in problems
    assert "write 'set_alert', no idempotency key: ran through the core's runner (not refused)" in problems
    [failed] = [r for r in check_pack(pack) if r.name == "confirmed writes"]
    assert not failed.ok and failed.shown == ""
