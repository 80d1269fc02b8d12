"""The support pack's evaluation hooks (pipelines/domains/support/evaluation.py) and the harness's use of them."""

from __future__ import annotations

from pipelines.core.evaluation import PackEvaluation, evaluation_of
from pipelines.domains import load_domain
from pipelines.domains.support.evaluation import FLOWS, SupportEvaluation, flow_suite
from serve.eval.evaluate import initial_status, intent_matches


def test_the_support_kit_is_the_packs_and_plays_whole_tasks():
    kit = evaluation_of(load_domain("support"))
    assert isinstance(kit, SupportEvaluation) and kit.plays_tasks is True
    assert list(kit.suites()) == ["flows"]
    cases = kit.suites()["flows"](None)
    assert [c.case_id for c in cases] == [name for name, _ in FLOWS] and sum(len(c.turns) for c in cases) == 7
    assert cases == flow_suite()


def test_a_records_status_is_read_through_the_lookup():
    kit = SupportEvaluation()
    seen = []

    def lookup(kind, key):
        seen.append((kind, key))
        return {"status": "pending"} if key == "#W1" else None

    assert kit.entity_status(lookup, "#W1") == "pending" and kit.entity_status(lookup, "#W9") is None
    assert seen == [("order", "#W1"), ("order", "#W9")]
    assert initial_status("support", 7, "#W1000002") == "delivered"  # the seeded fixture world
    assert initial_status("support", 7, "#W0") is None


def test_intent_labels_and_their_tools():
    kit = SupportEvaluation()
    assert kit.intent_label([{"name": "find_user_id_by_email"}, {"name": "cancel_pending_order"}]) == "cancel"
    assert kit.intent_label([{"name": "get_order_details"}]) == "status only"
    assert kit.label_tools("modify address") == {"modify_pending_order_address", "modify_user_address"}
    assert kit.label_tools("nothing") == set()
    pack = load_domain("support")
    assert intent_matches(pack, "cancel", "cancel", "order", kit) is True
    assert intent_matches(pack, "status only", "cancel", None, kit) is False
    assert intent_matches(pack, None, "cancel") is None


def test_a_pack_without_a_hook_gets_the_empty_default():
    from pipelines.domain import PackBase

    class Bare(PackBase):  # PackBase's default evaluation hook: none of its own
        pass

    kit = evaluation_of(Bare())
    assert type(kit) is PackEvaluation and kit.suites() == {} and kit.plays_tasks is False
    assert kit.scripted_user({}, {}, {}, 3) is None and kit.load_sessions(0, 1, 1) == []
    assert kit.entity_status(lambda k, key: {"status": "x"}, "a") is None
