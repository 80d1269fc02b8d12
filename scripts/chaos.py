"""Chaos on the production topology in miniature: faults one at a time under steady load, nothing lost.

Starts ``configs/cluster-dev.yaml`` on a multi-node Ray cluster on this machine (serve/cluster.py: a head
with no work, a model node, CPU nodes with one ingress replica each, proxies on every node, Redis), runs a
steady, bounded load of multi-turn sessions over HTTP/SSE and gRPC through the CPU nodes' proxies (some
sessions end in a confirmed write: an order cancelled after an explicit yes), and injects one fault at a
time, each followed by a recovery window:

    ingress_kill     ray.kill on an ingress replica while turns are in flight on it
    tools_kill       ray.kill on the tools replica (it owns the world and the write ledger)
    kernels_kill     ray.kill on the rule-kernels replica (Φ / Ψ / tiers of every turn)
    model_kill       ray.kill on the model replica mid-stream (the engine restarts on the model node)
    node_loss        a CPU node's raylet and every worker on it killed; the node added back afterwards
    disconnect       clients that go away mid-stream (SSE and gRPC); the session must take its next turn
    gcs_restart      (--gcs-ft) the head's GCS killed and restarted on the same Redis
    redis_restart    Redis (session store, leases, rate limits) killed with SIGKILL and started again on the
                     same AOF directory; probes while it is down must get a typed 503 + Retry-After
    slow_reader      clients (SSE and gRPC) that read one event every --slow-read-s: their turn finishes
                     whole, their session takes its next turn, the others' turns keep flowing
    same_session     two turns of one session sent at once through two nodes' proxies: one runs, the other
                     waits for it or is refused (session_busy); the stored turns never interleave
    lease_fence      an ingress replica frozen (SIGSTOP) in the middle of a turn, past its lease's TTL, while a
                     second turn of the same session through the other node takes the lease and is saved; then
                     thawed (SIGCONT): the frozen turn's save carries a stale fencing token and is refused
                     (lease_lost), its client's retry is stored once — 0 interleaved, lost or doubled turns

A failed turn is retried (at most three times, same ``Idempotency-Key``) as a client would, never sooner than
the refusal's Retry-After (a ``session_busy`` whose holder died says when its lease lapses). A recovery
window lasts ``--window-s`` at most; it closes after ``--min-window-s`` once first-token p50 is back within
1.2x of the baseline and every session the fault failed has settled (``detail.window_s``). For each fault:
``in_flight`` (turns running when it hit), ``failed`` (by error code: the error table's rows, or
``untyped`` / ``stream_cut`` / ``connect_error`` for what reached the client without our typed error),
``untyped``, ``hangs`` (client deadline passed), ``recovery_s`` (fault → end of the first good turn that
started after it), ``baseline_recovery_s`` (fault → the first 5 good turns' first-token p50 back within 1.2x
of the baseline). After the run the writes are audited from three places — the sessions in the store,
the tools' write ledger and the world's entities — as ``writes.{lost, doubled, half_written}``.

    python scripts/chaos.py --quick            # one node loss + one ingress kill, the write audit
    python scripts/chaos.py --faults ingress_kill,tools_kill,node_loss,disconnect --out results/

Writes ``<out>/chaos.json`` and ``<out>/timeline.png`` (every attempt's first token or end against its
start, by outcome, the faults marked; ``--replot`` redraws a saved run) and prints a table. Runs start Ray: keep them small on a shared box.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FAULTS = ("ingress_kill", "tools_kill", "node_loss", "disconnect", "kernels_kill", "model_kill", "redis_restart",
          "slow_reader", "same_session", "lease_fence", "gcs_restart")
QUICK = ("node_loss", "ingress_kill")
# gRPC status codes our error table maps to (pipelines/errors.py): anything else reached the client untyped.
TYPED_GRPC = {"INVALID_ARGUMENT", "UNAUTHENTICATED", "NOT_FOUND", "ABORTED", "PERMISSION_DENIED", "INTERNAL",
              "DEADLINE_EXCEEDED", "FAILED_PRECONDITION", "UNAVAILABLE", "RESOURCE_EXHAUSTED"}
UNTYPED = {"untyped", "stream_cut", "connect_error"}


@dataclass
class Attempt:
    session_id: str
    kind: str  # chat | write
    step: int
    protocol: str
    node: str
    idem: str
    start: float
    end: float = 0.0
    first_token: float | None = None
    outcome: str = "running"  # ok | <error code> | untyped | stream_cut | connect_error | hang | disconnected
    executed: bool = False
    retry: int = 0
    retry_after: float | None = None  # the refusal's Retry-After (HTTP header, gRPC trailer, stream event)
    turn_id: str | None = None  # the turn the server ran for it (its done event)


# A client's pause before retrying a failed turn: its own backoff, or longer when the refusal says so.
MAX_RETRY_PAUSE_S = 60.0


def retry_pause(a: Attempt, backoff_s: float) -> float:
    """Seconds to wait before the next try: ``backoff_s``, or the refusal's Retry-After when that is longer
    (a dead holder's lease tells when it lapses), at most ``MAX_RETRY_PAUSE_S``."""
    return min(MAX_RETRY_PAUSE_S, max(backoff_s, a.retry_after or 0.0))


def _seconds(value: Any) -> float | None:
    """A Retry-After value (header, trailer or event field) as seconds; None when absent or not a number."""
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


@dataclass
class Fault:
    name: str
    t: float
    in_flight: int = 0
    detail: dict[str, Any] = field(default_factory=dict)


# -- the client side -------------------------------------------------------------------------------------

def _http_outcome(status: int, body: bytes) -> str:
    try:
        err = json.loads(body).get("error") or {}
        code = err.get("code")
        return str(code) if code else "untyped"
    except (ValueError, AttributeError):
        return "untyped"


class Load:
    """``workers`` sessions at a time, each a scripted multi-turn session through a live CPU node's proxy."""

    def __init__(self, cluster: Any, *, workers: int, write_orders: list[tuple[str, str]], turn_timeout_s: float,
                 seed: int = 0, write_every: int = 2) -> None:
        self.cluster = cluster
        self.workers = workers
        self.write_orders = list(write_orders)  # (email, order id), each used by one session at most
        self.turn_timeout_s = turn_timeout_s
        self.rng = random.Random(seed)
        self.attempts: list[Attempt] = []
        self.sessions: dict[str, dict[str, Any]] = {}
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.n = 0
        self.write_every = max(1, write_every)  # every n-th session ends in a write (while orders last)

    # endpoints: the live CPU nodes' proxies (a client behind a load balancer sees only live ones)
    def _endpoint(self) -> tuple[str, Any]:
        live = [(k, v) for k, v in sorted(self.cluster.endpoints.items())
                if k.startswith("cpu") and k in self.cluster.ready]
        return live[self.rng.randrange(len(live))] if live else ("head", self.cluster.endpoints["head"])

    def in_flight(self) -> list[Attempt]:
        with self.lock:
            return [a for a in self.attempts if a.outcome == "running"]

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def join(self, timeout: float) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout)

    def _run(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._main())

    async def _main(self) -> None:
        await asyncio.gather(*(self._worker(i) for i in range(self.workers)))

    def _script(self, kind: str, order: tuple[str, str] | None) -> list[str]:
        if kind == "write" and order is not None:
            email, oid = order
            # the reason in the user's words: a cancellation's reason is asked, never picked for them
            return [f"Hi, my email is {email}", f"Please cancel order {oid}, I no longer need it.", "yes"]
        return ["Hi! What can you help me with?", "Where is my order?", "Thanks, that is all."]

    async def _worker(self, w: int) -> None:
        protocol = "http" if w % 2 == 0 else "grpc"
        while not self.stop.is_set():
            with self.lock:
                self.n += 1
                order = self.write_orders.pop(0) if self.n % self.write_every == 1 % self.write_every and self.write_orders else None
            kind = "write" if order else "chat"
            sid = f"chaos-{kind}-{uuid.uuid4().hex[:10]}"
            self.sessions[sid] = {"kind": kind, "order": order[1] if order else None, "protocol": protocol,
                                  "done": False}
            for step, text in enumerate(self._script(kind, order)):
                if self.stop.is_set() and step == 0:
                    break
                idem = uuid.uuid4().hex
                for retry in range(4):
                    a = await self._turn(sid, kind, step, text, idem, protocol, retry)
                    if a.outcome == "ok":
                        break
                    await asyncio.sleep(retry_pause(a, 2.0 + retry * 4.0))
                else:
                    self.sessions[sid]["gave_up"] = True  # the session gives up (counted in its attempts)
                    break
            else:
                self.sessions[sid]["done"] = True

    async def _turn(self, sid: str, kind: str, step: int, text: str, idem: str, protocol: str,
                    retry: int, *, node: str | None = None, **client: Any) -> Attempt:
        """One attempt through a live CPU node's proxy (or ``node``'s); ``client``: the readers' options."""
        node, ep = (node, self.cluster.endpoints[node]) if node else self._endpoint()
        a = Attempt(sid, kind, step, protocol, node, idem, time.monotonic(), retry=retry)
        with self.lock:
            self.attempts.append(a)
        try:
            async with asyncio.timeout(self.turn_timeout_s):
                if protocol == "http":
                    await self._http(a, ep.http, text, **client)
                else:
                    await self._grpc(a, ep.grpc, text, **client)
        except TimeoutError:
            a.outcome = "hang"
        a.end = time.monotonic()
        return a

    async def _until_ok(self, sid: str, kind: str, step: int, text: str, protocol: str, *, tries: int = 3,
                        wait_s: float = 3.0) -> Attempt:
        """A turn retried as a client would (same Idempotency-Key) while a typed refusal says to."""
        a = await self._turn(sid, kind, step, text, uuid.uuid4().hex, protocol, 0)
        for retry in range(1, tries):
            if a.outcome == "ok":
                break
            await asyncio.sleep(retry_pause(a, wait_s))
            a = await self._turn(sid, kind, step, text, a.idem, protocol, retry)
        return a

    async def _http(self, a: Attempt, base: str, text: str, *, drop_after_first: bool = False,
                    read_delay_s: float = 0.0) -> None:
        import httpx

        headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {self.cluster.api_key}",
                   "Idempotency-Key": a.idem}
        try:
            async with httpx.AsyncClient(timeout=httpx.Timeout(self.turn_timeout_s, connect=5.0)) as c:
                async with c.stream("POST", f"{base}/v1/sessions/{a.session_id}/turns", json={"text": text},
                                    headers=headers) as r:
                    if r.status_code != 200:
                        a.outcome = _http_outcome(r.status_code, await r.aread())
                        a.retry_after = _seconds(r.headers.get("retry-after"))
                        return
                    from serve.loadtest.clients import SSEParser

                    parser, done = SSEParser(), None
                    async for chunk in r.aiter_text():
                        if read_delay_s:
                            await asyncio.sleep(read_delay_s)
                        for _name, data in parser.feed(chunk):
                            ev = json.loads(data)
                            if ev["type"] in ("narration.delta", "reply.delta") and a.first_token is None:
                                a.first_token = time.monotonic()
                                if drop_after_first:
                                    a.outcome = "disconnected"
                                    return
                            if ev["type"] == "error":
                                a.outcome = str(ev.get("code") or "untyped")
                                a.retry_after = _seconds(ev.get("retry_after_s"))
                            if ev["type"] == "done":
                                done = ev
                                a.turn_id = ev.get("turn_id")
                    if done is None:
                        a.outcome = "stream_cut" if a.outcome == "running" else a.outcome
                    elif a.outcome == "running":
                        a.outcome = "ok" if done.get("status") in ("ok", "fallback") else f"status_{done.get('status')}"
        except httpx.ConnectError:
            a.outcome = "connect_error"
        except httpx.HTTPError:
            a.outcome = "stream_cut" if a.outcome == "running" else a.outcome

    async def _grpc(self, a: Attempt, target: str, text: str, *, drop_after_first: bool = False,
                    read_delay_s: float = 0.0) -> None:
        import grpc

        from serve.grpc_codec import proto_to_event
        from serve.protos import assistant_pb2 as pb
        from serve.protos import assistant_pb2_grpc

        md = (("application", "tandem"), ("authorization", f"Bearer {self.cluster.api_key}"),
              ("idempotency-key", a.idem))
        async with grpc.aio.insecure_channel(target) as ch:
            stub = assistant_pb2_grpc.AssistantStub(ch)
            call = stub.StreamTurn(pb.TurnRequest(session_id=a.session_id, text=text), metadata=md,
                                   timeout=self.turn_timeout_s)
            done = None
            try:
                async for msg in call:
                    if read_delay_s:
                        await asyncio.sleep(read_delay_s)
                    ev = proto_to_event(msg).model_dump(mode="json")
                    if ev["type"] in ("narration.delta", "reply.delta") and a.first_token is None:
                        a.first_token = time.monotonic()
                        if drop_after_first:
                            call.cancel()
                            a.outcome = "disconnected"
                            return
                    if ev["type"] == "error":
                        a.outcome = str(ev.get("code") or "untyped")
                        a.retry_after = _seconds(ev.get("retry_after_s"))
                    if ev["type"] == "done":
                        done = ev
                        a.turn_id = ev.get("turn_id")
            except grpc.aio.AioRpcError as exc:
                name = exc.code().name
                trailer = _seconds(dict(exc.trailing_metadata() or ()).get("retry-after"))
                a.retry_after = trailer if trailer is not None else a.retry_after  # else the stream's error event
                if name == "UNAVAILABLE" and a.first_token is None and "connect" in (exc.details() or "").lower():
                    a.outcome = "connect_error"
                elif name == "DEADLINE_EXCEEDED":
                    a.outcome = "hang"
                else:
                    a.outcome = f"grpc_{name.lower()}" if name in TYPED_GRPC else "untyped"
                return
            if done is None:
                a.outcome = "stream_cut" if a.outcome == "running" else a.outcome
            elif a.outcome == "running":
                a.outcome = "ok" if done.get("status") in ("ok", "fallback") else f"status_{done.get('status')}"

    def each(self, one: Any, n: int) -> list[Any]:
        """``one(0) … one(n-1)`` at once on the load's loop (a fault's own clients); their results in order."""

        async def all_() -> list[Any]:
            return list(await asyncio.gather(*(one(i) for i in range(n))))

        return self.run_coro(all_(), timeout=self.turn_timeout_s * 5)

    def run_coro(self, coro: Any, timeout: float) -> Any:
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


