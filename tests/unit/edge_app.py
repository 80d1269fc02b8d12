"""Shared set-up for the ingress unit tests: a real TandemIngress on fake handles, auth on or off."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from serve.testing import FakeHandle, IngressHarness, llm_chunks

KEYS = {"alice": "key-alice", "bob": "key-bob"}
__all__ = ["KEYS", "config", "harness", "auth", "sse_events", "stored_turns", "EchoLLM"]


def config(tmp: Path, *, auth_on: bool = True, kind: str = "prompting", **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "models": {"m": {"model_id": "m1", "source": "embedded"}},
        "roles": {"orchestrator": "m", "generator": "m", "slot_extractor": "m"},
        "domain": {"name": "support"},
        "store": {"kind": "sqlite", "path": str(tmp / "sessions.db"), "vault_key_file": None},
        "telemetry": {"jsonl_dir": str(tmp / "telemetry")},
        "pipeline": {"kind": kind, "turn_deadline_s": 10},
        "auth": {"enabled": auth_on, "keys": [{"id": i, "sha256": hashlib.sha256(k.encode()).hexdigest()}
                                              for i, k in KEYS.items()]},
    }
    for k, v in extra.items():
        cfg[k] = {**cfg.get(k, {}), **v} if isinstance(v, dict) else v
    return cfg


class EchoLLM:
    """A model deployment that answers every chat with fixed deltas and counts its calls."""

    def __init__(self, *texts: str) -> None:
        self.texts = texts or ("Hello ", "there.")
        self.handle = FakeHandle(self)
        self.chats = 0

    def __call__(self, method: str, args: tuple, kwargs: dict) -> Any:
        if method == "chat":
            self.chats += 1
            return llm_chunks(*self.texts)
        return None  # check_health


def harness(tmp: Path, llm: EchoLLM | None = None, **kw: Any) -> IngressHarness:
    import os

    os.environ["TANDEM_CACHE"] = str(tmp / "cache")  # the generated vault key lives here
    llm = llm or EchoLLM()
    cfg = config(tmp, **kw)
    return IngressHarness(cfg, llm=llm.handle)


def auth(who: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[who]}"}


def sse_events(text: str) -> list[dict[str, Any]]:
    """The data of every SSE frame (comment lines skipped), checked against its event name."""
    out = []
    for frame in text.split("\n\n"):
        lines = [x for x in frame.splitlines() if x and not x.startswith(":")]
        if not lines:
            continue
        name = next(x[7:] for x in lines if x.startswith("event: "))
        data = json.loads(next(x[6:] for x in lines if x.startswith("data: ")))
        assert data["type"] == name
        out.append(data)
    return out


def stored_turns(tmp: Path, session_id: str | None = None) -> list[dict[str, Any]]:
    """The raw rows of the session store (what is at rest), optionally of one session."""
    path = tmp / "sessions.db"
    if not path.exists():
        return []
    conn = sqlite3.connect(path)
    q = "SELECT body FROM turns" + (" WHERE session_id=?" if session_id else "")
    return [json.loads(r[0]) for r in conn.execute(q, (session_id,) if session_id else ())]


def run(coro: Any) -> Any:
    return asyncio.run(coro)
