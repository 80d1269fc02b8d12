"""The rule bundle: strict loading with paths, and a holder that keeps the old tables on a bad reload."""

from __future__ import annotations

import copy

import pytest

from pipelines.domains.coach.labels import BRANCH_OF_INTENT, INTENT_LABELS
from pipelines.domains.coach.pack import coach_rule_tables_dict, coach_tables_holder
from pipelines.domains.coach.tools import TOOL_NAMES
from pipelines.errors import ConfigError
from pipelines.sgc.tables import RuleTablesHolder, load_rule_tables


@pytest.fixture
def data():
    return coach_rule_tables_dict()


def test_bundle_loads_and_reports_versions(data):
    tables = load_rule_tables(data, labels=INTENT_LABELS, tools=TOOL_NAMES)
    v = tables.versions()
    assert v["rules"] == data["version"] and v["phi"] == "coach-phi-4" and set(tables.w3) == {
        "recommend", "teaching", "knowledge_qa"}
    assert tables.phi_index[("recommend", "lineup_for_opponent")].tools[0].tool == "get_inventory"


def _break(data, how):
    bad = copy.deepcopy(data)
    how(bad)
    return bad


BREAKS = {
    "unknown field": (lambda d: d.update(extra=1), "rules.extra"),
    "missing psi": (lambda d: d.pop("psi"), "rules.psi"),
    "bad tier": (lambda d: d["tiers"]["tiers"].update(skill_locked="fatal"), "rules.tiers.tiers.skill_locked"),
    "bad leak p": (lambda d: d["w3"]["teaching"]["pool"][0].update(p=2), "rules.w3.teaching.pool.0.p"),
    "branch mismatch": (lambda d: d["w3"]["teaching"].update(branch="recommend"), "rules"),
    "unknown branch": (lambda d: d["w3"].update(chitchat={**d["w3"]["teaching"], "branch": "chitchat"}),
                       "rules.w3.chitchat.[key]"),
    "phi unknown tool": (lambda d: d["phi"]["rows"][4]["tools"].insert(0, {"tool": "nuke"}), "phi.rows.4.tools.0.tool"),
    "phi unknown intent": (lambda d: d["phi"]["rows"][0].update(intent="gossip"), "phi.rows.0.intent"),
    "psi unknown intent": (lambda d: d["psi"]["rules"][-1].update(intents=["gossip"]), "psi.rules.11.intents"),
    "psi bad kind": (lambda d: d["psi"]["rules"][0].update(allow=["boast"]), "rules.psi.rules.0.allow.0"),
    "not a mapping": (lambda d: d.update(phi=["rows"]), "rules.phi"),
}


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_malformed_bundle_is_refused_with_a_path(data, name):
    how, path = BREAKS[name]
    with pytest.raises(ConfigError) as info:
        load_rule_tables(_break(data, how), labels=INTENT_LABELS, tools=TOOL_NAMES,
                         branches=set(BRANCH_OF_INTENT.values()))
    assert info.value.details["path"] == path
    assert info.value.code == "config_error"
    if name == "branch mismatch":
        assert "w3.teaching holds the table of branch 'recommend'" in info.value.message


def test_holder_keeps_old_tables_on_bad_reload(data):
    holder = coach_tables_holder()
    old = holder.active
    bad = _break(data, lambda d: d["phi"]["rows"][0].update(intent="gossip"))
    bad["version"] = "coach-v2"
    out = holder.reload(bad)
    assert not out.applied and out.active_version == data["version"] and out.error_path == "phi.rows.0.intent"
    assert holder.active is old and holder.rejected == 1 and holder.last_error is not None
    with pytest.raises(ConfigError):
        holder.reload(bad, strict=True)
    assert holder.active is old


def test_holder_applies_good_reload(data):
    holder = RuleTablesHolder(data, labels=INTENT_LABELS, tools=TOOL_NAMES)
    new = copy.deepcopy(data)
    new["version"] = "coach-v2"
    new["w3"]["teaching"]["pool"][0]["p"] = 0.1
    out = holder.reload(new)
    assert out.applied and holder.version == "coach-v2"
    assert holder.active.w3["teaching"].pool[0].p == 0.1 and holder.last_error is None


def test_holder_refuses_bad_initial_tables(data):
    with pytest.raises(ConfigError):
        RuleTablesHolder({"version": "x"}, labels=INTENT_LABELS, tools=TOOL_NAMES)