# -- faults ----------------------------------------------------------------------------------------------

@dataclass
class Replica:
    name: str
    node_id: str


def _replicas(deployment: str) -> list[Replica]:
    """The live replica actors of ``deployment``, from the GCS (no dashboard needed)."""
    from ray._private.state import actors

    out = []
    for a in actors().values():
        name = a.get("Name") or ""
        # "LLMServer:" names every model deployment (LLMServer:<model_id>); other names are exact
        here = f"#{deployment}" in name if deployment.endswith(":") else f"#{deployment}#" in name
        if a.get("State") == "ALIVE" and name.startswith("SERVE_REPLICA::") and here:
            out.append(Replica(name, str((a.get("Address") or {}).get("NodeID") or "")))
    return sorted(out, key=lambda r: r.name)


def _kill_replica(deployment: str, load: Load, prefer_busy: bool = True) -> dict[str, Any]:
    import ray

    reps = _replicas(deployment)
    if not reps:
        raise RuntimeError(f"no live {deployment} replica")
    # mid-turn: wait (bounded) until turns are in flight
    deadline = time.monotonic() + 60
    while prefer_busy and not load.in_flight() and time.monotonic() < deadline:
        time.sleep(0.2)
    rep = reps[0]
    ray.kill(ray.get_actor(rep.name, namespace="serve"), no_restart=True)
    return {"replica": rep.name, "node_id": rep.node_id[:12]}


