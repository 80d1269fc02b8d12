"""scripts/chaos.py's measures: a fault's row from the attempts around it, a write's verdict."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from chaos import (  # noqa: E402
    MAX_RETRY_PAUSE_S,
    Attempt,
    Fault,
    _seconds,
    fault_row,
    retry_pause,
    window_closed,
    write_verdict,
)


def _a(start, end, outcome, ft=None):
    a = Attempt("s", "chat", 0, "http", "cpu-1", "k", start, end=end, outcome=outcome)
    a.first_token = None if ft is None else start + ft
    return a


def test_a_fault_row_counts_the_turns_it_hit_by_code_and_the_first_good_turn_after_it():
    attempts = [
        _a(0.0, 5.0, "ok", 1.0),            # before the fault: not counted
        _a(8.0, 12.0, "stream_cut"),        # in flight at t=10: cut without a typed error
        _a(9.0, 11.0, "model_unavailable"),  # in flight: a typed row of the error table
        _a(12.0, 13.0, "connect_error"),    # after: a dead proxy refused the connection
        _a(13.0, 40.0, "hang"),             # after: never answered
        _a(14.0, 20.0, "ok", 2.0),          # the first good turn that started after the fault
        _a(15.0, 18.0, "ok", 1.0),          # started later, ended earlier: recovery is by end time
    ]
    row = fault_row(Fault("ingress_kill", 10.0, in_flight=2), attempts, t_end=60.0, baseline_ttft=1.0)
    assert row["in_flight"] == 2 and row["turns"] == 6
    assert row["failed_by_code"] == {"stream_cut": 1, "model_unavailable": 1, "connect_error": 1, "hang": 1}
    assert row["failed"] == 3 and row["untyped"] == 2 and row["hangs"] == 1
    assert row["recovery_s"] == 8.0  # 18.0 - 10.0


def test_no_good_turn_after_the_fault_is_no_recovery():
    row = fault_row(Fault("node_loss", 10.0), [_a(11.0, 12.0, "store_unavailable")], t_end=30.0, baseline_ttft=1.0)
    assert row["recovery_s"] is None and row["baseline_recovery_s"] is None and row["failed"] == 1


def test_write_verdicts():
    assert write_verdict(1, 1, True) == "ok"
    assert write_verdict(0, 0, False) == "none"
    assert write_verdict(2, 1, True) == "doubled"
    assert write_verdict(1, 2, True) == "doubled"
    assert write_verdict(1, 0, False) == "lost"      # the user was told; nothing recorded it
    assert write_verdict(1, 0, True) == "lost"
    assert write_verdict(1, 1, False) == "half_written"  # the ledger says done, the world does not
    assert write_verdict(0, 1, True) == "half_written"   # done in the world, no turn of the session says so
    assert write_verdict(0, 0, True) == "half_written"   # the world changed with no ledger entry


def test_replicas_are_found_by_exact_deployment_name_or_by_the_model_prefix(monkeypatch):
    import chaos
    import ray._private.state as state

    def actor(name, alive=True, node="n1"):
        return {"Name": name, "State": "ALIVE" if alive else "DEAD", "Address": {"NodeID": node}}

    table = {i: a for i, a in enumerate([
        actor("SERVE_REPLICA::tandem#ToolsServer#b"), actor("SERVE_REPLICA::tandem#ToolsServer#a", node="n2"),
        actor("SERVE_REPLICA::tandem#ToolsServerX#c"), actor("SERVE_REPLICA::tandem#ToolsServer#d", alive=False),
        actor("SERVE_REPLICA::tandem#LLMServer:smollm2-135m-instruct#e"), actor("SERVE_CONTROLLER_ACTOR"),
    ])}
    monkeypatch.setattr(state, "actors", lambda: table)
    assert [(r.name.rsplit("#", 1)[1], r.node_id) for r in chaos._replicas("ToolsServer")] == [("a", "n2"), ("b", "n1")]
    assert [r.name.rsplit("#", 1)[1] for r in chaos._replicas("LLMServer:")] == ["e"]
    assert chaos._replicas("LLMServer") == []  # a name without the colon is exact: no such deployment
    assert chaos._replicas("RuleKernels") == []


def test_every_fault_is_known_and_the_default_run_leaves_only_the_gcs_restart_out():
    import chaos

    assert {"kernels_kill", "model_kill"} <= set(chaos.FAULTS) and set(chaos.QUICK) <= set(chaos.FAULTS)
    ns = chaos.build_parser().parse_args([])
    assert ns.faults.split(",") == ["ingress_kill", "tools_kill", "node_loss", "disconnect", "kernels_kill",
                                    "model_kill", "redis_restart", "slow_reader", "same_session", "lease_fence"]
    assert ns.freeze_max_s == 75.0
    assert ns.keep_work is False  # the cluster's work folder goes with the run unless asked for


def test_the_timeline_draws_every_attempt_and_replots_a_saved_run(tmp_path):
    import json

    import chaos

    def att(start, ft, end, outcome):
        return {"session_id": "s", "kind": "chat", "step": 0, "protocol": "http", "node": "n", "idem": "i",
                "start": start, "end": end, "first_token": ft, "outcome": outcome, "executed": False, "retry": 0}

    report = {"timeline": [att(1.0, 1.2, 2.0, "ok"), att(5.0, None, 9.0, "unavailable"),
                           att(6.0, 6.5, 7.0, "disconnected")], "fault_times": {"node_loss": 4.5},
              "faults": {"node_loss": {"in_flight": 1, "turns": 2, "failed": 1, "untyped": 0, "hangs": 0,
                                       "recovery_s": 2.5, "baseline_recovery_s": None}},
              "writes": {"lost": 0, "doubled": 0, "half_written": 0, "confirmed": 0, "ledger_entries": 0}}
    png = chaos.plot_timeline(report, tmp_path / "t.png")
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert chaos.plot_timeline({"timeline": []}, tmp_path / "none.png") is None
    saved = tmp_path / "chaos.json"
    saved.write_text(json.dumps(report))
    assert chaos.main(["--replot", str(saved), "--out", str(tmp_path / "re")]) == 0
    assert (tmp_path / "re" / "timeline.png").is_file()
    saved.write_text(json.dumps({"timeline": []}))
    assert chaos.main(["--replot", str(saved), "--out", str(tmp_path / "none")]) == 1


def test_a_node_that_fails_after_rejoining_is_replaced_again():
    import chaos

    class Cluster:
        def __init__(self, fails: int) -> None:
            self.fails, self.calls = fails, []

        def add_node(self, name):
            self.calls.append(("add", name))

        def remove_node(self, name):
            self.calls.append(("remove", name))

        def wait_ready(self, timeout_s, nodes):
            self.calls.append(("wait", nodes[0]))
            if self.fails:
                self.fails -= 1
                raise TimeoutError("unhealthy")

    c, detail = Cluster(fails=1), {"node": "cpu-2"}
    chaos.after("node_loss", c, detail, ready_timeout_s=1)
    assert c.calls == [("add", "cpu-2"), ("wait", "cpu-2"), ("remove", "cpu-2"), ("add", "cpu-2"), ("wait", "cpu-2")]
    assert detail["rejoins"] == 2
    stuck = Cluster(fails=9)
    with pytest.raises(TimeoutError):
        chaos.after("node_loss", stuck, {"node": "cpu-1"}, attempts=2, ready_timeout_s=1)
    assert [k for k, _ in stuck.calls].count("add") == 2
    idle = Cluster(fails=0)
    chaos.after("ingress_kill", idle, {})
    assert idle.calls == []


def test_a_session_read_back_is_whole_only_with_every_served_turn_numbered_and_none_a_checkpoint():
    import chaos

    def t(i, **meta):
        return {"index": i, "status": "ok", "meta": meta}

    assert chaos.stored_verdict([t(0), t(1)], served=2)["whole"] is True
    assert chaos.stored_verdict([t(0)], served=2)["whole"] is False  # a served turn was not stored
    assert chaos.stored_verdict([t(0), t(1), t(2)], served=2)["whole"] is False  # one stored that was not served
    gap = chaos.stored_verdict([t(0), t(2)], served=2)
    assert gap["contiguous"] is False and gap["whole"] is False
    cut = chaos.stored_verdict([t(0), t(1, checkpoint=True)], served=2)
    assert cut["checkpoints"] == 1 and cut["whole"] is False
    assert chaos.stored_verdict([], served=0) == {"stored": 0, "served": 0, "contiguous": True, "checkpoints": 0,
                                                   "whole": True}


def test_two_served_turns_of_one_session_overlap_only_when_the_second_streams_before_the_first_ends():
    import chaos

    one_after = (_a(0.0, 10.0, "ok", 1.0), _a(0.0, 20.0, "ok", 10.5))   # second's first token at 10.5 > 10.0
    assert chaos.overlapped(*one_after) is False
    both = (_a(0.0, 10.0, "ok", 1.0), _a(0.0, 20.0, "ok", 9.5))          # at 9.5, before the first ended
    assert chaos.overlapped(*both) is True and chaos.overlapped(*reversed(both)) is True
    edge = (_a(0.0, 10.0, "ok", 1.0), _a(0.0, 20.0, "ok", 10.0))         # exactly at the end: not an overlap
    assert chaos.overlapped(*edge) is False
    refused = (_a(0.0, 10.0, "ok", 1.0), _a(0.0, 0.5, "session_busy"))
    assert chaos.overlapped(*refused) is False


def test_probes_while_the_store_is_down_must_all_be_typed_refusals_with_retry_after():
    import chaos

    ok_http = {"protocol": "http", "status": 503, "code": "store_unavailable", "retry_after": "1"}
    ok_grpc = {"protocol": "grpc", "status": "UNAVAILABLE", "retry_after": "1"}
    assert chaos.probe_verdict([ok_http, ok_grpc]) is True
    assert chaos.probe_verdict([]) is False
    assert chaos.probe_verdict([{**ok_http, "status": 500}, ok_grpc]) is False  # an untyped 500
    assert chaos.probe_verdict([{**ok_http, "retry_after": None}]) is False     # no hint when to come back
    assert chaos.probe_verdict([{**ok_grpc, "status": "INTERNAL"}]) is False


def test_a_redis_restart_kills_probes_and_restarts_on_the_same_store_and_gcs_follows_with_gcs_ft(monkeypatch):
    import chaos

    calls = []

    class Redis:
        def crash(self):
            calls.append("crash")

        def start(self):
            calls.append("start")

    class Cluster:
        def __init__(self, gcs_ft):
            self.gcs_ft, self.redis = gcs_ft, Redis()

        def kill_gcs(self):
            calls.append("kill_gcs")

        def restart_gcs(self):
            calls.append("restart_gcs")

    class Load:
        def run_coro(self, coro, timeout):
            coro.close()
            calls.append("probe")
            return [{"protocol": "http", "status": 503, "retry_after": "1"}]

    monkeypatch.setattr(chaos.time, "sleep", lambda s: None)
    d = chaos._redis_restart(Cluster(False), Load(), down_s=5.0)
    assert calls == ["crash", "probe", "start"] and d["typed_while_down"] is True and "up_at" in d
    calls.clear()
    chaos._redis_restart(Cluster(True), Load(), down_s=5.0)
    assert calls == ["kill_gcs", "crash", "probe", "start", "restart_gcs"]


def test_recovery_after_a_downtime_counts_from_the_moment_the_store_came_back():
    f = Fault("redis_restart", 10.0, detail={"up_at": 15.0})
    attempts = [_a(10.5, 11.0, "store_unavailable"), _a(12.0, 18.0, "ok", 1.0), _a(16.0, 19.0, "ok", 1.0)]
    row = fault_row(f, attempts, t_end=60.0, baseline_ttft=1.0)
    assert row["recovery_s"] == 8.0                      # 18.0 - 10.0: any good turn after the fault
    assert row["detail"]["up_after_s"] == 5.0
    assert row["detail"]["recovery_after_up_s"] == 4.0   # 19.0 - 15.0: the first that started after it came back
    assert "up_at" not in row["detail"]


def test_confirmed_writes_are_counted_by_the_window_their_last_good_turn_started_in():
    import chaos

    def att(sid, start, outcome="ok"):
        return Attempt(sid, "write", 2, "http", "cpu-1", "k", start, end=start + 1, outcome=outcome)

    rows = [{"session": "a", "verdict": "ok"}, {"session": "b", "verdict": "ok"}, {"session": "c", "verdict": "none"},
            {"session": "d", "verdict": "ok"}]
    attempts = [att("a", 5.0), att("b", 12.0), att("b", 25.0, "store_unavailable"), att("c", 30.0), att("d", 20.0)]
    marks = [Fault("ingress_kill", 10.0), Fault("redis_restart", 20.0)]
    assert chaos.confirmed_by_window(rows, attempts, marks) == {"baseline": 1, "ingress_kill": 1, "redis_restart": 1}
    assert [r.get("window") for r in rows] == ["baseline", "ingress_kill", None, "redis_restart"]


def test_a_faults_own_clients_run_at_once_on_the_loads_loop_and_come_back_in_order():
    import asyncio
    import threading

    import chaos

    load = chaos.Load(None, workers=0, write_orders=[], turn_timeout_s=5.0)
    load.loop = asyncio.new_event_loop()
    t = threading.Thread(target=load.loop.run_forever, daemon=True)
    t.start()
    try:
        started = []

        async def one(i):
            started.append(i)
            await asyncio.sleep(0.01 * (3 - i))  # the last started ends first
            return {"client": i}

        assert load.each(one, 3) == [{"client": 0}, {"client": 1}, {"client": 2}]
        assert sorted(started) == [0, 1, 2]
    finally:
        load.loop.call_soon_threadsafe(load.loop.stop)
        t.join(5)
        load.loop.close()


@pytest.mark.parametrize(
    ("retry_after", "backoff", "expected"),
    [
        (None, 6.0, 6.0),            # no hint: the client's own backoff
        (1.0, 6.0, 6.0),             # a shorter hint: never sooner than the backoff
        (18.4, 6.0, 18.4),           # a dead holder's lease lapses in 18.4 s: wait for it
        (MAX_RETRY_PAUSE_S, 2.0, MAX_RETRY_PAUSE_S),
        (MAX_RETRY_PAUSE_S + 0.1, 2.0, MAX_RETRY_PAUSE_S),  # bounded
    ],
)
def test_a_retry_waits_its_backoff_or_the_refusals_retry_after_when_longer(retry_after, backoff, expected):
    a = _a(0.0, 1.0, "session_busy")
    a.retry_after = retry_after
    assert retry_pause(a, backoff) == expected


@pytest.mark.parametrize(("value", "expected"), [("19", 19.0), (2.5, 2.5), (None, None), ("soon", None), ([], None)])
def test_a_retry_after_value_is_read_as_seconds_or_nothing(value, expected):
    assert _seconds(value) == expected


def _s(sid, start, end, outcome, ft=None):
    a = _a(start, end, outcome, ft)
    a.session_id = sid
    return a


def _recovered(t0=10.0):
    """Five good turns after a fault at ``t0`` at the baseline's first token (1.0 s)."""
    return [_s(f"g{i}", t0 + 1 + i, t0 + 2 + i, "ok", 1.0) for i in range(5)]


