"""The mid-guard checks used inside the orchestration loop."""

from __future__ import annotations

from pipelines.domains.support import build_support_domain
from pipelines.guardrails.mid import (
    check_args,
    check_consistency,
    check_placeholders,
    check_tool_choice,
)
from pipelines.guardrails.pii import Vault

D = build_support_domain()


def test_tool_choice() -> None:
    assert check_tool_choice("get_order_details", {"get_order_details"}, D.write_tools) is None
    assert check_tool_choice("get_user_details", {"get_order_details"}, D.write_tools).kind == "tool_not_eligible"
    v = check_tool_choice("cancel_pending_order", {"cancel_pending_order"}, D.write_tools)
    assert v.kind == "write_outside_action_path"


def test_args_validate_against_the_tool_model() -> None:
    model, v = check_args(D.registry, "get_order_details", {"order_id": "#W1"})
    assert v is None and model is not None
    assert check_args(D.registry, "get_order_details", {"order": "#W1"})[1].kind == "invalid_args"
    assert check_args(D.registry, "nope", {})[1].kind == "invalid_args"


def test_placeholders_must_resolve() -> None:
    v = Vault()
    v.redact("a@x.com")
    assert check_placeholders({"email": "[EMAIL_1]"}, v) is None
    assert check_placeholders({"email": "[EMAIL_3]"}, v).kind == "unresolved_placeholder"


def test_consistency_with_observations_and_the_users_words() -> None:
    args = {"order_id": "#W1000001"}
    assert check_consistency(args, observed_ids=["#W1000001"]) is None
    assert check_consistency(args, observed_ids=[], mentioned_ids=["#W1000001"]) is None
    assert check_consistency(args, observed_ids=["#W1000002"]).kind == "unobserved_entity"
    assert check_consistency({"user_id": "bob_x_1234"}, observed_ids=[], authenticated_user_id="alex_rivera_1001").kind == "other_user"
    assert check_consistency({"user_id": "alex_rivera_1001"}, observed_ids=[], authenticated_user_id="alex_rivera_1001") is None