def _node_of_tools(cluster: Any) -> str:
    reps = _replicas("ToolsServer")
    ids = {cluster.node_id(n): n for n in cluster.node_handles}
    return ids.get(reps[0].node_id, "cpu-1") if reps else "cpu-1"


def _disconnect(load: Load, n: int) -> dict[str, Any]:
    """``n`` clients (half SSE, half gRPC) that leave after the first streamed token; then each session's
    next turn must be served (its lease released, nothing half-stored)."""

    async def one(i: int) -> dict[str, Any]:
        sid = f"chaos-drop-{uuid.uuid4().hex[:10]}"
        proto = "http" if i % 2 == 0 else "grpc"
        a = await load._turn(sid, "drop", 0, "Hi! What can you help me with?", uuid.uuid4().hex, proto, 0,
                             drop_after_first=True)
        # SessionBusy while the dropped turn still runs is typed; the client retries
        b = await load._until_ok(sid, "drop", 1, "Thanks, that is all.", proto)
        return {"session": sid, "first": a.outcome, "next": b.outcome}

    return {"sessions": load.each(one, n)}


def stored_verdict(turns: list[dict[str, Any]], served: int) -> dict[str, Any]:
    """A session read back after a fault: its ``served`` turns all stored, numbered 0..n-1, none left as a
    mid-turn checkpoint (``whole``)."""
    idx = [t.get("index") for t in turns]
    checkpoints = sum(1 for t in turns if (t.get("meta") or {}).get("checkpoint"))
    return {"stored": len(turns), "served": served, "contiguous": idx == list(range(len(turns))),
            "checkpoints": checkpoints,
            "whole": len(turns) == served and idx == list(range(len(turns))) and not checkpoints}


def overlapped(a: Attempt, b: Attempt) -> bool:
    """Two served turns of one session whose streams overlapped: the later one streamed its first token
    before the earlier one had ended (one turn at a time per session forbids it)."""
    if a.outcome != "ok" or b.outcome != "ok":
        return False
    first, second = sorted((a, b), key=lambda x: x.end)
    return second.first_token is not None and second.first_token < first.end


