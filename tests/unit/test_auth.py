"""serve.auth: API keys held as hashes with ids (static, env, file, live), and per-key rate limits."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from pipelines import errors as E
from serve.auth import ApiKeys, RateLimiter, hash_key, parse_key_entries
from serve.config import AuthConfig, LimitsConfig, ServeFile

H1 = hashlib.sha256(b"key-one").hexdigest()
H2 = hashlib.sha256(b"key-two").hexdigest()


def _keys(**kw) -> ApiKeys:
    return ApiKeys(AuthConfig(enabled=True, **kw))


def test_hash_key_is_sha256_hex() -> None:
    assert hash_key("key-one") == H1 and len(H1) == 64


def test_auth_off_is_the_single_local_principal() -> None:
    keys = ApiKeys(AuthConfig(enabled=False, keys=[{"id": "a", "sha256": H1}]))
    assert keys.principal(None) == "local"
    assert keys.principal("Bearer wrong") == "local"


def test_a_key_resolves_to_its_id_never_to_the_key() -> None:
    keys = _keys(keys=[{"id": "alice", "sha256": H1}, {"id": "bob", "sha256": H2}])
    assert keys.principal("Bearer key-one") == "alice"
    assert keys.principal("bearer key-two") == "bob"
    assert keys.principal("Bearer  key-two ") == "bob"


@pytest.mark.parametrize("header", [None, "", "key-one", "Basic key-one", "Bearer", "Bearer ", "Bearer key-on",
                                    "Bearer key-one2", "Bearer " + H1])
def test_anything_else_is_unauthenticated(header) -> None:
    keys = _keys(keys=[{"id": "alice", "sha256": H1}])
    with pytest.raises(E.Unauthenticated):
        keys.principal(header)


def test_env_entries_are_id_colon_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TANDEM_TEST_KEYS", f" alice:{H1} , ,bob:{H2}")
    keys = _keys(api_keys_env="TANDEM_TEST_KEYS")
    assert [e.id for e in keys.entries()] == ["alice", "bob"]
    assert keys.principal("Bearer key-two") == "bob"


@pytest.mark.parametrize("raw", ["alice", f"alice:{H1[:-1]}", f"al ice:{H1}", f"alice:{H1.upper()}", "alice:key-one"])
def test_bad_entries_are_config_errors(raw: str) -> None:
    with pytest.raises(E.ConfigError):
        parse_key_entries(raw, source="X")


def test_enabled_without_keys_refuses_all(caplog: pytest.LogCaptureFixture) -> None:
    keys = _keys()
    assert any("no API key" in r.getMessage() for r in caplog.records)
    with pytest.raises(E.Unauthenticated):
        keys.principal("Bearer anything")


def test_keys_file_rotates_without_a_restart(tmp_path: Path) -> None:
    f = tmp_path / "keys.yaml"
    f.write_text(f"- {{id: alice, sha256: {H1}}}\n")
    now = [0.0]
    keys = ApiKeys(AuthConfig(enabled=True, keys_file=str(f)), clock=lambda: now[0])
    assert keys.principal("Bearer key-one") == "alice"
    f.write_text(f"- {{id: bob, sha256: {H2}}}\n")
    os.utime(f, (time.time() + 5, time.time() + 5))
    assert keys.principal("Bearer key-one") == "alice"  # re-read at most once a second
    now[0] = 1.0
    assert keys.principal("Bearer key-two") == "bob"
    with pytest.raises(E.Unauthenticated):
        keys.principal("Bearer key-one")  # rotated out
    f.write_text("not: [a, list")  # a broken file keeps the last good keys
    os.utime(f, (time.time() + 10, time.time() + 10))
    now[0] = 2.0
    assert keys.principal("Bearer key-two") == "bob"
    f.unlink()
    now[0] = 3.0
    with pytest.raises(E.Unauthenticated):
        keys.principal("Bearer key-two")


def test_live_keys_replace_only_the_live_set() -> None:
    keys = _keys(keys=[{"id": "alice", "sha256": H1}])
    keys.set_live_keys(parse_key_entries([{"id": "bob", "sha256": H2}], source="uc"))
    assert {keys.principal("Bearer key-one"), keys.principal("Bearer key-two")} == {"alice", "bob"}
    keys.set_live_keys([])
    with pytest.raises(E.Unauthenticated):
        keys.principal("Bearer key-two")
    assert keys.principal("Bearer key-one") == "alice"


def _serve_file(user_config: dict) -> dict:
    return {"applications": [{"name": "t", "import_path": "serve.app:build_app", "deployments": [
        {"name": "TandemIngress", "user_config": user_config}], "args": {
        "models": {"m": {"model_id": "m", "source": "embedded"}},
        "roles": {"orchestrator": "m", "generator": "m", "slot_extractor": "m"},
        "domain": {"name": "support"}}}]}


def test_ingress_user_config_is_validated_strictly() -> None:
    ServeFile.model_validate(_serve_file({"auth": {"keys": [{"id": "bob", "sha256": H2}]}}))
    for bad in ({"auth": {"keys": [{"id": "bob", "sha256": "nothex"}]}}, {"auth": {"enabled": False}},
                {"limits": {}}):
        with pytest.raises(ValueError):
            ServeFile.model_validate(_serve_file(bad))


# -- rate limits ------------------------------------------------------------------------------


def test_no_rate_is_no_limit() -> None:
    lim = RateLimiter(LimitsConfig())
    for _ in range(100):
        lim.hit("alice")


def test_a_key_over_its_rate_is_rate_limited_with_retry_after() -> None:
    lim = RateLimiter(LimitsConfig(rate="3/minute"))
    for _ in range(3):
        lim.hit("alice")  # exactly the rate passes
    with pytest.raises(E.RateLimited) as err:
        lim.hit("alice")
    assert err.value.http_status == 429 and err.value.grpc_status == "RESOURCE_EXHAUSTED"
    assert 1 <= err.value.retry_after_s <= 60
    lim.hit("bob")  # per key


def test_bad_rate_is_refused_by_the_config() -> None:
    with pytest.raises(ValueError):
        LimitsConfig(rate="lots")


def test_a_limit_store_that_cannot_answer_is_a_typed_503_not_a_500() -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on: Redis down
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lim = RateLimiter(LimitsConfig(rate="3/minute", storage_url=f"redis://127.0.0.1:{port}/0"))
    with pytest.raises(E.StoreUnavailable) as err:
        lim.hit("alice")
    assert err.value.http_status == 503 and err.value.grpc_status == "UNAVAILABLE"
    assert err.value.retry_after_s == 1.0
    assert err.value.details == {"reason": "ConnectionError"}


def test_a_full_window_on_a_live_store_stays_rate_limited_not_unavailable() -> None:
    lim = RateLimiter(LimitsConfig(rate="1/minute"))
    lim.hit("alice")
    with pytest.raises(E.RateLimited):  # our own error passes through the store guard unchanged
        lim.hit("alice")