def test_a_window_closes_after_its_minimum_once_recovered_and_settled():
    f = Fault("ingress_kill", 10.0)
    attempts = _recovered()
    assert not window_closed(f, attempts, {}, 10.0 + 19.9, 1.0, min_s=20, max_s=90)  # one step before min_s
    assert window_closed(f, attempts, {}, 10.0 + 20.0, 1.0, min_s=20, max_s=90)


def test_a_window_stays_open_while_first_token_is_slower_than_1_2x_the_baseline():
    f = Fault("model_kill", 10.0)
    slow = [_s(f"g{i}", 11 + i, 12 + i, "ok", 1.3) for i in range(5)]  # 1.3x the baseline
    assert not window_closed(f, slow, {}, 40.0, 1.0, min_s=20, max_s=90)
    assert window_closed(f, slow, {}, 100.0, 1.0, min_s=20, max_s=90)  # max_s closes it anyway
    assert not window_closed(f, slow, {}, 99.9, 1.0, min_s=20, max_s=90)
    assert not window_closed(f, _recovered(), {}, 40.0, None, min_s=20, max_s=90)  # no baseline: only max_s


def test_a_window_waits_for_the_sessions_the_fault_failed_to_settle():
    f = Fault("node_loss", 10.0)
    victim = [_s("v", 9.0, 10.5, "stream_cut"), _s("v", 12.0, 22.0, "session_busy")]  # sleeping before a retry
    before = [_s("w", 1.0, 5.0, "model_unavailable")]  # failed before the fault: not this window's
    attempts = _recovered() + victim + before
    assert not window_closed(f, attempts, {}, 40.0, 1.0, min_s=20, max_s=90)
    assert window_closed(f, attempts + [_s("v", 41.0, 43.0, "ok", 1.0)], {}, 44.0, 1.0, min_s=20, max_s=90)
    assert window_closed(f, attempts, {"v": {"gave_up": True}}, 40.0, 1.0, min_s=20, max_s=90)
    running = attempts + [_s("v", 41.0, 0.0, "running")]  # its retry is in flight: not settled yet
    assert not window_closed(f, running, {}, 42.0, 1.0, min_s=20, max_s=90)