def _slow_reader(load: Load, n: int, delay_s: float) -> dict[str, Any]:
    """``n`` clients (half SSE, half gRPC) that read one event or chunk every ``delay_s``: the turn must end
    whole (a slow client slows only its own turn), then the session's next turn must be served."""

    async def one(i: int) -> dict[str, Any]:
        sid = f"chaos-slow-{uuid.uuid4().hex[:10]}"
        proto = "http" if i % 2 == 0 else "grpc"
        a = await load._turn(sid, "slow", 0, "Hi! Where is my order?", uuid.uuid4().hex, proto, 0,
                             read_delay_s=delay_s)
        b = await load._until_ok(sid, "slow", 1, "Thanks, that is all.", proto)
        sess = await _get_session(load.cluster, sid) or {"turns": []}
        served = (a.outcome == "ok") + (b.outcome == "ok")
        return {"session": sid, "protocol": proto, "first": a.outcome, "seconds": round(a.end - a.start, 1),
                "next": b.outcome, **stored_verdict(sess.get("turns", []), served)}

    return {"sessions": load.each(one, n)}


def _same_session(load: Load, n: int) -> dict[str, Any]:
    """``n`` sessions: a first turn, then two turns sent at once through two different nodes' proxies (SSE on
    one, gRPC on the other). Either both are served one after the other, or one is refused with a typed
    ``session_busy``; the stored turns are numbered without a gap and no two streams overlapped."""

    async def one(i: int) -> dict[str, Any]:
        sid = f"chaos-twice-{uuid.uuid4().hex[:10]}"
        first = await load._until_ok(sid, "twice", 0, "Hi! What can you help me with?", "http")
        live = sorted(k for k in load.cluster.endpoints if k.startswith("cpu") and k in load.cluster.ready)
        nodes = (live * 2)[:2] if live else ["head", "head"]
        a, b = await asyncio.gather(
            load._turn(sid, "twice", 1, "Where is my order?", uuid.uuid4().hex, "http", 0, node=nodes[0]),
            load._turn(sid, "twice", 1, "Can you check my order status?", uuid.uuid4().hex, "grpc", 0,
                       node=nodes[1]))
        sess = await _get_session(load.cluster, sid) or {"turns": []}
        served = sum(x.outcome == "ok" for x in (first, a, b))
        return {"session": sid, "nodes": nodes, "outcomes": [a.outcome, b.outcome],
                "overlapped": overlapped(a, b), **stored_verdict(sess.get("turns", []), served)}

    rows = load.each(one, n)
    return {"sessions": rows, "interleaved": sum(1 for r in rows if r["overlapped"] or not r["whole"])}


async def _probe_down(load: Load) -> list[dict[str, Any]]:
    """One turn per protocol while the store is down: what the client is told (status, code, Retry-After)."""
    import grpc
    import httpx

    from serve.protos import assistant_pb2 as pb
    from serve.protos import assistant_pb2_grpc

    node, ep = load._endpoint()
    out: list[dict[str, Any]] = []
    sid = f"chaos-probe-{uuid.uuid4().hex[:10]}"
    headers = {"Authorization": f"Bearer {load.cluster.api_key}", "Idempotency-Key": uuid.uuid4().hex}
    try:
        async with httpx.AsyncClient(timeout=30) as c:
            r = await c.post(f"{ep.http}/v1/sessions/{sid}/turns", json={"text": "Where is my order?"},
                             headers=headers)
        code = _http_outcome(r.status_code, r.content) if r.status_code != 200 else "ok"
        out.append({"protocol": "http", "node": node, "status": r.status_code, "code": code,
                    "retry_after": r.headers.get("retry-after")})
    except httpx.HTTPError as exc:
        out.append({"protocol": "http", "node": node, "status": None, "code": type(exc).__name__})
    md = (("application", "tandem"), ("authorization", f"Bearer {load.cluster.api_key}"))
    async with grpc.aio.insecure_channel(ep.grpc) as ch:
        stub = assistant_pb2_grpc.AssistantStub(ch)
        try:
            await stub.Turn(pb.TurnRequest(session_id=sid + "-g", text="Where is my order?"), metadata=md,
                            timeout=30)
            out.append({"protocol": "grpc", "node": node, "status": "OK", "code": "ok"})
        except grpc.aio.AioRpcError as exc:
            trailing = dict(exc.trailing_metadata() or ())
            out.append({"protocol": "grpc", "node": node, "status": exc.code().name,
                        "code": exc.details(), "retry_after": trailing.get("retry-after")})
    return out


def probe_verdict(probes: list[dict[str, Any]]) -> bool:
    """True when every probe while the store was down got the typed refusal: HTTP 503 or gRPC UNAVAILABLE,
    each with a Retry-After."""
    return bool(probes) and all(p.get("status") in (503, "UNAVAILABLE") and p.get("retry_after") for p in probes)


def _redis_restart(cluster: Any, load: Load, down_s: float) -> dict[str, Any]:
    """Redis killed (SIGKILL: what comes back is what its AOF held), probed while down, started again on the
    same data directory after ``down_s``. With GCS FT on the same Redis the head's GCS goes down with it and
    is restarted after (a head pod restarted beside its Redis)."""
    gcs = bool(getattr(cluster, "gcs_ft", False))
    if gcs:
        cluster.kill_gcs()
    t_down = time.monotonic()
    cluster.redis.crash()
    time.sleep(min(1.0, down_s))
    probes = load.run_coro(_probe_down(load), timeout=90)
    time.sleep(max(0.0, down_s - (time.monotonic() - t_down)))
    cluster.redis.start()
    up = time.monotonic()
    if gcs:
        cluster.restart_gcs()
    return {"down_s": round(up - t_down, 2), "probes": probes, "typed_while_down": probe_verdict(probes),
            "up_at": up}


