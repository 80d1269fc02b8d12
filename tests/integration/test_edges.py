"""The edges on the real app (real Ray Serve proxy, real vLLM, real SQLite), auth on, one app.

Tenancy over HTTP and gRPC, the OpenAI routes under auth, hostile bodies through the
real proxy, bounded-queue overload (an ingress deliberately sized 2 + 2 so a burst
overflows it), PII only as placeholders at rest.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3

import grpc
import httpx
import pytest

from tests.integration.conftest import start_app

pytestmark = pytest.mark.integration

KEYS = {"alice": "it-key-alice", "bob": "it-key-bob"}


def hdr(who: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[who]}"} if who else {}


def md(who: str | None) -> tuple[tuple[str, str], ...]:
    return tuple(hdr(who).items())


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):
    overrides = {
        "pipeline": {"kind": "prompting", "max_reply_tokens": 48},
        "auth": {"enabled": True, "keys": [{"id": k, "sha256": hashlib.sha256(v.encode()).hexdigest()}
                                           for k, v in KEYS.items()]},
        "ingress": {"autoscaling": None, "num_replicas": 1, "max_ongoing_requests": 2, "max_queued_requests": 2},
    }
    yield from start_app(tmp_path_factory.mktemp("edges"), overrides)


@pytest.fixture(scope="module")
def stub(app):
    from serve.protos import assistant_pb2_grpc

    with grpc.insecure_channel(app.grpc) as ch:
        yield assistant_pb2_grpc.AssistantStub(ch)


def post(app, sid: str, who: str | None, **kw) -> httpx.Response:
    return httpx.post(f"{app.http}/v1/sessions/{sid}/turns", headers={**hdr(who), **kw.pop("headers", {})},
                      timeout=120, **kw)


def rows(app, sid: str) -> list[str]:
    with sqlite3.connect(app.store_path) as conn:
        return [r[0] for r in conn.execute("SELECT body FROM turns WHERE session_id=?", (sid,))]


def test_tenancy_over_http(app):
    assert post(app, "it-t1", "alice", json={"text": "Hello!"}).json()["status"] == "ok"
    for method, path in (("GET", "/v1/sessions/it-t1"), ("POST", "/v1/sessions/it-t1/turns")):
        r = httpx.request(method, f"{app.http}{path}", headers=hdr("bob"), json={"text": "hi"}, timeout=60)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    assert httpx.get(f"{app.http}/v1/sessions/it-unknown", headers=hdr("bob")).status_code == 404
    assert len(httpx.get(f"{app.http}/v1/sessions/it-t1", headers=hdr("alice")).json()["turns"]) == 1
    assert len(rows(app, "it-t1")) == 1


def test_tenancy_over_grpc(app, stub):
    from serve.protos import assistant_pb2 as pb

    events = list(stub.StreamTurn(pb.TurnRequest(session_id="it-g1", text="Hello!"), metadata=md("alice")))
    assert events[-1].done.status == "ok"
    for call in (lambda: stub.GetSession(pb.GetSessionRequest(session_id="it-g1"), metadata=md("bob")),
                 lambda: stub.Turn(pb.TurnRequest(session_id="it-g1", text="hi"), metadata=md("bob")),
                 lambda: list(stub.StreamTurn(pb.TurnRequest(session_id="it-g1", text="hi"), metadata=md("bob")))):
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() is grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as err:
        stub.GetSession(pb.GetSessionRequest(session_id="it-g1"))
    assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert len(stub.GetSession(pb.GetSessionRequest(session_id="it-g1"), metadata=md("alice")).turns) == 1


def test_openai_routes_need_a_key(app):
    from openai import AuthenticationError, OpenAI

    for method, path in (("GET", "/v1/models"), ("GET", "/v1/models/smollm2-135m-instruct"),
                         ("POST", "/v1/chat/completions"), ("POST", "/v1/completions")):
        r = httpx.request(method, f"{app.http}{path}", json={}, timeout=30)
        assert r.status_code == 401, path
    with pytest.raises(AuthenticationError):
        OpenAI(base_url=f"{app.http}/v1", api_key="not-a-key").models.list()
    client = OpenAI(base_url=f"{app.http}/v1", api_key=KEYS["alice"])
    assert [m.id for m in client.models.list().data] == ["smollm2-135m-instruct"]
    out = client.chat.completions.create(model="smollm2-135m-instruct", max_tokens=8,
                                         messages=[{"role": "user", "content": "Say hi."}])
    assert out.choices[0].message.content
    assert httpx.get(f"{app.http}/healthz").status_code == 200 and httpx.get(f"{app.http}/readyz").status_code == 200


HOSTILE = [
    (b"[" * 5000 + b"]" * 5000, 400, "invalid_input"),
    (b'{"text": "\\ud800"}', 400, "invalid_input"),
    (b'{"text": "a\\u0000b"}', 400, "invalid_input"),
    (b'{"text": "\xff"}', 400, "invalid_input"),
    (b'{"text": "' + b"a" * (2 * 2**20) + b'"}', 413, "payload_too_large"),
]


@pytest.mark.parametrize(("body", "status", "code"), HOSTILE, ids=["deep", "surrogate", "nul", "utf8", "2MB"])
def test_hostile_bodies_through_the_real_proxy(app, body: bytes, status: int, code: str):
    sid = f"it-h-{code}-{len(body)}"
    r = post(app, sid, "alice", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status and r.headers["content-type"] == "application/json"
    assert r.json()["error"]["code"] == code
    assert rows(app, sid) == []
    assert httpx.get(f"{app.http}/v1/sessions/{sid}", headers=hdr("alice")).status_code == 404


def test_a_burst_over_the_bounded_queue_is_refused_early_and_cleanly(app):
    n = 16

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=app.http, timeout=120, headers=hdr("alice")) as c:
            return await asyncio.gather(*(c.post(f"/v1/sessions/it-o{i}/turns", json={"text": "Tell me a fact."})
                                          for i in range(n)))

    out = asyncio.run(burst())
    codes = [r.status_code for r in out]
    assert set(codes) <= {200, 503}, codes
    assert codes.count(200) >= 2 and codes.count(503) >= 1, codes
    for i, r in enumerate(out):
        if r.status_code == 503:
            assert r.headers.get("retry-after") == "1"
            assert rows(app, f"it-o{i}") == []  # a refused turn stored nothing
        else:
            assert len(rows(app, f"it-o{i}")) == 1
    assert post(app, "it-after-burst", "alice", json={"text": "Hi"}).status_code == 200


def test_pii_at_rest_is_placeholders(app):
    r = post(app, "it-pii", "alice", json={"text": "My email is dana.lee@example.net, call +1 415-555-0199."})
    assert r.status_code == 200
    [body] = rows(app, "it-pii")
    assert "dana.lee@example.net" not in body and "555-0199" not in body and "[EMAIL_1]" in body
    mine = httpx.get(f"{app.http}/v1/sessions/it-pii", headers=hdr("alice")).json()["turns"][0]
    assert "dana.lee@example.net" in mine["user_text"]
