"""Fuzz the public API: HTTP from its OpenAPI document (schemathesis), gRPC from hypothesis messages.

In process (the default, for volume): the real ingress (FastAPI app with its middleware,
routes and error table; the gRPC methods; the real SQLite store and PII vault) on the
official fake handles of :mod:`serve.testing`, auth on. Every response must be a row of
the error table (status, JSON body with a known ``error.code``; gRPC: OK or a table code
with details), no call may hang, a rejected request must store nothing, and a normal turn
must still be served at the end (HTTP and gRPC).

``--real`` runs a shorter pass against the real embedded app (real Ray Serve proxy, real
engine): start it under the team lock.

    python scripts/fuzz_api.py --http 8000 --grpc 2500                  # ≥ 10,000 requests
    python scripts/fuzz_api.py --real --http 300 --grpc 100

Prints totals and writes JSON (``--out``, default ``results/fuzz_api.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import signal
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

KEY = "fuzz-key-1"
AUTH = {"authorization": f"Bearer {KEY}"}
HANG_S = 20.0
# Routes whose handler is Ray Serve LLM's own (the fake model handle does not imitate LLMServer's
# response objects): fuzzed only against the real app.
REAL_ONLY = {"/v1/chat/completions", "/v1/completions"}


class Hang(Exception):
    """A call ran past HANG_S."""


def _alarm(_sig: int, _frm: Any) -> None:
    raise Hang()


class Tally:
    """Counts of what came back, and every response outside the table (kept, up to 20)."""

    def __init__(self) -> None:
        from pipelines.errors import all_error_classes
        from serve.openapi import TABLE_STATUSES

        self.statuses = set(TABLE_STATUSES) | {200}
        self.codes = {c.code for c in all_error_classes()} | {"validation_error", "method_not_allowed"}
        self.grpc_codes = {c.grpc_status for c in all_error_classes()}
        self.requests = Counter()  # type: Counter[str]
        self.by_status = Counter()  # type: Counter[str]
        self.outside: list[dict[str, Any]] = []
        self.hangs = 0
        self.stored_after_reject = 0
        self.server_errors = Counter()  # type: Counter[str]

    def bad(self, **info: Any) -> None:
        if len(self.outside) < 20:
            self.outside.append(info)
        self.requests["outside_table"] += 1

    def http(self, path: str, status: int, body: bytes, openai: bool) -> None:
        self.requests["http"] += 1
        self.by_status[f"http {status}"] += 1
        if status >= 500:
            self.server_errors[f"{path} {status}"] += 1
        try:
            data = json.loads(body) if body else None
        except ValueError:
            data = None
        if status not in self.statuses:
            return self.bad(path=path, status=status, body=body[:200].decode("utf-8", "replace"))
        if status == 200:
            return None
        err = data.get("error") if isinstance(data, dict) else None
        if not isinstance(err, dict) or "message" not in err:
            return self.bad(path=path, status=status, body=body[:200].decode("utf-8", "replace"))
        if not openai and err.get("code") not in self.codes:
            return self.bad(path=path, status=status, code=err.get("code"))
        return None

    def grpc(self, method: str, code: Any, details: str | None) -> None:
        self.requests["grpc"] += 1
        name = "OK" if code is None else code.name
        self.by_status[f"grpc {name}"] += 1
        if code is not None and (name not in self.grpc_codes or not details):
            self.bad(method=method, code=name, details=details)


def _stored(db: Path, session_id: str) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM turns WHERE session_id=?", (session_id,)).fetchone()[0]


# -- HTTP --------------------------------------------------------------------------------------


def fuzz_http(schema: Any, call: Any, tally: Tally, examples: int, seed: int, db: Path | None) -> None:
    """Draw ``examples`` cases (positive and negative) spread over the operations; check each response."""
    from schemathesis import GenerationMode

    ops = [r.ok() for r in schema.get_all_operations()]
    ops = [op for op in ops if op.path not in REAL_ONLY or call.real]
    accepted: set[str] = set()
    pairs = [(op, mode) for op in ops for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)]
    start = tally.requests["http"]
    rnd = 0
    while pairs and tally.requests["http"] - start < examples:
        per = max(1, (examples - (tally.requests["http"] - start)) // len(pairs))
        still = []
        for op, mode in pairs:
            before = tally.requests["http"]
            _run_pair(op, mode, per, seed + rnd, call, tally, db, accepted)
            if tally.requests["http"] > before:  # a strategy that is exhausted drops out
                still.append((op, mode))
            if tally.requests["http"] - start >= examples:
                break
        pairs, rnd = still, rnd + 1


def _run_pair(op: Any, mode: Any, per: int, seed: int, call: Any, tally: Tally, db: Path | None,
              accepted: set[str]) -> None:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis.errors import Unsatisfiable

    count = [0]

    @hseed(seed)
    @settings(max_examples=per, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              phases=[Phase.generate])
    @given(case=op.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        if count[0] >= per:
            return
        count[0] += 1
        headers = dict(case.headers or {})
        if tally.requests["http"] % 10 != 9:  # most calls authenticated, every tenth as generated
            headers.update(AUTH)
        signal.setitimer(signal.ITIMER_REAL, HANG_S)
        try:
            status, body = call(case, headers)
        except Hang:
            tally.hangs += 1
            return
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        tally.http(op.path, status, body, openai=op.path.startswith("/v1/models") or op.path in REAL_ONLY)
        sid = (case.path_parameters or {}).get("session_id")
        if op.method.upper() == "POST" and isinstance(sid, str) and db is not None:
            if status == 200:
                accepted.add(sid)
            elif sid not in accepted and _stored(db, sid):
                tally.stored_after_reject += 1

    try:
        run()
    except Unsatisfiable:  # no negative case exists (e.g. a route without parameters)
        pass


# -- gRPC --------------------------------------------------------------------------------------


def grpc_cases(examples: int, seed: int) -> list[tuple[str, Any, dict[str, str]]]:
    """(method, request, metadata) drawn by hypothesis: arbitrary strings in every field."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    from serve.protos import assistant_pb2 as pb

    text = st.one_of(st.text(max_size=300), st.sampled_from(["", " ", "hi", "Where is my order?", "x" * 5000]),
                     st.text(alphabet=st.characters(codec="utf-8"), max_size=50))
    sid = st.one_of(st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.:-]{0,20}\Z"), st.text(max_size=140))
    meta = st.fixed_dictionaries({}, optional={
        "authorization": st.one_of(st.just(AUTH["authorization"]), st.text(max_size=40)),
        "idempotency-key": st.one_of(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=140),
                                     st.text(max_size=20)),
    })
    turn = st.builds(pb.TurnRequest, session_id=sid, text=text, locale=st.one_of(st.just(""), st.text(max_size=40)),
                     user_id=st.one_of(st.just(""), st.text(max_size=200)))
    case = st.one_of(st.tuples(st.sampled_from(["Turn", "StreamTurn"]), turn, meta),
                     st.tuples(st.just("GetSession"), st.builds(pb.GetSessionRequest, session_id=sid), meta))
    out: list[tuple[str, Any, dict[str, str]]] = []

    @hseed(seed)
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              phases=[Phase.generate])
    @given(c=case)
    def draw(c: Any) -> None:
        method, req, md = c
        if "authorization" not in md and len(out) % 10 != 9:
            md = {**md, **AUTH}
        out.append((method, req, {k: v for k, v in md.items() if v.isascii() and v.isprintable()}))

    draw()
    return out[:examples]


