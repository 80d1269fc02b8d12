"""serve.ingress over HTTP, in process: auth on every route, tenancy, hostile bodies, idempotency, limits."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from tests.unit.edge_app import KEYS, EchoLLM, auth, harness, sse_events, stored_turns

pytestmark = pytest.mark.timeout(120)

SESSION_ROUTES = [("POST", "/v1/sessions/s1/turns"), ("GET", "/v1/sessions/s1")]
OPENAI_ROUTES = [("GET", "/v1/models"), ("GET", "/v1/models/m1"), ("POST", "/v1/chat/completions"),
                 ("POST", "/v1/completions"), ("GET", "/openapi.json"), ("GET", "/docs")]


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("http")


def _call(h, method: str, path: str, **kw):
    async def go():
        async with h.client() as c:
            return await c.request(method, path, **kw)
    return asyncio.run(go())


def test_every_route_but_the_probes_needs_a_key(tmp_path: Path) -> None:
    with harness(tmp_path) as h:
        for method, path in SESSION_ROUTES + OPENAI_ROUTES:
            for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": KEYS["alice"]}):
                r = _call(h, method, path, headers=headers, json={"text": "hi"})
                assert r.status_code == 401, (method, path, headers)
                assert r.json()["error"]["code"] == "unauthenticated"
                assert r.headers["www-authenticate"].startswith("Bearer")
        assert _call(h, "GET", "/healthz").json() == {"status": "ok"}
        assert _call(h, "GET", "/readyz").status_code == 200
        assert _call(h, "GET", "/v1/models", headers=auth("alice")).json()["data"][0]["id"] == "m1"
        assert _call(h, "GET", "/openapi.json", headers=auth("bob")).status_code == 200
    assert stored_turns(tmp_path) == []


def test_auth_off_is_single_tenant(tmp_path: Path) -> None:
    with harness(tmp_path, auth_on=False) as h:
        assert _call(h, "POST", "/v1/sessions/s1/turns", json={"text": "hi"}).json()["status"] == "ok"
        assert len(_call(h, "GET", "/v1/sessions/s1").json()["turns"]) == 1
        assert _call(h, "GET", "/v1/models").status_code == 200


def test_another_key_gets_404_on_every_session_route_and_runs_nothing(tmp_path: Path) -> None:
    llm = EchoLLM()
    with harness(tmp_path, llm) as h:
        ok = _call(h, "POST", "/v1/sessions/s1/turns", headers=auth("alice"), json={"text": "hi"})
        assert ok.status_code == 200 and llm.chats == 1
        unknown = _call(h, "GET", "/v1/sessions/nobody", headers=auth("bob"))
        for method, path in SESSION_ROUTES:
            for accept in ("application/json", "text/event-stream"):
                r = _call(h, method, path, headers={**auth("bob"), "accept": accept}, json={"text": "hi"})
                assert r.status_code == 404 and r.headers["content-type"] == "application/json"
                assert r.json()["error"]["code"] == "not_found"
        # No existence oracle: someone else's session reads exactly like one that does not exist.
        other = _call(h, "GET", "/v1/sessions/s1", headers=auth("bob")).json()
        assert other["error"]["message"].replace("s1", "X") == unknown.json()["error"]["message"].replace("nobody", "X")
        assert llm.chats == 1
        assert [t["user_text"] for t in _call(h, "GET", "/v1/sessions/s1", headers=auth("alice")).json()["turns"]] == ["hi"]
    assert len(stored_turns(tmp_path, "s1")) == 1


HOSTILE = [
    # (body bytes, extra headers, status, code)
    (b'{"text": "' + b"a" * 70_000 + b'"}', {}, 413, "payload_too_large"),
    (b"[" * 5000 + b"]" * 5000, {}, 400, "invalid_input"),
    (b'{"text": ' * 1000 + b"1" + b"}" * 1000, {}, 400, "invalid_input"),
    (b'{"text": "\\ud800"}', {}, 400, "invalid_input"),
    (b'{"text": "a\\udfff b"}', {}, 400, "invalid_input"),
    (b'{"text": "nul\\u0000here"}', {}, 400, "invalid_input"),
    (b'{"text": "\\u202e"}', {}, 422, "validation_error"),
    (b'{"text": "\xff\xfe"}', {}, 400, "invalid_input"),
    (b'{"text": "hi", "user_id": "\\ud83d"}', {}, 422, "validation_error"),
    (b'{"text": "hi", "\\ud800": 1}', {}, 422, "validation_error"),
    (b'"just a string"', {}, 400, "invalid_input"),
    (b'{"text": "hi"}', {"idempotency-key": "has space"}, 400, "invalid_input"),
]


@pytest.mark.parametrize(("body", "headers", "status", "code"), HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_bodies_get_typed_json_errors_and_store_nothing(tmp_path: Path, body, headers, status, code) -> None:
    llm = EchoLLM()
    with harness(tmp_path, llm) as h:
        r = _call(h, "POST", "/v1/sessions/h1/turns", content=body,
                  headers={**auth("alice"), "content-type": "application/json", **headers})
        assert (r.status_code, r.json()["error"]["code"]) == (status, code)
        assert llm.chats == 0
        assert _call(h, "GET", "/v1/sessions/h1", headers=auth("alice")).status_code == 404
    assert stored_turns(tmp_path) == []


def test_a_streamed_body_without_length_is_cut_at_the_cap(tmp_path: Path) -> None:
    sent = []

    async def body():
        for _ in range(100):
            sent.append(1)
            yield b"x" * 8192

    with harness(tmp_path) as h:
        r = _call(h, "POST", "/v1/sessions/h2/turns", content=body(), headers=auth("alice"))
        assert r.status_code == 413
    assert stored_turns(tmp_path) == []


def test_bidi_controls_are_removed_before_anything_is_stored(tmp_path: Path) -> None:
    with harness(tmp_path) as h:
        r = _call(h, "POST", "/v1/sessions/b1/turns", headers=auth("alice"), json={"text": "pay \u202e01$ now"})
        assert r.status_code == 200
    assert [t["user_text"] for t in stored_turns(tmp_path, "b1")] == ["pay 01$ now"]


def test_an_idempotency_key_replays_the_recorded_answer(tmp_path: Path) -> None:
    llm = EchoLLM()
    with harness(tmp_path, llm) as h:
        hdr = {**auth("alice"), "idempotency-key": "order-42"}
        first = _call(h, "POST", "/v1/sessions/i1/turns", headers=hdr, json={"text": "hi"}).json()
        again = _call(h, "POST", "/v1/sessions/i1/turns", headers={**hdr, "accept": "text/event-stream"},
                      json={"text": "hi"})
        evs = sse_events(again.text)
        assert llm.chats == 1
        assert evs[-1]["turn_id"] == first["turn_id"] and evs[-1]["replayed"] is True
        assert "".join(e["text"] for e in evs if e["type"] == "reply.delta") == first["reply"]
        # the same key in another principal's request cannot reach the session at all
        assert _call(h, "POST", "/v1/sessions/i1/turns", headers={**auth("bob"), "idempotency-key": "order-42"},
                     json={"text": "hi"}).status_code == 404
    assert len(stored_turns(tmp_path, "i1")) == 1


def test_a_key_over_its_rate_gets_429_on_any_route(tmp_path: Path) -> None:
    with harness(tmp_path, limits={"rate": "2/minute"}) as h:
        assert _call(h, "GET", "/v1/models", headers=auth("alice")).status_code == 200
        assert _call(h, "POST", "/v1/sessions/r1/turns", headers=auth("alice"), json={"text": "a"}).status_code == 200
        r = _call(h, "POST", "/v1/sessions/r1/turns", headers=auth("alice"), json={"text": "b"})
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(r.headers["retry-after"]) <= 60
        assert _call(h, "GET", "/v1/models", headers=auth("alice")).status_code == 429
        assert _call(h, "GET", "/v1/models", headers=auth("bob")).status_code == 200  # per key
        assert _call(h, "GET", "/healthz").status_code == 200
    assert len(stored_turns(tmp_path, "r1")) == 1


def test_keys_rotate_live_through_user_config(tmp_path: Path) -> None:
    with harness(tmp_path) as h:
        carol = {"authorization": "Bearer key-carol"}
        assert _call(h, "GET", "/v1/models", headers=carol).status_code == 401
        h.ingress.reconfigure({"auth": {"keys": [{"id": "carol", "sha256": hashlib.sha256(b"key-carol").hexdigest()}]}})
        assert _call(h, "GET", "/v1/models", headers=carol).status_code == 200
        h.ingress.reconfigure({"auth": {"keys": []}})
        assert _call(h, "GET", "/v1/models", headers=carol).status_code == 401


def test_a_busy_session_answers_409_before_any_stream(tmp_path: Path) -> None:
    with harness(tmp_path, ingress={"session_lock_wait_s": 0}) as h:
        store = h.ingress.store
        assert asyncio.run(store.acquire_lease("busy1", "another-replica", 60))
        r = _call(h, "POST", "/v1/sessions/busy1/turns", json={"text": "hi"},
                  headers={**auth("alice"), "accept": "text/event-stream"})
        assert r.status_code == 409 and r.json()["error"]["code"] == "session_busy"
        assert r.headers["retry-after"] == "1"
    assert stored_turns(tmp_path) == []


def test_the_turn_body_schema_is_in_the_openapi_document(tmp_path: Path) -> None:
    with harness(tmp_path) as h:
        doc = _call(h, "GET", "/openapi.json", headers=auth("alice")).json()
    op = doc["paths"]["/v1/sessions/{session_id}/turns"]["post"]
    schema = op["requestBody"]["content"]["application/json"]["schema"]
    assert schema["required"] == ["text"] and set(schema["properties"]) == {"text", "locale", "user_id", "perception"}
    assert schema["additionalProperties"] is False
    assert {"400", "401", "404", "409", "413", "422", "429", "503", "504"} <= set(op["responses"])
    assert any(p["name"] == "Idempotency-Key" for p in op["parameters"])


def test_pii_is_at_rest_only_as_placeholders_but_the_owner_sees_it(tmp_path: Path) -> None:
    with harness(tmp_path) as h:
        _call(h, "POST", "/v1/sessions/p1/turns", headers=auth("alice"), json={"text": "mail me at ann@example.org"})
        mine = _call(h, "GET", "/v1/sessions/p1", headers=auth("alice")).json()
    assert mine["turns"][0]["user_text"] == "mail me at ann@example.org"
    assert stored_turns(tmp_path, "p1")[0]["user_text"] == "mail me at [EMAIL_1]"


def test_the_ingress_sets_its_thread_switch_interval_only_when_configured(tmp_path: Path) -> None:
    import sys

    from serve.config import IngressConfig

    old = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        with harness(tmp_path / "a"):
            assert sys.getswitchinterval() == pytest.approx(0.005)  # unset: Python's own value stays
        with harness(tmp_path / "b", ingress={"switch_interval_ms": 1}):
            assert sys.getswitchinterval() == pytest.approx(0.001)
    finally:
        sys.setswitchinterval(old)
    for bad in (0, -1, 101):
        with pytest.raises(ValueError):
            IngressConfig(switch_interval_ms=bad)
    assert IngressConfig(switch_interval_ms=100).switch_interval_ms == 100
