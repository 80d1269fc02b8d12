"""The records service the http_pack tools call: a small JSON API over HTTP (stdlib only).

It stands for the system of record a real pack talks to (an orders API, a booking system): it owns the
users and their records, enforces its own rules, and deduplicates writes on the ``Idempotency-Key``
header (the same key answers the same response again, without applying the change twice).

=======================================  ==================================================================
``GET /healthz``                         ``{"ok": true}``
``GET /users/{user_id}/records``         ``{"records": [{"record_id", "title", "status"}, ...]}``; 404
                                         ``{"reason": "user_not_found"}``
``POST /records/{record_id}/archive``    body ``{"user_id"}``: 200 the archived record; 404
                                         ``record_not_found``; 409 ``not_owned`` / ``not_active``; 400 a
                                         body without ``user_id``
=======================================  ==================================================================

Run it on its own with ``python -m tandem_http_pack.service --port 8765`` (seeded: the same seed gives
the same records), or in a thread with :func:`start` (the pack's tests).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Records", "seeded", "make_server", "start", "main"]

TITLES = ("spring plan", "garden plot", "reading list", "weekly box", "tool loan", "room booking")
_USER_RECORDS = re.compile(r"^/users/([A-Za-z0-9_-]{1,40})/records$")
_ARCHIVE = re.compile(r"^/records/([A-Za-z0-9_-]{1,40})/archive$")


@dataclass
class Records:
    """The service's state: users → their record ids, records, and the answers given per idempotency key."""

    owners: dict[str, list[str]] = field(default_factory=dict)
    records: dict[str, dict[str, str]] = field(default_factory=dict)
    answered: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    applied: int = 0  # how many archive changes were applied (tests read it)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def list_records(self, user_id: str) -> tuple[int, dict[str, Any]]:
        if user_id not in self.owners:
            return 404, {"reason": "user_not_found"}
        return 200, {"records": [dict(self.records[r]) for r in self.owners[user_id]]}

    def archive(self, record_id: str, body: Any, key: str | None) -> tuple[int, dict[str, Any]]:
        with self.lock:
            if key is not None and key in self.answered:
                return self.answered[key]
            answer = self._archive(record_id, body)
            if key is not None:
                self.answered[key] = answer
            return answer

    def _archive(self, record_id: str, body: Any) -> tuple[int, dict[str, Any]]:
        user_id = body.get("user_id") if isinstance(body, dict) else None
        if not isinstance(user_id, str) or not user_id:
            return 400, {"reason": "bad_request", "detail": "user_id is required"}
        record = self.records.get(record_id)
        if record is None:
            return 404, {"reason": "record_not_found"}
        if record_id not in self.owners.get(user_id, []):
            return 409, {"reason": "not_owned"}
        if record["status"] != "active":
            return 409, {"reason": "not_active"}
        record["status"] = "archived"
        self.applied += 1
        return 200, dict(record)


def seeded(seed: int = 7, users: int = 4) -> Records:
    """Each user owns two or three records (the same seed gives the same records)."""
    rng = random.Random(seed)
    state = Records()
    for u in range(1, users + 1):
        user_id = f"u{u:03d}"
        state.owners[user_id] = []
        for _ in range(rng.randint(2, 3)):
            rid = f"R{len(state.records) + 1:04d}"
            state.records[rid] = {"record_id": rid, "title": rng.choice(TITLES), "status": "active"}
            state.owners[user_id].append(rid)
    return state


def _handler(state: Records) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/healthz":
                return self._answer(200, {"ok": True})
            m = _USER_RECORDS.match(self.path)
            self._answer(*state.list_records(m.group(1))) if m else self._answer(404, {"reason": "no_route"})

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            m = _ARCHIVE.match(self.path)
            if m is None:
                return self._answer(404, {"reason": "no_route"})
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                return self._answer(400, {"reason": "bad_request", "detail": "the body is not JSON"})
            self._answer(*state.archive(m.group(1), body, self.headers.get("Idempotency-Key")))

    return Handler


def make_server(state: Records, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """The service over ``state`` bound to ``host:port`` (0: a free port); call ``serve_forever``."""
    server = ThreadingHTTPServer((host, port), _handler(state))
    server.daemon_threads = True
    return server


def start(state: Records | None = None, host: str = "127.0.0.1", port: int = 0) -> tuple[str, Records,
                                                                                         Callable[[], None]]:
    """Serve in a background thread; returns the base URL, the state and a stop function."""
    state = state if state is not None else seeded()
    server = make_server(state, host, port)
    thread = threading.Thread(target=server.serve_forever, name="http_pack-service", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return f"http://{host}:{server.server_address[1]}", state, stop


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The http_pack pack's records service")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    server = make_server(seeded(args.seed), args.host, args.port)
    print(f"records service on http://{args.host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