async def grpc_inprocess(ingress: Any, method: str, req: Any, md: dict[str, str]) -> tuple[Any, str | None]:
    from pipelines.errors import TandemError
    from serve.testing import FakeGrpcContext

    ctx = FakeGrpcContext(md)
    if method == "StreamTurn":
        try:
            async for _ in ingress.StreamTurn(req, ctx):
                pass
        except TandemError:
            pass  # raised after set_code: the proxy answers with the code set on the context
    else:
        await getattr(ingress, method)(req, ctx)
    return ctx.code, ctx.details


# -- runs --------------------------------------------------------------------------------------


def run_inprocess(http_examples: int, grpc_examples: int, seed: int = 0) -> dict[str, Any]:
    """The in-process fuzz run (see module docstring); returns the totals. Its work folder is removed after."""
    work = Path(tempfile.mkdtemp(prefix="tandem-fuzz-"))
    own_cache = "TANDEM_CACHE" not in os.environ
    if own_cache:
        os.environ["TANDEM_CACHE"] = str(work / "cache")
    try:
        return _inprocess(work, http_examples, grpc_examples, seed)
    finally:
        import shutil

        if own_cache:  # never left pointing at the removed folder
            os.environ.pop("TANDEM_CACHE", None)
        shutil.rmtree(work, ignore_errors=True)  # the harness's store and events: the totals are returned


