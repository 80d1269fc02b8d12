"""``tandem run`` on the real engine leaves nothing behind: after Ctrl-C (SIGINT to its whole process group, as a
terminal sends it — Ray's processes and the engine receive it too) or SIGTERM (to the main process, as a process
manager or ``kill`` sends it), no shared-memory file its tree held is left in ``/dev/shm``, no new orphan
``psm_*`` / ``sem.mp-*`` file appeared, and no process of its tree survives.

The run is ``tandem run`` itself, as a subprocess, on free ports, with its store, world and telemetry in a
temporary folder; the shared cluster is shut down first (``own_ray``)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from .conftest import EMBEDDED, REPO, free_port

pytestmark = [pytest.mark.integration, pytest.mark.own_ray]

READY_S = 600.0
EXIT_S = 180.0
KINDS = ("psm_", "sem.mp-")


def _config(tmp: Path) -> Path:
    from serve.config import load_serve_file, merge_args

    raw = yaml.safe_load(EMBEDDED.read_text())
    entry = raw["applications"][0]
    entry["args"] = merge_args(entry["args"], {
        "store": {"kind": "sqlite", "path": str(tmp / "sessions.db")},
        "telemetry": {"jsonl_dir": str(tmp / "telemetry")},
        "domain": {"world_path": str(tmp / "world.db")},
    })
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    load_serve_file(path)  # strictly valid, as tandem run will read it
    return path


def _started(pid: int) -> str | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[19] if fields[0] != "Z" else None


def _held_by_anyone() -> set[str]:
    from serve.eval.runner import shm_held_by

    return shm_held_by({int(d) for d in os.listdir("/proc") if d.isdigit()})


def _orphans(before: set[str]) -> set[str]:
    """psm_* / sem.mp-* files that appeared since ``before`` and that no live process holds (a leak, not a file
    of a run that is still going)."""
    from serve.eval.runner import shm_names

    new = {n for n in shm_names() - before if n.startswith(KINDS)}
    return new - _held_by_anyone() if new else set()


def _run_and_stop(tmp: Path, send: str) -> dict:
    from serve.eval.runner import descendants, shm_held_by, shm_names

    before = shm_names()
    cmd = [str(Path(sys.executable).parent / "tandem"), "run", str(_config(tmp)), "--no-example",
           "--http-port", str(free_port()), "--grpc-port", str(free_port()), "--metrics-port", str(free_port()),
           "--num-cpus", "4"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env)
    lines: queue.Queue[str] = queue.Queue()
    log: list[str] = []
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    deadline = time.monotonic() + READY_S
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"tandem run not serving after {READY_S:.0f} s:\n{''.join(log[-40:])}") from None
            log.append(line)
            if "serving; press Ctrl-C to stop" in line:
                break
            assert proc.poll() is None, f"tandem run exited early:\n{''.join(log[-40:])}"
        time.sleep(2.0)
        tree = descendants(proc.pid)
        held = {n for n in shm_held_by(tree) if n.startswith(KINDS)}
        procs = {pid: _started(pid) for pid in tree}
        assert held, "the engine's tree holds no psm_* / sem.mp-* file: nothing to check"
        if send == "SIGINT":  # Ctrl-C in a terminal: the whole foreground process group
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGTERM)
        rc = proc.wait(timeout=EXIT_S)
    finally:
        if proc.poll() is None:  # the test failed: leave nothing of ours behind either
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    time.sleep(1.0)
    while not lines.empty():
        log.append(lines.get())
    survivors = sorted(pid for pid, started in procs.items() if started is not None and _started(pid) == started)
    return {"rc": rc, "held": held, "left": held & shm_names(), "orphans": _orphans(before),
            "survivors": survivors, "procs": len(procs), "log": "".join(log[-30:])}


@pytest.mark.parametrize("send", ["SIGINT", "SIGTERM"])
def test_tandem_run_leaves_no_shm_file_and_no_process(tmp_path: Path, send: str) -> None:
    r = _run_and_stop(tmp_path, send)
    assert r["rc"] == 0, r["log"]
    assert r["procs"] > 3  # Ray's GCS, raylet, workers and the engine were below it
    assert r["left"] == set(), f"shm files of the run still in /dev/shm: {r['left']}\n{r['log']}"
    assert r["orphans"] == set(), f"new unheld shm files: {r['orphans']}\n{r['log']}"
    assert r["survivors"] == [], f"processes of the run still alive: {r['survivors']}\n{r['log']}"
    assert "shared-memory file(s) removed" in r["log"]
