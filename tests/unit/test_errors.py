"""pipelines.errors: the tree, the status table on the classes, and their invariants."""

from __future__ import annotations

import grpc
import pytest

from pipelines import errors as E
from pipelines.errors import TandemError, all_error_classes

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
    E.UpstreamError: TandemError,
    E.ModelUnavailable: E.UpstreamError,
    E.ModelTimeout: E.UpstreamError,
    E.InvalidModelOutput: E.UpstreamError,
    E.Overloaded: TandemError,
    E.RateLimited: E.Overloaded,
    E.SessionBusy: TandemError,
    E.StoreUnavailable: TandemError,
    E.ConfigError: TandemError,
}

# The table drawn in the module docstring: class -> (http, grpc).
EXPECTED_STATUS = {
    E.InvalidInput: (400, "INVALID_ARGUMENT"),
    E.ValidationFailed: (422, "INVALID_ARGUMENT"),
    E.PayloadTooLarge: (413, "INVALID_ARGUMENT"),
    E.InvalidSessionId: (400, "INVALID_ARGUMENT"),
    E.Unauthenticated: (401, "UNAUTHENTICATED"),
    E.NotFound: (404, "NOT_FOUND"),
    E.PolicyBlocked: (403, "PERMISSION_DENIED"),
    E.ToolError: (500, "INTERNAL"),
    E.ToolTimeout: (504, "DEADLINE_EXCEEDED"),
    E.IneligibleAction: (409, "FAILED_PRECONDITION"),
    E.UpstreamError: (502, "UNAVAILABLE"),
    E.ModelUnavailable: (503, "UNAVAILABLE"),
    E.ModelTimeout: (504, "DEADLINE_EXCEEDED"),
    E.InvalidModelOutput: (502, "INTERNAL"),
    E.Overloaded: (503, "UNAVAILABLE"),
    E.RateLimited: (429, "RESOURCE_EXHAUSTED"),
    E.SessionBusy: (409, "ABORTED"),
    E.StoreUnavailable: (503, "UNAVAILABLE"),
}


def test_tree_shape() -> None:
    for cls, parent in EXPECTED_PARENT.items():
        assert cls.__bases__ == (parent,), cls.__name__
    assert TandemError.__bases__ == (Exception,)


def test_all_error_classes_is_the_whole_tree_base_first() -> None:
    classes = all_error_classes()
    assert classes[0] is TandemError
    assert set(classes) == {TandemError, *EXPECTED_PARENT}
    assert len(classes) == len(set(classes))


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


@pytest.mark.parametrize("cls", list(EXPECTED_STATUS), ids=lambda c: c.__name__)
def test_status_table_matches_the_docstring(cls: type[TandemError]) -> None:
    assert (cls.http_status, cls.grpc_status) == EXPECTED_STATUS[cls]


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


def test_raised_errors_are_caught_by_their_family() -> None:
    with pytest.raises(E.UpstreamError):
        raise E.ModelTimeout("late")
    with pytest.raises(E.InvalidInput):
        raise E.ValidationFailed("bad")
    with pytest.raises(E.ToolError):
        raise E.IneligibleAction("no")
    # Overloaded is back-pressure, not an upstream failure.
    assert not issubclass(E.Overloaded, E.UpstreamError)
