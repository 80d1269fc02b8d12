"""pipelines.errors: the tree, the status table on the classes, and their invariants."""

from __future__ import annotations

import grpc
import pytest

from pipelines import errors as E
from pipelines.errors import TandemError, all_error_classes, error_class_for_code, retry_after_of

EXPECTED_PARENT = {
    E.InvalidInput: TandemError,
    E.ValidationFailed: E.InvalidInput,
    E.PayloadTooLarge: E.InvalidInput,
    E.InvalidSessionId: E.InvalidInput,
    E.Unauthenticated: TandemError,
    E.NotFound: TandemError,
    E.PolicyBlocked: TandemError,
    E.ToolError: TandemError,
    E.ToolTimeout: E.ToolError,
    E.IneligibleAction: E.ToolError,
    E.UnconfirmedWrite: E.IneligibleAction,
    E.UpstreamError: TandemError,
    E.ModelUnavailable: E.UpstreamError,
    E.ModelTimeout: E.UpstreamError,
    E.InvalidModelOutput: E.UpstreamError,
    E.Overloaded: TandemError,
    E.ConfigError: TandemError,
    E.RateLimited: E.Overloaded,
    E.SessionBusy: TandemError,
    E.LeaseLost: E.SessionBusy,
    E.StoreUnavailable: TandemError,
}

# The whole table, written by hand: the statuses from the tree drawn in the module docstring;
# the root and ConfigError, which the drawing leaves without statuses, pinned as decided (an
# unclassified error is 500 / INTERNAL; a bad config is a server fault that no retry fixes,
# 500 / FAILED_PRECONDITION). class -> (code, http, grpc).
EXPECTED_TABLE = {
    TandemError: ("internal", 500, "INTERNAL"),
    E.InvalidInput: ("invalid_input", 400, "INVALID_ARGUMENT"),
    E.ValidationFailed: ("validation_error", 422, "INVALID_ARGUMENT"),
    E.PayloadTooLarge: ("payload_too_large", 413, "INVALID_ARGUMENT"),
    E.InvalidSessionId: ("invalid_session_id", 400, "INVALID_ARGUMENT"),
    E.Unauthenticated: ("unauthenticated", 401, "UNAUTHENTICATED"),
    E.NotFound: ("not_found", 404, "NOT_FOUND"),
    E.PolicyBlocked: ("policy_blocked", 403, "PERMISSION_DENIED"),
    E.ToolError: ("tool_error", 500, "INTERNAL"),
    E.ToolTimeout: ("tool_timeout", 504, "DEADLINE_EXCEEDED"),
    E.IneligibleAction: ("ineligible_action", 409, "FAILED_PRECONDITION"),
    E.UnconfirmedWrite: ("unconfirmed_write", 409, "FAILED_PRECONDITION"),
    E.UpstreamError: ("upstream_error", 502, "UNAVAILABLE"),
    E.ModelUnavailable: ("model_unavailable", 503, "UNAVAILABLE"),
    E.ModelTimeout: ("model_timeout", 504, "DEADLINE_EXCEEDED"),
    E.InvalidModelOutput: ("invalid_model_output", 502, "INTERNAL"),
    E.Overloaded: ("overloaded", 503, "UNAVAILABLE"),
    E.RateLimited: ("rate_limited", 429, "RESOURCE_EXHAUSTED"),
    E.SessionBusy: ("session_busy", 409, "ABORTED"),
    E.LeaseLost: ("lease_lost", 409, "ABORTED"),
    E.StoreUnavailable: ("store_unavailable", 503, "UNAVAILABLE"),
    E.ConfigError: ("config_error", 500, "FAILED_PRECONDITION"),
}

