"""The runner with an in-memory client (no Ray, no sockets, no wall-clock thresholds):
budgets, session order on one id, open-loop arrivals, stop conditions, hard caps; the replica poller."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from serve.loadtest.clients import Recorder, RequestRecord
from serve.loadtest.metrics import SLO
from serve.loadtest.replicas import ReplicaPoller
from serve.loadtest.runner import HARD_CAPS, LoadSpec, run_load
from serve.loadtest.workload import Workload

WL = Workload("w", (("a1", "a2", "a3"), ("b1",), ("c1", "c2")))


class FakeClient:
    """Answers each turn with two reply deltas and a done; remembers what each session got."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.sent: dict[str, list[str]] = defaultdict(list)
        self.fail_on = fail_on
        self.closed = False

    async def turn(self, rec: RequestRecord, text: str) -> RequestRecord:
        self.sent[rec.session_id].append(text)
        rc = Recorder(rec)
        await asyncio.sleep(0)
        rc.observe({"type": "reply.delta", "text": "hi "})
        rc.observe({"type": "reply.delta", "text": "there"})
        status = "failed" if text == self.fail_on else "ok"
        rc.observe({"type": "done", "status": status, "turn_id": "t", "trace_id": "x",
                    "timings": {"queue_ms": 1.0, "first_token_ms": 2.0, "end_ms": 3.0, "stages": {"generate": 2.5}}})
        return rc.finish()

    async def aclose(self) -> None:
        self.closed = True


def _run(spec: LoadSpec, **kw):
    client = kw.pop("client", FakeClient())
    return asyncio.run(run_load(spec, WL, client=client, **kw)), client


def test_closed_loop_honours_the_request_budget_and_session_order():
    res, client = _run(LoadSpec(concurrency=3, requests=25, progress=False, warmup=2))
    assert len(res.records) == 25 and res.summary["requests"] == 25 and client.closed
    measured = {r.session_id for r in res.records}
    for sid, texts in client.sent.items():
        if sid in measured:  # every session replays a prefix of one script, in order
            assert any(list(s[:len(texts)]) == texts for s in WL.sessions), texts
    assert sum(1 for sid in client.sent if sid.startswith("warm-")) == 2
    assert {r.user for r in res.records} == {0, 1, 2}
    assert res.summary["error_rate"] == 0 and res.summary["latency_ms"]["stage.generate"]["p50"] == 2.5


def test_turn_indices_follow_the_script():
    res, _ = _run(LoadSpec(concurrency=1, requests=6, progress=False))
    by_session = defaultdict(list)
    for r in res.records:
        by_session[r.session_id].append(r.turn_index)
    assert all(v == list(range(len(v))) for v in by_session.values())


def test_failures_count_in_error_rate_and_goodput():
    res, _ = _run(LoadSpec(concurrency=2, requests=30, progress=False), client=FakeClient(fail_on="b1"),
                  slo=SLO(ttft_ms=60_000))
    failed = sum(1 for r in res.records if not r.ok)
    assert failed > 0 and res.summary["failed"] == failed
    assert res.summary["goodput_fraction"] == pytest.approx((30 - failed) / 30)


class RefusingClient(FakeClient):
    """Refuses the first turn of every session once, with a Retry-After of 0 s."""

    async def turn(self, rec: RequestRecord, text: str) -> RequestRecord:
        if rec.turn_index == 0 and not self.sent[rec.session_id]:
            self.sent[rec.session_id].append("<refused>")
            rec.transport_status, rec.retry_after_s = "503", 0.0
            return Recorder(rec).finish("overloaded")
        return await super().turn(rec, text)


def test_a_polite_client_sends_a_refused_turn_again_after_retry_after():
    res, client = _run(LoadSpec(concurrency=1, requests=6, progress=False, honor_retry_after=True),
                       client=RefusingClient())
    by_session = defaultdict(list)
    for r in res.records:
        by_session[r.session_id].append((r.turn_index, r.ok))
    for sid, got in by_session.items():  # refused once, then the same turn again and the rest in order
        assert got[0] == (0, False) and [i for i, _ in got[1:]] == list(range(len(got) - 1))
        assert all(ok for _, ok in got[1:])
        script = next(s for s in WL.sessions if s[0] == client.sent[sid][1])
        assert client.sent[sid] == ["<refused>", *script[:len(got) - 1]]
    impolite, client = _run(LoadSpec(concurrency=1, requests=4, progress=False), client=RefusingClient())
    indices = defaultdict(list)
    for r in impolite.records:
        indices[r.session_id].append(r.turn_index)
    assert all(v == list(range(len(v))) for v in indices.values())  # without it: never the same turn again


def test_open_loop_sends_sessions_at_arrivals_within_budget():
    res, client = _run(LoadSpec(mode="open", rate=1000.0, requests=40, progress=False, seed=4))
    assert len(res.records) == 40 and res.dropped_arrivals == 0
    assert all("-o-" in sid for sid in client.sent)


def test_stop_when_ends_the_run_early():
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return calls["n"] > 5

    res, _ = _run(LoadSpec(concurrency=1, requests=1000, progress=False), stop_when=stop)
    assert 0 < len(res.records) < 1000


@pytest.mark.parametrize("field,value", [("requests", HARD_CAPS["requests"] + 1), ("duration_s", 0),
                                         ("concurrency", 0), ("rate", -1.0), ("timeout_s", 10_000.0),
                                         ("warmup", -1), ("protocol", "ftp")])
def test_spec_hard_caps(field, value):
    with pytest.raises(ValueError):
        LoadSpec(**{field: value})


def test_replica_poller_bookkeeping_with_a_fake_status():
    states = iter([{"Ingress": {"RUNNING": 1, "status": "HEALTHY"}},
                   {"Ingress": {"RUNNING": 1, "STARTING": 2, "status": "UPSCALING"}},
                   {"Ingress": {"RUNNING": 3, "status": "HEALTHY"}},
                   {"Ingress": {"RUNNING": 1, "STOPPING": 2, "status": "DOWNSCALING"}}])
    clock = iter(range(100))
    p = ReplicaPoller("app", status_fn=lambda: next(states), clock=lambda: float(next(clock)))
    p.t0 = 0.0
    for _ in range(4):
        p.poll_once()
    assert [s.running("Ingress") for s in p.samples] == [1, 1, 3, 1]
    assert [s.total("Ingress") for s in p.samples] == [1, 3, 3, 1]
    assert p.first_time(lambda s: s.total("Ingress") > 1) == 2.0
    assert p.first_time(lambda s: s.running("Ingress") > 1) == 3.0
    assert p.first_time(lambda s: s.running("Ingress") == 1, after_s=3.5) == 4.0
    assert p.max_running() == {"Ingress": 3} and p.deployments() == ["Ingress"]
    assert p.timeline()[1] == {"t_s": 2.0, "running": {"Ingress": 1}, "total": {"Ingress": 3}}
    p2 = ReplicaPoller("app", status_fn=lambda: (_ for _ in ()).throw(RuntimeError("busy")))
    assert p2.poll_once() is None and p2.errors == 1