def _inprocess(work: Path, http_examples: int, grpc_examples: int, seed: int) -> dict[str, Any]:
    import schemathesis

    from serve.testing import FakeHandle, IngressHarness, llm_chunks

    cfg = {
        "models": {"m": {"model_id": "m1", "source": "embedded"}},
        "roles": {"orchestrator": "m", "generator": "m", "slot_extractor": "m"},
        "domain": {"name": "support"},
        "store": {"kind": "sqlite", "path": str(work / "sessions.db"), "vault_key_file": None},
        "telemetry": {"jsonl_dir": str(work / "telemetry")},
        "pipeline": {"kind": "prompting", "turn_deadline_s": 10},
        "auth": {"enabled": True, "keys": [{"id": "fuzz", "sha256": hashlib.sha256(KEY.encode()).hexdigest()}]},
        "ingress": {"session_lock_wait_s": 1},
    }
    llm = FakeHandle(lambda m, a, k: llm_chunks("Fine, ", "thanks.") if m == "chat" else None)
    tally = Tally()
    signal.signal(signal.SIGALRM, _alarm)
    t0 = time.monotonic()
    with IngressHarness(cfg, llm=llm) as h:
        from starlette.testclient import TestClient

        with TestClient(h.app, raise_server_exceptions=False) as client:
            schema = schemathesis.openapi.from_asgi("/openapi.json", h.app, headers=dict(AUTH))  # a copy: it adds to it

            def call(case: Any, headers: dict[str, str]) -> tuple[int, bytes]:
                kw = case.as_transport_kwargs(headers=headers)
                kw.pop("base_url", None)
                url = kw.pop("url")
                r = client.request(kw.pop("method"), url, **{k: v for k, v in kw.items()
                                                            if k in ("headers", "params", "content", "json",
                                                                     "cookies", "data", "files")})
                return r.status_code, r.content

            call.real = False  # type: ignore[attr-defined]
            fuzz_http(schema, call, tally, http_examples, seed, work / "sessions.db")
            ok_http = client.post("/v1/sessions/after-fuzz/turns", json={"text": "hello"}, headers=AUTH)
        for method, req, md in grpc_cases(grpc_examples, seed):
            signal.setitimer(signal.ITIMER_REAL, HANG_S)
            try:
                code, details = asyncio.run(grpc_inprocess(h.ingress, method, req, md))
            except Hang:
                tally.hangs += 1
                continue
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            tally.grpc(method, code, details)
        from serve.protos import assistant_pb2 as pb

        code, _ = asyncio.run(grpc_inprocess(h.ingress, "Turn", pb.TurnRequest(session_id="after-fuzz-g", text="hi"),
                                             AUTH))
    return _summary(tally, time.monotonic() - t0, mode="in-process",
                    served_after={"http": ok_http.status_code == 200 and ok_http.json()["status"] == "ok",
                                  "grpc": code is None})


