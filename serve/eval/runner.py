"""Reaching the app for ``tandem eval``: starting it (or using ``--http``), one turn, its events, its meta.

:class:`LocalApps` starts one local Ray with Serve's proxies on free loopback ports
(:func:`serve.loadtest.deploy.start_local_cluster`), then deploys one app per pipeline
kind and domain from the strict config loader, each with a fresh session store and a
fresh world in the work folder (the telemetry directory is the work folder's too),
and deletes it before the next. :meth:`LocalApps.stop` shuts Serve and Ray down and
removes the ``/dev/shm`` ``psm_*`` / ``sem.mp-*`` / ``sem.loky-*`` files that this process tree had
mapped or open and that were not there before — never another session's. Never
``ray stop``.

:func:`run_turn` is one streamed turn over HTTP/SSE, timed at the client;
:class:`EventLog` reads the structured events (JSON lines) incrementally by turn id;
:func:`session_turns` reads a session's stored turns (with their metas) over the API.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["TurnResult", "run_turn", "EventLog", "session_turns", "app_overrides", "LocalApps",
           "shm_names", "descendants", "shm_held_by", "shm_held_here", "shutdown_local"]

REPO = Path(__file__).resolve().parents[2]
_SHM_PREFIXES = ("psm_", "sem.mp-", "sem.loky-")  # shared memory, multiprocessing and loky semaphores


@dataclass
class TurnResult:
    """One turn as the client saw it (times in ms from sending the request)."""

    events: list[dict[str, Any]]
    first_narration_ms: float | None = None
    first_reply_ms: float | None = None
    first_visible_ms: float | None = None
    e2e_ms: float = 0.0
    http_status: int = 200
    error: str | None = None

    @property
    def first_token_ms(self) -> float | None:
        """The first narration or reply delta, whichever came first."""
        xs = [x for x in (self.first_narration_ms, self.first_reply_ms) if x is not None]
        return min(xs) if xs else None

    @property
    def done(self) -> dict[str, Any]:
        return self.events[-1] if self.events and self.events[-1].get("type") == "done" else {}


def run_turn(http: str, session_id: str, text: str, *, user_id: str | None = None, timeout_s: float = 300.0,
             api_key: str | None = None, client: Any = None,
             perception: tuple[str, str] | None = None) -> TurnResult:
    """POST one turn with ``Accept: text/event-stream``; every event and the client-side timings.

    ``client`` is an ``httpx.Client`` to reuse (its connection pool); a new one otherwise. ``perception``:
    the turn's (intent, sub-intent) given instead of perceived (an app deployed with ``oracle_perception``).
    """
    import httpx

    body: dict[str, Any] = {"text": text}
    if user_id:
        body["user_id"] = user_id
    if perception is not None:
        body["perception"] = {"intent": perception[0], "sub_intent": perception[1]}
    headers = {"Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    res = TurnResult(events=[])
    t0 = time.perf_counter()
    own = client is None
    client = client or httpx.Client()
    try:
        with client.stream("POST", f"{http}/v1/sessions/{session_id}/turns", json=body, headers=headers,
                           timeout=timeout_s) as r:
            res.http_status = r.status_code
            if r.status_code != 200:
                res.error = f"http_{r.status_code}: {r.read()[:200]!r}"
            else:
                for line in r.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    ev = json.loads(line[6:])
                    ms = (time.perf_counter() - t0) * 1000.0
                    kind = ev.get("type")
                    if kind == "narration.delta" and res.first_narration_ms is None:
                        res.first_narration_ms = ms
                    elif kind == "reply.delta" and res.first_reply_ms is None:
                        res.first_reply_ms = ms
                    if kind not in ("done", "error") and res.first_visible_ms is None:
                        res.first_visible_ms = ms
                    res.events.append(ev)
    except httpx.HTTPError as exc:
        res.error = f"{type(exc).__name__}: {exc}"[:200]
    finally:
        if own:
            client.close()
    res.e2e_ms = (time.perf_counter() - t0) * 1000.0
    if res.error is None and not res.done:
        res.error = "no_done_event"
    return res


class EventLog:
    """The structured events under a telemetry directory, read incrementally and grouped by turn id."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._offsets: dict[Path, int] = {}
        self.by_turn: dict[str, list[dict[str, Any]]] = {}

    def _scan(self) -> None:
        if self.directory is None or not self.directory.is_dir():
            return
        for f in sorted(self.directory.glob("events-*.jsonl")):
            start = self._offsets.get(f, 0)
            with f.open("rb") as fh:
                fh.seek(start)
                data = fh.read()
            end = data.rfind(b"\n") + 1  # a partly written last line waits for the next scan
            self._offsets[f] = start + end
            for raw in data[:end].splitlines():
                try:
                    e = json.loads(raw)
                except ValueError:
                    continue
                tid = e.get("turn_id")
                if isinstance(tid, str):
                    self.by_turn.setdefault(tid, []).append(e)

    def turn(self, turn_id: str, *, wait_s: float = 10.0) -> list[dict[str, Any]]:
        """The events of one turn in file order, waiting (up to ``wait_s``) for its ``turn.end``."""
        deadline = time.monotonic() + wait_s
        while True:
            self._scan()
            got = self.by_turn.get(turn_id, [])
            if self.directory is None or any(e.get("kind") == "turn.end" for e in got) or time.monotonic() > deadline:
                return sorted(got, key=lambda e: e.get("ts", 0.0))
            time.sleep(0.2)


