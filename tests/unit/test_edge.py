"""serve.edge: one status table for HTTP and gRPC, derived from the error classes."""

from __future__ import annotations

import json
import logging

import grpc
import pytest

from pipelines import errors as E
from pipelines.errors import TandemError, all_error_classes
from serve.edge import INTERNAL_MESSAGE, ApiKeys, error_body, grpc_code_for, http_error


def _body(resp) -> dict:
    return json.loads(resp.body)


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_http_error_maps_every_class(cls: type[TandemError]) -> None:
    resp = http_error(cls("something specific", details={"k": "v"}))
    assert resp.status_code == cls.http_status
    assert _body(resp) == {"error": {"code": cls.code, "message": "something specific", "details": {"k": "v"}}}
    if cls.http_status in (429, 503):
        assert resp.headers["retry-after"] == "1"
    else:
        assert "retry-after" not in resp.headers


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_grpc_code_for_maps_every_class(cls: type[TandemError]) -> None:
    code = grpc_code_for(cls("x"))
    assert isinstance(code, grpc.StatusCode)
    assert code is getattr(grpc.StatusCode, cls.grpc_status)


@pytest.mark.parametrize("exc", [RuntimeError("db password=hunter2"), KeyError("secret"), ValueError("/etc/x")])
def test_foreign_exception_is_500_internal_without_its_message(exc: Exception) -> None:
    resp = http_error(exc)
    assert resp.status_code == 500
    body = _body(resp)
    assert body == {"error": {"code": "internal", "message": INTERNAL_MESSAGE}}
    assert str(exc) not in resp.body.decode()
    assert grpc_code_for(exc) is grpc.StatusCode.INTERNAL


def test_details_left_out_when_empty() -> None:
    assert error_body("c", "m") == {"error": {"code": "c", "message": "m"}}
    assert "details" not in _body(http_error(E.NotFound("gone")))["error"]


def test_5xx_logged_at_error_4xx_at_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tandem.edge")
    http_error(E.NotFound("gone"), where="w4")
    http_error(E.ModelUnavailable("down"), where="w5")
    http_error(RuntimeError("boom"), where="w6")
    levels = {r.getMessage().split(":")[0]: r.levelno for r in caplog.records}
    assert levels == {"w4": logging.WARNING, "w5": logging.ERROR, "w6": logging.ERROR}
    # Only a foreign error asks for its traceback in the log (and it never reaches the client).
    assert [bool(r.exc_info) for r in caplog.records] == [False, False, True]


def test_api_keys_disabled_lets_everything_through() -> None:
    ApiKeys(False).check(None)
    ApiKeys(False, ["k"]).check("Bearer wrong")


def test_api_keys_checks_bearer_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TANDEM_TEST_KEYS", " k2 , ,k3")
    keys = ApiKeys(True, ["k1", ""], keys_env="TANDEM_TEST_KEYS")
    for good in ("Bearer k1", "bearer k2", "Bearer  k3 "):
        keys.check(good)
    for bad in (None, "", "k1", "Basic k1", "Bearer", "Bearer k4", "Bearer "):
        with pytest.raises(E.Unauthenticated):
            keys.check(bad)


def test_api_keys_enabled_without_keys_refuses_all(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tandem.edge")
    keys = ApiKeys(True, [])
    assert any("no API key" in r.getMessage() for r in caplog.records)
    with pytest.raises(E.Unauthenticated):
        keys.check("Bearer anything")