def run_real(http_examples: int, grpc_examples: int, seed: int = 0) -> dict[str, Any]:
    """A shorter pass against the real embedded app (prompting pipeline, auth on)."""
    import grpc
    import httpx
    import schemathesis
    import yaml

    from serve.cli import start_app, wait_ready
    from serve.protos import assistant_pb2 as pb
    from serve.protos import assistant_pb2_grpc

    work = Path(tempfile.mkdtemp(prefix="tandem-fuzz-real-"))
    raw = yaml.safe_load((REPO / "configs" / "embedded.yaml").read_text())
    import socket

    def free() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    raw["http_options"] = {"host": "127.0.0.1", "port": free()}
    raw["grpc_options"]["port"] = free()
    args = raw["applications"][0]["args"]
    args["pipeline"] = {"kind": "prompting", "turn_deadline_s": 60}  # each kind has its own settings
    args["store"] = {"kind": "sqlite", "path": str(work / "sessions.db"), "vault_key_file": str(work / "vault.key")}
    args["telemetry"] = {"jsonl_dir": str(work / "telemetry")}
    args["auth"] = {"enabled": True, "keys": [{"id": "fuzz", "sha256": hashlib.sha256(KEY.encode()).hexdigest()}]}
    from cryptography.fernet import Fernet

    (work / "vault.key").write_bytes(Fernet.generate_key())
    (work / "app.yaml").write_text(yaml.safe_dump(raw))
    import ray
    from ray import serve

    tally = Tally()
    signal.signal(signal.SIGALRM, _alarm)
    global HANG_S
    HANG_S = 90.0  # the real engine on 2 busy cores: a hang is no answer within the 60 s turn deadline + 30 s
    try:
        ep = start_app(str(work / "app.yaml"), num_cpus=4)
        wait_ready(ep["http"], timeout_s=900)
        t0 = time.monotonic()
        schema = schemathesis.openapi.from_url(f"{ep['http']}/openapi.json", headers=dict(AUTH))  # a copy: it adds to it
        session = httpx.Client(base_url=ep["http"], timeout=HANG_S)

        def call(case: Any, headers: dict[str, str]) -> tuple[int, bytes]:
            kw = case.as_transport_kwargs(base_url=ep["http"], headers=headers)
            r = session.request(kw.pop("method"), kw.pop("url"), **{k: v for k, v in kw.items()
                                                                   if k in ("headers", "params", "content", "json")})
            return r.status_code, r.content

        call.real = True  # type: ignore[attr-defined]
        fuzz_http(schema, call, tally, http_examples, seed, work / "sessions.db")
        ok_http = session.post("/v1/sessions/after-fuzz/turns", json={"text": "hello"}, headers=AUTH, timeout=120)
        with grpc.insecure_channel(ep["grpc"]) as ch:
            stub = assistant_pb2_grpc.AssistantStub(ch)
            for method, req, md in grpc_cases(grpc_examples, seed):
                try:
                    res = getattr(stub, method)(req, metadata=tuple(md.items()), timeout=HANG_S)
                    if method == "StreamTurn":
                        list(res)
                    tally.grpc(method, None, None)
                except grpc.RpcError as exc:
                    if exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                        tally.hangs += 1
                    else:
                        tally.grpc(method, exc.code(), exc.details())
            try:
                stub.Turn(pb.TurnRequest(session_id="after-fuzz-g", text="hi"), metadata=tuple(AUTH.items()), timeout=120)
                grpc_ok = True
            except grpc.RpcError:
                grpc_ok = False
        return _summary(tally, time.monotonic() - t0, mode="real app",
                        served_after={"http": ok_http.status_code == 200, "grpc": grpc_ok})
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()


def _summary(tally: Tally, seconds: float, *, mode: str, served_after: dict[str, bool]) -> dict[str, Any]:
    return {
        "mode": mode, "seconds": round(seconds, 1),
        "requests": tally.requests["http"] + tally.requests["grpc"],
        "http_requests": tally.requests["http"], "grpc_requests": tally.requests["grpc"],
        "outside_table": tally.requests["outside_table"], "hangs": tally.hangs,
        "stored_after_reject": tally.stored_after_reject, "served_after": served_after,
        "by_status": dict(sorted(tally.by_status.items())), "server_errors": dict(tally.server_errors),
        "examples_outside_table": tally.outside,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--http", type=int, default=8000, help="HTTP examples (spread over operations, +/- modes)")
    ap.add_argument("--grpc", type=int, default=2500, help="gRPC messages")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--real", action="store_true", help="against the real embedded app (use the team lock)")
    ap.add_argument("--out", default=None)
    ns = ap.parse_args(argv)
    res = (run_real if ns.real else run_inprocess)(ns.http, ns.grpc, ns.seed)
    out = Path(ns.out or REPO / "results" / ("fuzz_api_real.json" if ns.real else "fuzz_api.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2, default=str))
    print(f"{res['mode']}: {res['requests']} requests ({res['http_requests']} HTTP, {res['grpc_requests']} gRPC) "
          f"in {res['seconds']} s")
    print(f"outside the error table {res['outside_table']}  hangs {res['hangs']}  stored after a rejection "
          f"{res['stored_after_reject']}  normal turn afterwards {res['served_after']}")
    for k, v in res["by_status"].items():
        print(f"  {k:<28}{v:>7}")
    for k, v in res["server_errors"].items():
        print(f"  5xx {k:<40}{v:>5}")
    for ex in res["examples_outside_table"][:5]:
        print("  outside:", ex)
    good = (res["outside_table"] == 0 and res["hangs"] == 0 and res["stored_after_reject"] == 0
            and all(res["served_after"].values()))
    print(f"-> {out}")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