# The statuses each class declares itself (the rest it inherits on purpose): a class that
# stops declaring one of these silently takes its parent's value.
DECLARED = {
    TandemError: {"code", "http_status", "grpc_status"},
    E.InvalidInput: {"code", "http_status", "grpc_status"},
    E.ValidationFailed: {"code", "http_status"},
    E.PayloadTooLarge: {"code", "http_status"},
    E.InvalidSessionId: {"code"},
    E.Unauthenticated: {"code", "http_status", "grpc_status"},
    E.NotFound: {"code", "http_status", "grpc_status"},
    E.PolicyBlocked: {"code", "http_status", "grpc_status"},
    E.ToolError: {"code", "http_status", "grpc_status"},
    E.ToolTimeout: {"code", "http_status", "grpc_status"},
    E.IneligibleAction: {"code", "http_status", "grpc_status"},
    E.UnconfirmedWrite: {"code"},
    E.UpstreamError: {"code", "http_status", "grpc_status"},
    E.ModelUnavailable: {"code", "http_status"},
    E.ModelTimeout: {"code", "http_status", "grpc_status"},
    E.InvalidModelOutput: {"code", "http_status", "grpc_status"},
    E.Overloaded: {"code", "http_status", "grpc_status"},
    E.RateLimited: {"code", "http_status", "grpc_status"},
    E.SessionBusy: {"code", "http_status", "grpc_status"},
    E.LeaseLost: {"code"},
    E.StoreUnavailable: {"code", "http_status", "grpc_status"},
    E.ConfigError: {"code", "http_status", "grpc_status"},
}


def test_tree_shape() -> None:
    for cls, parent in EXPECTED_PARENT.items():
        assert cls.__bases__ == (parent,), cls.__name__
    assert TandemError.__bases__ == (Exception,)


def test_all_error_classes_is_the_whole_tree_base_first() -> None:
    classes = all_error_classes()
    assert classes[0] is TandemError
    assert set(classes) == {TandemError, *EXPECTED_PARENT}
    assert len(classes) == len(set(classes)) == 22
    # base first, then breadth-first: every class comes after its parent
    for cls in classes[1:]:
        assert classes.index(cls.__bases__[0]) < classes.index(cls), cls.__name__


def test_all_exported() -> None:
    exported = {getattr(E, n) for n in E.__all__ if isinstance(getattr(E, n), type)}
    assert exported == set(all_error_classes())


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_every_class_has_code_and_statuses(cls: type[TandemError]) -> None:
    assert isinstance(cls.code, str) and cls.code
    assert cls.code == cls.code.lower() and " " not in cls.code
    assert isinstance(cls.http_status, int) and 400 <= cls.http_status <= 599
    assert isinstance(cls.grpc_status, str)
    assert isinstance(getattr(grpc.StatusCode, cls.grpc_status, None), grpc.StatusCode), cls.grpc_status
    assert cls.grpc_status != "OK"


def test_the_table_covers_every_class() -> None:
    assert set(EXPECTED_TABLE) == set(all_error_classes()) == set(DECLARED)


@pytest.mark.parametrize("cls", list(EXPECTED_TABLE), ids=lambda c: c.__name__)
def test_status_table_pinned_by_hand(cls: type[TandemError]) -> None:
    assert (cls.code, cls.http_status, cls.grpc_status) == EXPECTED_TABLE[cls]
    err = cls("m")
    assert (err.code, err.http_status, err.grpc_status) == EXPECTED_TABLE[cls]
    assert err.to_dict() == {"code": EXPECTED_TABLE[cls][0], "message": "m"}


@pytest.mark.parametrize("cls", list(DECLARED), ids=lambda c: c.__name__)
def test_declared_statuses(cls: type[TandemError]) -> None:
    assert {a for a in ("code", "http_status", "grpc_status") if a in vars(cls)} == DECLARED[cls]