def test_a_probe_of_the_window_leaves_the_faults_detail_alone():
    f = Fault("redis_restart", 10.0, detail={"up_at": 15.0})
    window_closed(f, _recovered(), {}, 40.0, 1.0, min_s=20, max_s=90)
    assert f.detail == {"up_at": 15.0}


def _t(turn_id, index, text):
    return {"turn_id": turn_id, "index": index, "user_text": text, "meta": {}}


def _fence_attempt(step, outcome, turn_id):
    a = _a(0.0, 1.0, outcome)
    a.step, a.turn_id = step, turn_id
    return a


def test_a_frozen_turn_refused_and_retried_once_is_neither_interleaved_lost_nor_doubled():
    from chaos import fence_verdict

    first, second = _fence_attempt(0, "lease_lost", "t_a"), _fence_attempt(1, "ok", "t_b")
    retry = _fence_attempt(0, "ok", "t_c")
    v = fence_verdict(first, second, [first, second, retry], [_t("t_b", 0, "second"), _t("t_c", 1, "first")])
    assert (v["refused_stale"], v["interleaved"], v["lost"], v["doubled"], v["whole"]) == (True, 0, 0, 0, True)


def test_a_stale_save_that_landed_beside_the_successors_is_interleaved():
    from chaos import fence_verdict

    first, second = _fence_attempt(0, "ok", "t_a"), _fence_attempt(1, "ok", "t_b")
    v = fence_verdict(first, second, [first, second], [_t("t_b", 0, "second"), _t("t_a", 1, "first")])
    assert (v["refused_stale"], v["interleaved"], v["lost"], v["doubled"]) == (False, 1, 0, 0)
    # saved while the successor held the lease, before its save: both holders saved all the same
    v = fence_verdict(first, second, [first, second], [_t("t_a", 0, "first"), _t("t_b", 1, "second")])
    assert v["interleaved"] == 1
    # only one of them stored: not interleaved
    v = fence_verdict(first, second, [first, second], [_t("t_b", 0, "second")])
    assert v["interleaved"] == 0


def test_a_turn_told_ok_but_not_stored_is_lost_and_a_request_stored_twice_is_doubled():
    from chaos import fence_verdict

    first, second = _fence_attempt(0, "lease_lost", "t_a"), _fence_attempt(1, "ok", "t_b")
    retry = _fence_attempt(0, "ok", "t_c")
    v = fence_verdict(first, second, [first, second, retry], [_t("t_b", 0, "second")])
    assert (v["lost"], v["doubled"], v["whole"]) == (1, 0, False)
    v = fence_verdict(first, second, [first, second, retry],
                      [_t("t_b", 0, "second"), _t("t_c", 1, "first"), _t("t_x", 2, "first")])
    assert (v["lost"], v["doubled"], v["whole"]) == (0, 1, False)