def fence_verdict(first: Attempt, second: Attempt, attempts: list[Attempt],
                  turns: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``lease_fence`` session read back: ``first`` is the turn frozen past its lease, ``second`` the turn
    that took the session meanwhile, ``attempts`` every attempt of the session (retries included).

    ``interleaved``: the frozen turn's own record and the second's are both stored (two holders of the lease
    both saved: the frozen turn's stale save landed beside a turn it never saw, or the second was made from a
    history without it); ``lost``: attempts told ``ok`` whose turn is not stored;
    ``doubled``: stored turns whose request (the user's text) is stored more than once; ``refused_stale``: the
    frozen turn was told ``lease_lost`` (the store refused its save).
    """
    index = {t.get("turn_id"): t.get("index") for t in turns}
    interleaved = int(first.turn_id in index and second.turn_id in index)
    lost = sum(1 for a in attempts if a.outcome == "ok" and a.turn_id not in index)
    texts = [t.get("user_text") for t in turns]
    doubled = sum(1 for x in set(texts) if texts.count(x) > 1)
    served = len({a.turn_id for a in attempts if a.outcome == "ok"})
    return {"refused_stale": first.outcome == "lease_lost", "interleaved": interleaved, "lost": lost,
            "doubled": doubled, **stored_verdict(turns, served)}


def _pid_of(replica: Replica) -> int:
    from ray._private.state import actors

    for a in actors().values():
        if a.get("Name") == replica.name and a.get("State") == "ALIVE":
            return int(a["Pid"])
    raise RuntimeError(f"no live process for {replica.name}")


def _lease_fence(cluster: Any, load: Load, freeze_max_s: float) -> dict[str, Any]:
    """An ingress replica frozen past its lease's TTL in the middle of a turn while another turn of the session
    takes the lease (see the module docstring). The first turn goes through the frozen replica's node (the proxy
    routes to its own node's replica), the second through the other node; the replica is thawed once the second
    turn is stored, or after ``freeze_max_s`` (well before Serve's health checks would replace it); the second
    turn goes on either way."""
    import os
    import signal

    nodes = {cluster.node_id(n): n for n in cluster.node_handles}
    live = [(r, nodes[r.node_id]) for r in _replicas("TandemIngress")
            if r.node_id in nodes and nodes[r.node_id] in cluster.ready]
    if len({n for _, n in live}) < 2:
        raise RuntimeError(f"lease_fence needs ingress replicas on two ready nodes, found {live}")
    (rep, frozen_node), other_node = live[0], next(n for _, n in live if n != live[0][1])
    pid = _pid_of(rep)
    sid = f"chaos-fence-{uuid.uuid4().hex[:10]}"
    detail: dict[str, Any] = {"replica": rep.name, "node": frozen_node, "other_node": other_node, "session": sid}

    async def go() -> dict[str, Any]:
        idem = uuid.uuid4().hex
        first = asyncio.ensure_future(load._turn(sid, "fence", 0, "Hi! What can you help me with?", idem, "http", 0,
                                                 node=frozen_node))
        a: Attempt | None = None
        until = time.monotonic() + load.turn_timeout_s
        while time.monotonic() < until and not first.done():
            a = next((x for x in load.attempts if x.session_id == sid), None)
            if a is not None and a.first_token is not None:
                break  # mid-turn: the lease is held, the reply is still to come and to be saved
            await asyncio.sleep(0.05)
        if a is None or a.first_token is None:
            raise RuntimeError(f"the first turn never streamed through {frozen_node} ({a.outcome if a else None})")
        async def successor() -> Attempt:
            b = await load._turn(sid, "fence", 1, "Where is my order?", uuid.uuid4().hex, "grpc", 0, node=other_node)
            for retry in range(1, 4):  # as a client would: the lease of a stopped holder lapses within 30 s
                if b.outcome == "ok":
                    break
                await asyncio.sleep(retry_pause(b, 2.0))
                b = await load._turn(sid, "fence", 1, "Where is my order?", b.idem, "grpc", retry, node=other_node)
            return b

        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        second_task = asyncio.ensure_future(successor())
        try:
            await asyncio.wait_for(asyncio.shield(second_task), timeout=freeze_max_s)
        except TimeoutError:
            pass  # a slow box: thawed while the second turn still runs (it holds the lease or waits for it)
        finally:
            os.kill(pid, signal.SIGCONT)
            thawed = time.monotonic()
        second = await second_task
        late = await first
        retried = late
        for retry in range(1, 4):  # the frozen turn's client retries under its key, as every chaos client does
            if retried.outcome == "ok":
                break
            await asyncio.sleep(retry_pause(retried, 2.0))
            retried = await load._turn(sid, "fence", 0, "Hi! What can you help me with?", idem, "http", retry)
        sess = await _get_session(load.cluster, sid) or {"turns": []}
        took = None if second.first_token is None else second.first_token - stopped  # it held the lease by then
        attempts = [x for x in load.attempts if x.session_id == sid]
        return {"frozen_s": round(thawed - stopped, 1), "second_streamed_after_s": None if took is None
                else round(took, 1), "second_done_after_s": round(second.end - stopped, 1),
                "thawed_after_second_done": second.end <= thawed,
                "first": late.outcome, "second": second.outcome, "retry": retried.outcome,
                "outcomes": [x.outcome for x in attempts], **fence_verdict(late, second, attempts, sess["turns"])}

    detail.update(load.run_coro(go(), timeout=load.turn_timeout_s * 4 + freeze_max_s))
    return detail


def inject(name: str, cluster: Any, load: Load, ns: argparse.Namespace) -> dict[str, Any]:
    if name == "ingress_kill":
        return _kill_replica("TandemIngress", load)
    if name == "tools_kill":
        return _kill_replica("ToolsServer", load)
    if name == "kernels_kill":
        return _kill_replica("RuleKernels", load)
    if name == "model_kill":
        return _kill_replica("LLMServer:", load)
    if name == "node_loss":
        victim = _node_of_tools(cluster) if ns.lose == "tools" else ("cpu-1" if _node_of_tools(cluster) == "cpu-2"
                                                                    else "cpu-2")
        deadline = time.monotonic() + 60
        while not load.in_flight() and time.monotonic() < deadline:
            time.sleep(0.2)
        cluster.remove_node(victim)
        return {"node": victim}
    if name == "disconnect":
        return _disconnect(load, ns.disconnects)
    if name == "redis_restart":
        return _redis_restart(cluster, load, ns.redis_down_s)
    if name == "slow_reader":
        return _slow_reader(load, ns.slow_readers, ns.slow_read_s)
    if name == "same_session":
        return _same_session(load, ns.same_sessions)
    if name == "lease_fence":
        return _lease_fence(cluster, load, ns.freeze_max_s)
    if name == "gcs_restart":
        if not cluster.gcs_ft:
            raise RuntimeError("gcs_restart needs --gcs-ft")
        cluster.kill_gcs()
        time.sleep(ns.gcs_down_s)
        cluster.restart_gcs()
        return {"down_s": ns.gcs_down_s}
    raise ValueError(f"unknown fault {name!r}")


def after(name: str, cluster: Any, detail: dict[str, Any], *, attempts: int = 3,
          ready_timeout_s: float = 240.0) -> None:
    """What an operator (or KubeRay) does after the fault: a lost node comes back. A node whose raylet dies
    after it rejoined (seen on a loaded 2-core box) is replaced again, as KubeRay replaces a failed pod;
    ``detail["rejoins"]`` counts the tries."""
    if name != "node_loss":
        return
    for i in range(1, attempts + 1):
        detail["rejoins"] = i
        cluster.add_node(detail["node"])
        try:
            cluster.wait_ready(ready_timeout_s, nodes=[detail["node"]])
            return
        except TimeoutError:
            if i == attempts:
                raise
            with contextlib.suppress(Exception):  # the broken node goes; a fresh one takes its place
                cluster.remove_node(detail["node"])


# -- measures --------------------------------------------------------------------------------------------

def _ttft(a: Attempt) -> float | None:
    return None if a.first_token is None else a.first_token - a.start


def fault_row(f: Fault, attempts: list[Attempt], t_end: float, baseline_ttft: float | None) -> dict[str, Any]:
    hit = [a for a in attempts if a.start <= f.t < (a.end or t_end) or f.t <= a.start < t_end]
    bad = [a for a in hit if a.outcome not in ("ok", "disconnected", "running")]
    failed: dict[str, int] = {}
    for a in bad:
        failed[a.outcome] = failed.get(a.outcome, 0) + 1
    good = sorted((a for a in attempts if a.start >= f.t and a.outcome == "ok" and a.end <= t_end),
                  key=lambda a: a.end)
    recovery = round(good[0].end - f.t, 2) if good else None
    base_rec = None
    if baseline_ttft and good:
        for i in range(len(good)):
            window = [x for x in (_ttft(g) for g in good[i:i + 5]) if x is not None]
            if len(window) >= min(3, len(good) - i) and window and statistics.median(window) <= 1.2 * baseline_ttft:
                base_rec = round(good[min(i + len(window), len(good)) - 1].end - f.t, 2)
                break
    up = f.detail.pop("up_at", None)  # a fault with a downtime: recovery also from the moment it ended
    if up is not None:
        f.detail["up_after_s"] = round(up - f.t, 2)
        back = [a for a in good if a.start >= up]
        f.detail["recovery_after_up_s"] = round(back[0].end - up, 2) if back else None
    return {
        "in_flight": f.in_flight,
        "turns": len(hit),
        "failed": sum(failed.values()) - sum(v for k, v in failed.items() if k == "hang"),
        "failed_by_code": failed,
        "untyped": sum(v for k, v in failed.items() if k in UNTYPED),
        "hangs": failed.get("hang", 0),
        "recovery_s": recovery,
        "baseline_recovery_s": base_rec,
        "detail": f.detail,
    }


def window_closed(f: Fault, attempts: list[Attempt], sessions: dict[str, dict[str, Any]], now: float,
                  baseline_ttft: float | None, *, min_s: float, max_s: float) -> bool:
    """Whether a fault's recovery window is over: always after ``max_s``; after ``min_s`` once first-token p50
    is back within 1.2× the baseline (:func:`fault_row`'s ``baseline_recovery_s``) and every session the fault
    failed has settled — its newest attempt succeeded, or it gave up — so no retry of this fault's victims
    lands in the next fault's window."""
    elapsed = now - f.t
    if elapsed >= max_s:
        return True
    if elapsed < min_s or not baseline_ttft:
        return False
    probe = Fault(f.name, f.t, f.in_flight, dict(f.detail))  # fault_row takes "up_at" out of its detail
    if fault_row(probe, attempts, now, baseline_ttft)["baseline_recovery_s"] is None:
        return False
    newest: dict[str, Attempt] = {}
    for a in attempts:
        if a.session_id not in newest or a.start >= newest[a.session_id].start:
            newest[a.session_id] = a
    hit = {a.session_id for a in attempts
           if a.outcome not in ("ok", "disconnected", "running") and (a.end or now) >= f.t}
    return all(newest[sid].outcome == "ok" or sessions.get(sid, {}).get("gave_up") for sid in hit)


def wait_window(f: Fault, load: Load, baseline_ttft: float | None, *, min_s: float, max_s: float,
                poll_s: float = 2.0) -> float:
    """Sleep until :func:`window_closed`; the seconds the window lasted."""
    while True:
        now = time.monotonic()
        with load.lock:
            attempts = list(load.attempts)
        if window_closed(f, attempts, load.sessions, now, baseline_ttft, min_s=min_s, max_s=max_s):
            return now - f.t
        time.sleep(poll_s)


async def _get_session(cluster: Any, sid: str) -> dict[str, Any] | None:
    import httpx

    for name in ("cpu-1", "cpu-2", "head"):
        ep = cluster.endpoints.get(name)
        if ep is None:
            continue
        try:
            async with httpx.AsyncClient(timeout=30) as c:
                r = await c.get(f"{ep.http}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {cluster.api_key}"})
            if r.status_code == 200:
                return r.json()
            if r.status_code == 404:
                return None
        except httpx.HTTPError:
            continue
    return None


def write_verdict(stored_executed: int, ledger: int, entity_changed: bool) -> str:
    """One write session's verdict from its three records.

    ``doubled``: more than one executed turn or ledger entry; ``lost``: the store says executed (the user was
    told) but the ledger has nothing; ``half_written``: the ledger and the entity disagree, or the ledger has
    it and the session does not; ``ok``: all three agree on one write; ``none``: no write (the session never
    confirmed, e.g. the model asked for something else).
    """
    if stored_executed > 1 or ledger > 1:
        return "doubled"
    if stored_executed and not ledger:
        return "lost"
    if bool(ledger) != entity_changed or (ledger and not stored_executed):
        return "half_written"
    return "ok" if ledger else "none"


def audit_writes(cluster: Any, load: Load, orders_before: dict[str, str]) -> dict[str, Any]:
    """Writes from the store's sessions, the ledger and the world: lost, doubled, half-written."""
    from ray import serve

    tools = serve.get_deployment_handle("ToolsServer", app_name="tandem")
    ledger = tools.ledger.remote().result(timeout_s=60)
    by_session: dict[str, list[dict[str, Any]]] = {}
    for e in ledger:
        by_session.setdefault(e["session_id"], []).append(e)
    rows: list[dict[str, Any]] = []
    lost = doubled = half = 0
    for sid, s in load.sessions.items():
        if s["kind"] != "write":
            continue
        oid = s["order"]
        sess = asyncio.run(_get_session(cluster, sid)) or {"turns": []}
        executed = [t for t in sess.get("turns", []) if ((t.get("meta") or {}).get("tandem") or {}).get("executed")]
        led = [e for e in by_session.get(sid, []) if (e.get("outcome") or {}).get("ok", True)]
        ent = tools.entity.remote("order", oid).result(timeout_s=60) or {}
        changed = ent.get("status") != orders_before.get(oid)
        row = {"session": sid, "order": oid, "stored_executed": len(executed), "ledger": len(led),
               "status": ent.get("status"), "was": orders_before.get(oid),
               "verdict": write_verdict(len(executed), len(led), changed)}
        lost += row["verdict"] == "lost"
        doubled += row["verdict"] == "doubled"
        half += row["verdict"] == "half_written"
        rows.append(row)
    return {"lost": lost, "doubled": doubled, "half_written": half,
            "confirmed": sum(1 for r in rows if r["verdict"] == "ok"), "sessions": rows,
            "ledger_entries": len(ledger)}


def confirmed_by_window(rows: list[dict[str, Any]], attempts: list[Attempt], marks: list[Fault]) -> dict[str, int]:
    """Confirmed writes by the window their confirming turn started in (``baseline`` or a fault's name)."""
    out: dict[str, int] = {}
    for row in rows:
        if row["verdict"] != "ok":
            continue
        starts = [a.start for a in attempts if a.session_id == row["session"] and a.outcome == "ok"]
        last = max(starts) if starts else None
        window = "baseline"
        for f in marks:
            if last is not None and f.t <= last:
                window = f.name
        row["window"] = window
        out[window] = out.get(window, 0) + 1
    return out


def print_table(report: dict[str, Any]) -> None:
    cols = ("fault", "in_flight", "turns", "failed", "untyped", "hangs", "recovery_s", "baseline_recovery_s")
    print("  ".join(f"{c:>12}" for c in cols))
    for name, r in report["faults"].items():
        print("  ".join(f"{x!s:>12}" for x in (name, *(r.get(c) for c in cols[1:]))))
    w = report["writes"]
    print(f"writes: lost {w['lost']}  doubled {w['doubled']}  half_written {w['half_written']}  "
          f"confirmed {w['confirmed']}  (ledger entries {w['ledger_entries']})")


def plot_timeline(report: dict[str, Any], path: Path) -> Path | None:
    """Every attempt of the run: when it started (x) and how long until its first token or its end (y),
    marked by outcome; a vertical line at each fault. ``None`` when the run recorded no attempt."""
    attempts = report.get("timeline") or []
    if not attempts:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 4.2))
    groups: dict[str, list[dict[str, Any]]] = {}
    for a in attempts:
        key = "ok" if a["outcome"] == "ok" else "disconnected" if a["outcome"] == "disconnected" else "failed"
        groups.setdefault(key, []).append(a)
    style = {"ok": ("o", "tab:green"), "disconnected": ("s", "tab:gray"), "failed": ("x", "tab:red")}
    for key, rows in groups.items():
        xs = [a["start"] for a in rows]
        ys = [max(1e-3, (a["first_token"] if a.get("first_token") is not None else a["end"]) - a["start"])
              for a in rows]
        marker, color = style[key]
        ax.scatter(xs, ys, s=14, marker=marker, color=color, label=f"{key} ({len(rows)})")
    top = max(max(0.0, (a["first_token"] if a.get("first_token") is not None else a["end"]) - a["start"])
              for a in attempts) or 1.0
    for name, t in (report.get("fault_times") or {}).items():
        ax.axvline(t, color="tab:orange", lw=1, ls="--")
        ax.text(t, top, f" {name}", rotation=90, va="top", fontsize=8, color="tab:orange")
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the cluster started")
    ax.set_ylabel("first token (or end) after the start, s")
    ax.set_title("chaos: every attempt, by outcome; dashed: a fault injected")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- main ------------------------------------------------------------------------------------------------

def write_candidates(seed: int, n: int) -> list[tuple[str, str]]:
    """(email, order id) of pending orders, one per user, from the pack's world for ``seed``."""
    from pipelines.domains import load_domain

    world = load_domain("support").new_world(seed, None)
    out, users = [], set()
    for oid, o in world.orders.items():
        if o.status == "pending" and o.user_id not in users and o.user_id in world.users:
            users.add(o.user_id)
            out.append((world.users[o.user_id].email, oid))
    return out[:n]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=str(REPO / "configs" / "cluster-dev.yaml"))
    p.add_argument("--cpu-nodes", type=int, default=2)
    p.add_argument("--faults", default=",".join(f for f in FAULTS if f != "gcs_restart"), help=f"comma list of {', '.join(FAULTS)}")
    p.add_argument("--quick", action="store_true", help=f"the bounded slice: {', '.join(QUICK)} + the write audit")
    p.add_argument("--workers", type=int, default=4, help="sessions running at once")
    p.add_argument("--writes", type=int, default=6, help="sessions that end in a confirmed write (at most)")
    p.add_argument("--write-every", type=int, default=2,
                   help="every n-th session is a write session (a larger n spreads the writes over the faults)")
    p.add_argument("--baseline-s", type=float, default=60.0)
    p.add_argument("--window-s", type=float, default=90.0, help="recovery window after each fault, at most")
    p.add_argument("--min-window-s", type=float, default=20.0,
                   help="recovery window at least: it closes after this once first-token p50 is back within 1.2x "
                        "of the baseline and every session the fault failed has settled (= --window-s: fixed)")
    p.add_argument("--turn-timeout-s", type=float, default=240.0, help="a turn longer than this is a hang")
    p.add_argument("--disconnects", type=int, default=2)
    p.add_argument("--redis-down-s", type=float, default=5.0, help="redis_restart: seconds Redis stays down")
    p.add_argument("--slow-readers", type=int, default=2)
    p.add_argument("--slow-read-s", type=float, default=0.25, help="slow_reader: seconds between reads")
    p.add_argument("--same-sessions", type=int, default=2, help="same_session: sessions sent two turns at once")
    p.add_argument("--freeze-max-s", type=float, default=75.0,
                   help="lease_fence: the frozen replica is thawed by then at the latest (Serve replaces a replica "
                        "after three 30 s health-check timeouts)")
    p.add_argument("--gcs-ft", action="store_true", help="GCS fault tolerance on the cluster's Redis")
    p.add_argument("--gcs-down-s", type=float, default=10.0)
    p.add_argument("--lose", choices=("tools", "other"), default="tools",
                   help="node_loss removes the CPU node hosting the tools replica (default) or the other one")
    p.add_argument("--world-path", default=None,
                   help="domain.world_path (default: the tools node's own disk, as in the profiles)")
    p.add_argument("--ready-timeout-s", type=float, default=1200.0)
    p.add_argument("--out", default="results")
    p.add_argument("--keep-work", action="store_true",
                   help="keep the cluster's work folder (its stores, node disks and event logs) after the run")
    p.add_argument("--seed", type=int, default=7, help="the support world's seed (the app's domain.seed)")
    p.add_argument("--replot", default=None, metavar="CHAOS_JSON",
                   help="draw the timeline of a saved run (<out>/timeline.png) and print its table; no cluster")
    return p


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    if ns.replot:
        saved = json.loads(Path(ns.replot).read_text())
        png = plot_timeline(saved, Path(ns.out) / "timeline.png")
        if "writes" in saved:
            print_table(saved)
        print(f"wrote {png}" if png else "no attempt recorded: nothing to draw")
        return 0 if png else 1
    faults = list(QUICK) if ns.quick else [f.strip() for f in ns.faults.split(",") if f.strip()]
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        print(f"unknown faults: {unknown}", file=sys.stderr)
        return 2
    if "gcs_restart" in faults:
        ns.gcs_ft = True
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    import tempfile

    from serve.cluster import LocalCluster
    work = Path(tempfile.mkdtemp(prefix="tandem-chaos-"))
    candidates = write_candidates(ns.seed, ns.writes)
    from pipelines.domains import load_domain

    world0 = load_domain("support").new_world(ns.seed, None)
    orders_before = {oid: world0.orders[oid].status for _, oid in candidates}
    t_start = time.monotonic()
    cluster = LocalCluster(ns.config, cpu_nodes=ns.cpu_nodes, gcs_ft=ns.gcs_ft, workdir=work,
                           overrides={"domain": {"seed": ns.seed, **({"world_path": ns.world_path} if ns.world_path
                                                                            else {})},
                                      "telemetry": {"jsonl_dir": str(work / "telemetry")}})
    report: dict[str, Any] = {"config": ns.config, "faults": {}, "not_run": [f for f in FAULTS if f not in faults]}
    try:
        cluster.start(ready_timeout_s=ns.ready_timeout_s)
        report["ready_s"] = round(time.monotonic() - t_start, 1)
        print(f"cluster ready in {report['ready_s']} s: {sorted(cluster.endpoints)}", flush=True)
        load = Load(cluster, workers=ns.workers, write_orders=candidates, turn_timeout_s=ns.turn_timeout_s,
                    write_every=ns.write_every)
        load.start()
        time.sleep(ns.baseline_s)
        base = [x for x in (_ttft(a) for a in list(load.attempts) if a.outcome == "ok") if x is not None]
        baseline_ttft = statistics.median(base) if base else None
        report["baseline"] = {"turns_ok": len(base), "first_token_p50_s": baseline_ttft}
        marks: list[Fault] = []
        for name in faults:
            f = Fault(name, time.monotonic())
            f.in_flight = len(load.in_flight())
            print(f"fault {name}: {f.in_flight} turns in flight", flush=True)
            try:
                cluster.snapshot_shm()  # a process the fault kills leaves its shared memory to be removed at the end
                f.detail = inject(name, cluster, load, ns)
                f.in_flight = max(f.in_flight, len(load.in_flight()))
            except Exception as exc:  # a fault that cannot be injected is reported, not hidden
                f.detail = {"error": f"{type(exc).__name__}: {exc}"}
            marks.append(f)
            f.detail["window_s"] = round(wait_window(f, load, baseline_ttft, min_s=min(ns.min_window_s, ns.window_s),
                                                     max_s=ns.window_s), 1)
            after(name, cluster, f.detail)
        load.join(timeout=ns.turn_timeout_s * 3 + 30)
        t_end = time.monotonic()
        for i, f in enumerate(marks):
            nxt = marks[i + 1].t if i + 1 < len(marks) else t_end
            report["faults"][f.name] = fault_row(f, load.attempts, nxt, baseline_ttft)
        report["writes"] = audit_writes(cluster, load, orders_before)
        report["writes"]["confirmed_by_window"] = confirmed_by_window(report["writes"]["sessions"], load.attempts,
                                                                      marks)
        ok = sum(1 for a in load.attempts if a.outcome == "ok")
        report["totals"] = {"attempts": len(load.attempts), "ok": ok,
                            "hangs": sum(1 for a in load.attempts if a.outcome == "hang"),
                            "untyped": sum(1 for a in load.attempts if a.outcome in UNTYPED),
                            "sessions": len(load.sessions),
                            "sessions_done": sum(1 for s in load.sessions.values() if s["done"])}
        report["timeline"] = [{**asdict(a), "start": round(a.start - t_start, 3), "end": round(a.end - t_start, 3),
                               "first_token": None if a.first_token is None else round(a.first_token - t_start, 3)}
                              for a in load.attempts]
        report["fault_times"] = {f.name: round(f.t - t_start, 3) for f in marks}
    finally:
        cluster.shutdown()
        report["wall_s"] = round(time.monotonic() - t_start, 1)
        if ns.keep_work:
            report["work"] = str(work)
        else:  # the cluster's stores, disks and telemetry; the report is under --out
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    path = out / "chaos.json"
    path.write_text(json.dumps(report, indent=2, default=str))
    png = plot_timeline(report, out / "timeline.png")
    if "writes" in report:
        print_table(report)
    print(f"wrote {path}" + (f", {png}" if png else "") + f" (wall {report['wall_s']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