def test_docstring_tree_states_the_same_statuses() -> None:
    # every class drawn with "(http / grpc)" in the module docstring agrees with the table
    drawn = {}
    for line in (E.__doc__ or "").splitlines():
        parts = line.replace("│", " ").replace("├──", " ").replace("└──", " ").split()
        if parts and parts[0] in vars(E) and line.rstrip().endswith(")") and "/" in line:
            http, grpc_code = line.rsplit("(", 1)[1].rstrip(")").split("/")
            drawn[getattr(E, parts[0])] = (int(http.strip()), grpc_code.strip())
    assert len(drawn) == 20  # all but the root and ConfigError carry statuses in the drawing
    for cls, statuses in drawn.items():
        assert statuses == EXPECTED_TABLE[cls][1:], cls.__name__


def test_codes_unique() -> None:
    codes = [c.code for c in all_error_classes()]
    assert len(codes) == len(set(codes)), codes


def test_status_overrides_are_declared_not_inherited_by_accident() -> None:
    # Every class below the root declares its own code (no class silently reuses a parent's).
    for cls in all_error_classes()[1:]:
        assert "code" in vars(cls), cls.__name__


def test_message_details_and_to_dict() -> None:
    err = E.PayloadTooLarge("too long", details={"limit": 3})
    assert str(err) == "too long"
    assert err.message == "too long"
    assert err.to_dict() == {"code": "payload_too_large", "message": "too long", "details": {"limit": 3}}
    plain = E.NotFound("nope")
    assert plain.details == {}
    assert plain.to_dict() == {"code": "not_found", "message": "nope"}
    assert plain.args == ("nope",)
    empty = E.NotFound("x", details={})
    assert empty.to_dict() == {"code": "not_found", "message": "x"}


def test_raised_errors_are_caught_by_their_family() -> None:
    with pytest.raises(E.UpstreamError):
        raise E.ModelTimeout("late")
    with pytest.raises(E.InvalidInput):
        raise E.ValidationFailed("bad")
    with pytest.raises(E.ToolError):
        raise E.IneligibleAction("no")
    # Overloaded is back-pressure, not an upstream failure.
    assert not issubclass(E.Overloaded, E.UpstreamError)


# Retry hints and whole-turn refusals, written by hand from the classes' docstrings:
# busy sessions (a lost lease is one), overload and store/model outages say "retry in 1 s"; input, auth,
# tenancy, busy sessions and overload refuse the turn as a whole (nothing stored).
EXPECTED_RETRY = {E.SessionBusy: 1.0, E.LeaseLost: 1.0, E.Overloaded: 1.0, E.RateLimited: 1.0, E.StoreUnavailable: 1.0,
                  E.ModelUnavailable: 1.0}
EXPECTED_REJECTS = {E.InvalidInput, E.ValidationFailed, E.PayloadTooLarge, E.InvalidSessionId,
                    E.Unauthenticated, E.NotFound, E.SessionBusy, E.LeaseLost, E.Overloaded, E.RateLimited}


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_retry_hint_and_rejection_per_class(cls: type[TandemError]) -> None:
    err = cls("m")
    assert err.retry_after_s == EXPECTED_RETRY.get(cls) and retry_after_of(err) == EXPECTED_RETRY.get(cls)
    assert cls.rejects_turn is (cls in EXPECTED_REJECTS)


def test_an_instance_may_carry_its_own_retry_hint() -> None:
    assert E.RateLimited("slow down", retry_after_s=7.5).retry_after_s == 7.5
    assert retry_after_of(E.RateLimited("slow down", retry_after_s=7.5)) == 7.5
    assert E.ToolError("t", retry_after_s=2.0).retry_after_s == 2.0  # a class without a hint, given one
    assert E.Overloaded("o").retry_after_s == 1.0  # not given: the class's own
    assert retry_after_of(ValueError("foreign")) is None


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_every_code_maps_back_to_its_class(cls: type[TandemError]) -> None:
    assert error_class_for_code(cls.code) is cls


def test_an_unknown_code_is_the_root() -> None:
    assert error_class_for_code("no_such_code") is TandemError
