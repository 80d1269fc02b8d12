"""``tandem run``'s clean-up without Ray (``serve/launch.py`` ``Leftovers``, ``serve/cli.py`` ``cmd_run``): real
child processes and real files in ``/dev/shm``; the run on the real engine is
``tests/integration/test_run_leaves_nothing.py``."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from serve import cli
from serve import launch as mod

pytestmark = pytest.mark.skipif(not os.path.isdir("/dev/shm") or not os.path.isdir("/proc"), reason="Linux only")

HOLD = """
import os, sys, time
f = open(os.path.join("/dev/shm", sys.argv[1]), "w")  # held open, as an engine holds its segment
print("ready", flush=True)
time.sleep(120)
"""


def _child(name: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD, name], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def test_a_file_whose_holder_died_and_a_process_that_outlived_ray_are_swept() -> None:
    tag = uuid.uuid4().hex[:8]
    engine, other, before = f"psm_t{tag}a", f"psm_t{tag}b", f"psm_t{tag}c"
    open(os.path.join("/dev/shm", before), "w").close()  # there before the run: never ours
    left = mod.Leftovers()
    died = _child(engine)
    survivor = _child(f"sem.mp-t{tag}")
    open(os.path.join("/dev/shm", other), "w").close()  # appears during the run, held by nobody of ours
    try:
        left.snapshot()
        assert {engine, f"sem.mp-t{tag}"} <= left.shm_held and other not in left.shm_held
        assert {died.pid, survivor.pid} <= set(left.procs)
        # this test process has other children (a test server of another test, an xdist worker's helpers):
        # the sweep under test must touch only what this test started
        left.procs = {pid: t for pid, t in left.procs.items() if pid in (died.pid, survivor.pid)}
        left.shm_held = {n for n in left.shm_held if tag in n}
        died.kill()  # the engine dies (a Ctrl-C reached it): its file stays, with no holder
        died.wait()
        stopped, removed = left.sweep(grace_s=5.0)
        assert survivor.wait(timeout=10) is not None  # stopped by the sweep
        assert stopped == 1 and removed == 2
        names = set(os.listdir("/dev/shm"))
        assert engine not in names and f"sem.mp-t{tag}" not in names
        assert {other, before} <= names  # neither was held by the run
    finally:
        for p in (died, survivor):
            if p.poll() is None:
                p.kill()
                p.wait()
        for n in (engine, other, before, f"sem.mp-t{tag}"):
            if os.path.exists(os.path.join("/dev/shm", n)):
                os.unlink(os.path.join("/dev/shm", n))


def test_a_reused_pid_is_never_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    left = mod.Leftovers()
    left.procs = {os.getpid(): "0"}  # this pid, remembered with another start time: another process now
    killed: list[tuple[int, int]] = []
    monkeypatch.setattr(mod.os, "kill", lambda pid, sig: killed.append((pid, sig)))
    assert left.alive() == [] and left.sweep(grace_s=0.0) == (0, 0) and killed == []


def test_a_zombie_is_not_alive() -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # exited, not yet reaped: a zombie
        with open(f"/proc/{p.pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.05)
    assert mod._started(p.pid) is None
    p.wait()


def _ns(**kw: object) -> argparse.Namespace:
    base = dict(cluster=0, config="configs/embedded.yaml", observe=False, num_cpus=None, metrics_port=None,
                http_port=None, grpc_port=None, ready_timeout=5.0, no_example=True)
    return argparse.Namespace(**{**base, **kw})


class _Fake:
    """start_app and the readiness waits of a run that comes up at once (no Ray)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, on_start=None, on_serving=None) -> None:
        self.shutdowns: list[object] = []
        monkeypatch.setattr(cli, "start_app", self.start)
        monkeypatch.setattr(cli, "wait_ready", lambda url, timeout_s: 0.0)
        monkeypatch.setattr(cli, "_shutdown", lambda left, phoenix: self.shutdowns.append(left))
        import serve.deploy

        monkeypatch.setattr(serve.deploy, "wait_app_running", lambda app, timeout_s: None)
        monkeypatch.setattr(mod.Leftovers, "snapshot", lambda self: None)
        self.on_start, self.on_serving = on_start, on_serving
        monkeypatch.setattr(cli, "_print", self.print)

    def start(self, *a: object, **kw: object) -> dict:
        if self.on_start:
            self.on_start()
        return {"http": "http://x", "grpc": "x", "openai": "x", "telemetry": "x", "app": "tandem", "metrics": None}

    def print(self, msg: str) -> None:
        if "serving; press Ctrl-C" in msg and self.on_serving:
            self.on_serving()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_serving_shuts_down_once_and_exits_0(monkeypatch: pytest.MonkeyPatch, sig: int) -> None:
    old = signal.getsignal(sig)
    fake = _Fake(monkeypatch, on_serving=lambda: os.kill(os.getpid(), sig))
    assert cli.cmd_run(_ns()) == 0
    assert len(fake.shutdowns) == 1
    assert signal.getsignal(sig) is old  # the handlers are given back


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_starting_interrupts_the_start_and_cleans_up(monkeypatch: pytest.MonkeyPatch, sig: int) -> None:
    def slow_start() -> None:
        os.kill(os.getpid(), sig)
        time.sleep(30)  # an engine that takes minutes: the signal must not wait for it
        raise AssertionError("the start was not interrupted")

    fake = _Fake(monkeypatch, on_start=slow_start)
    assert cli.cmd_run(_ns()) == 130  # the KeyboardInterrupt the handler raised ended the start
    assert len(fake.shutdowns) == 1


def test_sigterm_while_serving_is_ours_though_the_start_replaced_the_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    """ray.init installs its own SIGTERM handler in the driver (``sys.exit``): the run sets its own again."""
    def ray_like_start() -> None:
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))

    fake = _Fake(monkeypatch, on_start=ray_like_start, on_serving=lambda: os.kill(os.getpid(), signal.SIGTERM))
    assert cli.cmd_run(_ns()) == 0 and len(fake.shutdowns) == 1
