"""Fixed values for the W1 grammars (the text of each rule written out for a one-label fixture: opened
or not, narration required or not) and their label errors, and for the rule-table loader's refusals and
the holder's reload bookkeeping. Expected values are written from the rules, not produced by the code."""

from __future__ import annotations

import copy

import pytest

from pipelines.domains.coach.labels import BRANCH_OF_INTENT, INTENT_LABELS
from pipelines.domains.coach.pack import coach_rule_tables_dict
from pipelines.domains.coach.tools import TOOL_NAMES
from pipelines.errors import ConfigError
from pipelines.sgc.tables import RuleTablesHolder, load_rule_tables
from pipelines.sgc.w1_grammar import (
    _JSON_RULES,
    grammar,
    label_grammar,
    sentence_grammar,
    tail_grammar,
)

PLAN = ['plan: "<PLAN>" ws "[" ws calls? ws "]" ws "</PLAN>"',
        'calls: call | call ws "," ws call | call ws "," ws call ws "," ws call',
        'call: "{" ws "\\"tool\\"" ws ":" ws tool_name ws "," ws "\\"args\\"" ws ":" ws args ws "}"',
        'tool_name: "\\"t\\""']
JSON = _JSON_RULES.lstrip("\n")


def test_the_stream_grammar_closed_and_opened() -> None:
    g = grammar(["a"], {"a": ["x"]}, ["t"], narration_max_chars=50)
    assert g == "\n".join([
        "start: ws head ws narration ws plan ws",
        'head_0: "<INTENT>" "a" "</INTENT>" ws "<SUB_INTENT>" sub_0 "</SUB_INTENT>"',
        'sub_0: "x"',
        "head: head_0",
        'narration: "<NARRATION>" NARRATION_TEXT? "</NARRATION>"',
        "NARRATION_TEXT: /[^<]{1,50}/",
        *PLAN]) + "\n" + JSON
    g = grammar(["a"], {"a": ["x"]}, ["t"], narration_max_chars=50, narration_required=True, opened=True)
    assert g.split("\n")[:5] == [
        "start: head narration ws plan ws",
        'head_0: "a" "</INTENT>" "<SUB_INTENT>" sub_0 "</SUB_INTENT>"',
        'sub_0: "x"',
        "head: head_0",
        'narration: "<NARRATION>" NARRATION_TEXT "</NARRATION>"']
    assert "\n\n" not in g and g.endswith(JSON)


def test_the_stream_grammar_with_flat_sub_intents() -> None:
    g = grammar(["b", "a"], ["y", "x"], ["t"], narration_max_chars=50)
    assert g.split("\n")[:4] == [
        "start: ws head ws narration ws plan ws",
        'head: "<INTENT>" intent "</INTENT>" ws "<SUB_INTENT>" sub_intent "</SUB_INTENT>"',
        'intent: "a" | "b"',
        'sub_intent: "x" | "y"']


def test_the_tail_and_label_grammars() -> None:
    assert tail_grammar(["t"], narration_max_chars=50) == "\n".join([
        "start: narration_body ws plan ws",
        'narration_body: NARRATION_TEXT "</NARRATION>"',
        "NARRATION_TEXT: /[^<]{1,50}/",
        *PLAN]) + "\n" + JSON
    assert tail_grammar(["t"], narration_max_chars=50, narration_required=False).split("\n")[1] == \
        'narration_body: NARRATION_TEXT? "</NARRATION>"'
    assert label_grammar("intent", ["b", "a", "a"]) == 'start: "a" | "b"\n'
    assert label_grammar("intent", ["Xray"]) == 'start: "Xray"\n'  # only "<", ">" and whitespace are refused
    assert sentence_grammar(120) == "start: SENTENCE\nSENTENCE: /[^\\s<][^<\\n.!?]{0,118}[.!?]/\n"


@pytest.mark.parametrize(("call", "message"), [
    (lambda: grammar([], {}, ["t"]), "grammar needs at least one intent"),
    (lambda: grammar(["a"], {"a": ["x"]}, []), "grammar needs at least one tool"),
    (lambda: grammar(["a"], {"b": ["x"]}, ["t"]), "grammar needs at least one sub-intent of 'a'"),
    (lambda: grammar(["a"], [], ["t"]), "grammar needs at least one sub-intent"),
    (lambda: grammar(["a b"], ["x"], ["t"]), "intent label 'a b' cannot appear in the perception grammar"),
    (lambda: grammar(["a"], ["x>"], ["t"]), "sub-intent label 'x>' cannot appear in the perception grammar"),
    (lambda: grammar(["a"], {"a": ["x\ty"]}, ["t"]),
     "sub-intent of 'a' label 'x\\ty' cannot appear in the perception grammar"),
    (lambda: tail_grammar(["bad tool"]), "tool label 'bad tool' cannot appear in the perception grammar"),
    (lambda: label_grammar("sub-intent", [""]), "sub-intent label '' cannot appear in the perception grammar"),
    (lambda: label_grammar("intent", []), "grammar needs at least one intent"),
])
def test_label_errors(call, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        call()
    assert info.value.message == message


@pytest.fixture
def data():
    return coach_rule_tables_dict()


def test_loader_refusals_name_the_field(data) -> None:
    with pytest.raises(ConfigError) as info:
        load_rule_tables(data, conflict_kinds=("skill_locked", "brand_new_kind"))
    assert (info.value.message, info.value.details) == (
        "tiers: tiers missing for conflict kinds ['brand_new_kind']", {"path": "tiers.tiers"})
    with pytest.raises(ConfigError) as info:
        load_rule_tables(data, branches=["recommend"])
    assert info.value.message == "rules.w3: unknown branches ['knowledge_qa', 'teaching']; known: ['recommend']"
    assert info.value.details == {"path": "rules.w3.knowledge_qa.[key]"}
    bad = copy.deepcopy(data)
    bad["psi"]["rules"][-1]["intents"] = ["gossip"]
    rule_id = bad["psi"]["rules"][-1]["id"]
    n = len(bad["psi"]["rules"]) - 1
    with pytest.raises(ConfigError) as info:
        load_rule_tables(bad, labels=INTENT_LABELS)
    assert info.value.message == f"psi.rules.{n} ({rule_id}): unknown intents ['gossip']"


def test_phi_is_checked_only_with_both_labels_and_tools(data) -> None:
    bad = copy.deepcopy(data)
    bad["phi"]["rows"][0]["intent"] = "gossip"
    load_rule_tables(bad, labels=INTENT_LABELS)  # tools unknown: Φ's rows are not checked
    load_rule_tables(bad, tools=TOOL_NAMES)
    with pytest.raises(ConfigError):
        load_rule_tables(bad, labels=INTENT_LABELS, tools=TOOL_NAMES)


def test_the_holder_keeps_its_branches_and_counts_rejections(data) -> None:
    branches = set(BRANCH_OF_INTENT.values())
    holder = RuleTablesHolder(data, labels=INTENT_LABELS, tools=TOOL_NAMES, branches=branches)
    assert holder.last_error is None and holder.rejected == 0
    extra = copy.deepcopy(data)
    extra["w3"]["chitchat"] = {**extra["w3"]["teaching"], "branch": "chitchat"}
    first = holder.reload(extra)
    assert (first.applied, first.error_path) == (False, "rules.w3.chitchat.[key]")
    assert first.error is not None and first.error.startswith("rules.w3: unknown branches ['chitchat']")
    holder.reload(extra)
    assert holder.rejected == 2
    loaded = holder.active
    assert RuleTablesHolder(loaded).active is loaded  # tables are taken as they are
