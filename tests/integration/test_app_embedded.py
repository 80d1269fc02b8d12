"""The embedded app end to end: real Ray Serve, real vLLM (CPU), real SQLite, real clients.

One app for the whole module (the engine start dominates). The replica-kill
test runs last: it takes the model deployment down on purpose.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import grpc
import httpx
import pytest

from tests.integration.conftest import start_app

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):
    # The prompting baseline: one generator call, no tools (the other pipelines have their own modules).
    yield from start_app(tmp_path_factory.mktemp("embedded"), {"pipeline": {"kind": "prompting", "max_reply_tokens": 128}})


@pytest.fixture(scope="module")
def stub(app):
    from serve.protos import assistant_pb2_grpc

    with grpc.insecure_channel(app.grpc) as ch:
        yield assistant_pb2_grpc.AssistantStub(ch)


def sse_turn(app, session_id: str, text: str, **extra) -> list[dict]:
    return app.turn(session_id, text, timeout=120, **extra)


def grpc_stream_turn(stub, session_id: str, text: str) -> list[dict]:
    from serve.grpc_codec import proto_to_event
    from serve.protos import assistant_pb2 as pb

    return [proto_to_event(m).model_dump(mode="json") for m in stub.StreamTurn(pb.TurnRequest(session_id=session_id, text=text))]


PROMPT = "Say hello to a new customer in one short sentence."


def test_sse_turn_streams_reply_then_done(app):
    events = sse_turn(app, "it-sse-1", PROMPT)
    types = [e["type"] for e in events]
    assert types[-1] == "done" and types.count("done") == 1
    assert "reply.delta" in types
    done = events[-1]
    assert done["status"] == "ok" and done["pipeline"] == "prompting"
    assert len(done["trace_id"]) == 32 and done["turn_id"].startswith("t_")
    t = done["timings"]
    assert t["first_token_ms"] is not None and 0 < t["first_token_ms"] <= t["end_ms"]
    reply = "".join(e["text"] for e in events if e["type"] == "reply.delta")
    assert reply.strip()
    stored = httpx.get(f"{app.http}/v1/sessions/it-sse-1").json()
    assert [x["reply_text"] for x in stored["turns"]] == [reply]
    assert stored["turns"][0]["trace_id"] == done["trace_id"]


def test_grpc_stream_matches_http_events(app, stub):
    """Greedy decoding, same prompt, fresh sessions: the same events in the same order on both."""
    http_events = sse_turn(app, "it-same-http", PROMPT)
    grpc_events = grpc_stream_turn(stub, "it-same-grpc", PROMPT)

    def shape(evs):
        return [(e["type"], e.get("text")) for e in evs if e["type"] != "done"]

    assert shape(http_events) == shape(grpc_events)
    assert grpc_events[-1]["type"] == "done" and grpc_events[-1]["status"] == "ok"


def test_history_is_used_and_stored_over_both_protocols(app, stub):
    from serve.protos import assistant_pb2 as pb

    sid = "it-multi"
    first = sse_turn(app, sid, "My name is Ada.")
    assert first[-1]["status"] == "ok"
    ans = stub.Turn(pb.TurnRequest(session_id=sid, text="What is my name?"))
    assert ans.status == "ok" and ans.reply and ans.events[-1].type == "done"
    sess = stub.GetSession(pb.GetSessionRequest(session_id=sid))
    assert [t.index for t in sess.turns] == [0, 1]
    assert sess.turns[1].reply_text == ans.reply
    body = httpx.post(f"{app.http}/v1/sessions/{sid}/turns", json={"text": "Thanks!"}, timeout=120).json()
    assert body["status"] == "ok" and body["events"][-1]["type"] == "done"
    assert len(httpx.get(f"{app.http}/v1/sessions/{sid}").json()["turns"]) == 3
    # the history reached the model: each turn's model input (as its generate event records it)
    # is the system prompt, the earlier turns' user and reply messages, and the new user text
    turn_ids = [first[-1]["turn_id"], ans.turn_id, body["events"][-1]["turn_id"]]
    shapes = []
    for turn_id in turn_ids:
        [gen] = [e for e in app.events(turn_id) if e["kind"] == "stage.generate"]
        shapes.append((gen["history_turns"], gen["messages"]))
    assert shapes == [(0, 2), (1, 4), (2, 6)]


def test_health_readiness_and_reflection(app):
    assert httpx.get(f"{app.http}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{app.http}/readyz").json()
    assert ready["status"] == "ready" and ready["models"] == ["smollm2-135m-instruct"]
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    with grpc.insecure_channel(app.grpc) as ch:
        resp = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest())
        assert resp.status == health_pb2.HealthCheckResponse.SERVING
        refl = reflection_pb2_grpc.ServerReflectionStub(ch)
        out = list(refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
        names = {s.name for s in out[0].list_services_response.service}
        assert {"tandem.v1.Assistant", "grpc.health.v1.Health"} <= names
        desc = list(refl.ServerReflectionInfo(iter([
            reflection_pb2.ServerReflectionRequest(file_containing_symbol="tandem.v1.Assistant")])))
        assert desc[0].file_descriptor_response.file_descriptor_proto


BAD_HTTP = [
    # (session, raw body, headers, status, code)
    ("it-bad-json", b"{not json", {}, 400, "invalid_input"),
    ("it-bad-missing", b'{"locale": "en"}', {}, 422, "validation_error"),
    ("it-bad-type", b'{"text": 42}', {}, 422, "validation_error"),
    ("it-bad-empty", b'{"text": "   "}', {}, 422, "validation_error"),
    ("it-bad-extra", b'{"text": "hi", "txet": "x"}', {}, 422, "validation_error"),
    # labels given with a turn are refused by an app that perceives itself (oracle_perception off)
    ("it-bad-labels", b'{"text": "hi", "perception": {"intent": "cancel", "sub_intent": "order"}}', {}, 422,
     "validation_error"),
    ("it-bad-utf8", b'{"text": "\xff\xfe"}', {}, 400, "invalid_input"),
    ("it-bad-big", json.dumps({"text": "x" * 4001}).encode(), {}, 413, "payload_too_large"),
    ("it-bad-array", b'["text"]', {}, 400, "invalid_input"),
    ("bad id!", b'{"text": "hi"}', {}, 400, "invalid_session_id"),
]


@pytest.mark.parametrize("session,body,headers,status,code", BAD_HTTP, ids=[b[0] for b in BAD_HTTP])
@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
def test_bad_http_input_is_refused_and_stores_nothing(app, session, body, headers, status, code, accept):
    r = httpx.post(f"{app.http}/v1/sessions/{session}/turns", content=body,
                   headers={"Accept": accept, "Content-Type": "application/json", **headers}, timeout=30)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == code and err["message"]
    if session != "bad id!":
        assert httpx.get(f"{app.http}/v1/sessions/{session}").status_code == 404


def test_unknown_route_and_session_are_404_json(app):
    r = httpx.get(f"{app.http}/v2/nothing-here")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = httpx.get(f"{app.http}/v1/sessions/never-seen")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = httpx.get(f"{app.http}/v1/sessions/bad%20id")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_session_id"


def test_bad_grpc_input(app, stub):
    from serve.protos import assistant_pb2 as pb

    cases = [
        (lambda: list(stub.StreamTurn(pb.TurnRequest(session_id="it-g-empty", text=""))), grpc.StatusCode.INVALID_ARGUMENT),
        (lambda: stub.Turn(pb.TurnRequest(session_id="bad id", text="hi")), grpc.StatusCode.INVALID_ARGUMENT),
        (lambda: stub.Turn(pb.TurnRequest(session_id="it-g-big", text="y" * 5000)), grpc.StatusCode.INVALID_ARGUMENT),
        (lambda: stub.Turn(pb.TurnRequest(session_id="it-g-loc", text="hi", locale="!!")), grpc.StatusCode.INVALID_ARGUMENT),
        (lambda: stub.GetSession(pb.GetSessionRequest(session_id="it-g-none")), grpc.StatusCode.NOT_FOUND),
    ]
    for call, code in cases:
        with pytest.raises(grpc.RpcError) as info:
            call()
        assert info.value.code() == code
        assert info.value.details()
    for sid in ("it-g-empty", "it-g-big", "it-g-loc"):
        with pytest.raises(grpc.RpcError):
            stub.GetSession(pb.GetSessionRequest(session_id=sid))
    # still serving
    assert stub.Turn(pb.TurnRequest(session_id="it-g-after", text="Hello")).status == "ok"


def test_openai_sdk_against_raw_endpoint(app):
    from openai import OpenAI

    client = OpenAI(base_url=f"{app.http}/v1", api_key="unused")
    assert [m.id for m in client.models.list().data] == ["smollm2-135m-instruct"]
    out = client.chat.completions.create(
        model="smollm2-135m-instruct", messages=[{"role": "user", "content": "What is 2+2?"}],
        max_tokens=16, temperature=0,
    )
    assert out.choices[0].message.content
    chunks = client.chat.completions.create(
        model="smollm2-135m-instruct", messages=[{"role": "user", "content": "Count to three."}],
        max_tokens=16, temperature=0, stream=True,
    )
    text = "".join((c.choices[0].delta.content or "") for c in chunks if c.choices)
    assert text
    # structured outputs pass through the raw endpoint too
    out = client.chat.completions.create(
        model="smollm2-135m-instruct", messages=[{"role": "user", "content": "Pick a color."}],
        max_tokens=8, temperature=0, extra_body={"structured_outputs": {"choice": ["red", "blue"]}},
    )
    assert out.choices[0].message.content in ("red", "blue")


def _spans(tele: Path) -> list[dict]:
    out = []
    for f in tele.glob("spans-*.jsonl"):
        out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return out


def test_one_trace_spans_proxy_ingress_and_model(app):
    done = sse_turn(app, "it-trace", PROMPT)[-1]
    tid = done["trace_id"]
    deadline = time.monotonic() + 30
    names: set[str] = set()
    while time.monotonic() < deadline:
        spans = [s for s in _spans(app.spans_dir) if s["trace_id"] == tid]
        names = {s["name"] for s in spans}
        if (any("LLMServer" in n and "chat" in n for n in names) and "tandem.generate" in names
                and any(n.startswith("proxy_http_request") for n in names)):
            break
        time.sleep(0.5)
    assert any(n.startswith("proxy_http_request") for n in names), names
    assert any("TandemIngress" in n for n in names), names
    assert {"tandem.turn", "tandem.generate"} <= names
    assert any("LLMServer" in n and "chat" in n for n in names), names
    pids = {s["pid"] for s in spans}
    assert len(pids) >= 2  # the trace crosses processes (proxy, ingress, model replica)
    events = []
    for f in app.telemetry.glob("events-*.jsonl"):
        events += [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
    kinds = {e["kind"] for e in events if e.get("trace_id") == tid}
    assert {"turn.start", "stage.generate", "turn.end"} <= kinds


def test_model_replica_killed_mid_stream_gives_error_then_done(app):
    """Fault: the model replica dies while streaming. The client gets `error` then `done`;
    the history keeps the user turn and marks the reply failed; the app recovers."""
    import ray

    def kill_model_replica() -> None:
        for a in ray.util.list_named_actors(all_namespaces=True):
            if "LLMServer" in a["name"] and a["namespace"] == "serve":
                ray.kill(ray.get_actor(a["name"], namespace="serve"), no_restart=True)
                return
        raise AssertionError("no LLMServer replica found")

    events = []
    killed = False
    with httpx.stream("POST", f"{app.http}/v1/sessions/it-fault/turns",
                      json={"text": "Write a long story about a lighthouse keeper."},
                      headers={"Accept": "text/event-stream"}, timeout=120) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                ev = json.loads(line[6:])
                events.append(ev)
                if ev["type"] == "reply.delta" and not killed:
                    kill_model_replica()
                    killed = True
    types = [e["type"] for e in events]
    assert killed and types[-2:] == ["error", "done"], types
    assert events[-2]["code"] in ("model_unavailable", "upstream_error", "invalid_model_output")
    assert events[-1]["status"] == "failed"
    turns = httpx.get(f"{app.http}/v1/sessions/it-fault").json()["turns"]
    assert len(turns) == 1 and turns[0]["status"] == "failed"
    assert turns[0]["user_text"].startswith("Write a long story")
    # Serve replaces the replica; the app serves again.
    from serve.cli import wait_ready

    wait_ready(app.http, timeout_s=300)
    assert sse_turn(app, "it-after-fault", "Hi")[-1]["status"] == "ok"