def session_turns(http: str, session_id: str, *, api_key: str | None = None,
                  client: Any = None) -> list[dict[str, Any]]:
    """``GET /v1/sessions/{id}``: the stored turns with their metas (empty on any error)."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = (client or httpx).get(f"{http}/v1/sessions/{session_id}", headers=headers, timeout=30)
        return list(r.json().get("turns") or []) if r.status_code == 200 else []
    except (httpx.HTTPError, ValueError):
        return []


def app_overrides(kind: str, domain: str, base_pipeline: dict[str, Any], work: Path, tag: str,
                  *, world_seed: int, dataset: str | None = None, oracle_perception: bool = False) -> dict[str, Any]:
    """The app args overridden for one (kind, domain): fresh store and world, telemetry, the pipeline section.

    The pipeline section keeps the shared decoding bounds (reply tokens, temperature,
    seed, deadline) of the base profile; a kind other than the base's gets its own
    defaults for everything else (``serve.config.merge_args`` replaces the section).
    """
    shared = {k: base_pipeline[k] for k in ("max_reply_tokens", "temperature", "seed", "turn_deadline_s",
                                            "max_text_chars") if k in base_pipeline}
    pipeline = dict(base_pipeline) if base_pipeline.get("kind") == kind else {"kind": kind, **shared}
    pipeline["kind"] = kind
    if oracle_perception:  # evaluation only: the turn takes the labels each request carries
        pipeline["oracle_perception"] = True
    return {
        "store": {"kind": "sqlite", "path": str(work / f"{tag}-sessions.db")},
        "telemetry": {"jsonl_dir": str(work / "telemetry")},
        "pipeline": pipeline,
        # resettable: every whole tau2 task starts from the seeded world, as tau2's own runs do
        "domain": {"name": domain, "seed": world_seed, "world_path": str(work / f"{tag}-world.db"),
                   "resettable": True, **({"dataset": dataset} if dataset else {})},
    }


def shm_names() -> set[str]:
    try:
        return {p for p in os.listdir("/dev/shm") if p.startswith(_SHM_PREFIXES)}
    except OSError:
        return set()


def descendants(root: int) -> set[int]:
    """``root`` and every process below it (from /proc: Ray's head, workers and engines)."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
                parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    out, frontier = {root}, [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in out]
        out.update(kids)
        frontier += kids
    return out


def shm_held_by(pids: set[int]) -> set[str]:
    """The /dev/shm psm_* / sem.mp-* / sem.loky-* names these processes have mapped or open."""
    held: set[str] = set()
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                if "/dev/shm/" in line:
                    held.add(line.split("/dev/shm/", 1)[1].split()[0])
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("/dev/shm/"):
                    held.add(target[len("/dev/shm/"):].split()[0])
        except OSError:
            continue
    return {h for h in held if h.startswith(_SHM_PREFIXES)}


def shm_held_here() -> set[str]:
    """The shm files this process and every process below it hold now (snapshot them while a process that
    may be killed later — an engine restarted, a fault — still holds its own)."""
    return shm_held_by(descendants(os.getpid()))


def shutdown_local(held: set[str], before: set[str]) -> int:
    """Shut this process's Serve and Ray down, then remove the shm files its tree held
    (``held``) that were not there before it started (``before``). Returns how many."""
    import ray
    from ray import serve

    try:
        serve.shutdown()
    except Exception as exc:  # teardown must go on
        print(f"serve.shutdown: {exc}", file=sys.stderr)
    ray.shutdown()
    time.sleep(1.5)
    removed = 0
    for name in (held & shm_names()) - before:
        try:
            os.unlink(os.path.join("/dev/shm", name))
            removed += 1
        except OSError:
            pass
    return removed


@dataclass
class LocalApps:
    """One local Ray for the whole run; one app at a time (see module docstring)."""

    config: Path
    work: Path
    num_cpus: float | None = None
    deploy_timeout_s: float = 900.0
    http: str = ""
    started: bool = False
    shm_before: set[str] = field(default_factory=set)
    held: set[str] = field(default_factory=set)
    app_name: str = ""

    def deploy(self, overrides: dict[str, Any], tag: str) -> float:
        """Write, validate (strictly) and deploy one app; returns the seconds until it was ready."""
        import yaml

        from serve.config import load_serve_file, merge_args

        raw = yaml.safe_load(self.config.read_text())
        entry = raw["applications"][0]
        entry["args"] = merge_args(entry["args"], overrides)
        path = self.work / f"{tag}.yaml"
        path.write_text(yaml.safe_dump(raw))
        sf = load_serve_file(path)
        if not self.started:
            from serve.loadtest.deploy import start_local_cluster

            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
            self.shm_before = shm_names()
            self.started = True
            self.http, _ = start_local_cluster(sf, self.num_cpus, self.work)
        from serve.loadtest.deploy import deploy_app

        self.app_name = sf.applications[0].name
        ready = deploy_app(sf, self.http, self.deploy_timeout_s)
        self.snapshot_shm()
        return ready

    def snapshot_shm(self) -> None:
        self.held |= shm_held_here()

    def _tools(self, method: str, *args: Any, wait_s: float = 60.0) -> Any:
        """Call the running app's ToolsServer; a handle that still routes to the app deleted before it (the same
        app name is deployed again for each kind) answers ``DeploymentUnavailableError`` until its router
        hears of the new replicas: asked again, bounded."""
        from ray import serve
        from ray.serve.exceptions import DeploymentUnavailableError

        deadline = time.monotonic() + wait_s
        while True:
            h = serve.get_deployment_handle("ToolsServer", app_name=self.app_name)
            try:
                return getattr(h, method).remote(*args).result(timeout_s=wait_s)
            except DeploymentUnavailableError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)

    def reset_world(self) -> None:
        """The running app's world back to its seed (the eval's apps are deployed ``domain.resettable``); an app
        with no tools deployment (the ``prompting`` kind) has no world to reset."""
        try:
            self._tools("reset_world")
        except KeyError as exc:  # Serve: the deployment "does not exist" in this app
            if "does not exist" not in str(exc):
                raise

    def entity(self, kind: str, key: str) -> dict[str, Any] | None:
        """One entity of the running app's world, as JSON (``None`` when absent)."""
        return self._tools("entity", kind, key)

    def delete(self) -> None:
        if not self.app_name:
            return
        from ray import serve

        self.snapshot_shm()
        try:
            serve.delete(self.app_name)
        except Exception as exc:  # keep evaluating the next pipeline
            print(f"serve.delete: {exc}", file=sys.stderr)
        self.app_name = ""

    def stop(self) -> int:
        """Shut Serve and Ray down; remove the shm files our tree held. Returns how many were removed."""
        if not self.started:
            return 0
        self.snapshot_shm()
        removed = shutdown_local(self.held, self.shm_before)
        self.started = False
        return removed
