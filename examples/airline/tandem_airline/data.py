"""Where the airline data lives, and the time its policy is set at.

The tau2-airline directory (``db.json``, ``policy.md``, ``tasks_train.json``) is ``$TANDEM_AIRLINE_DIR``, else
``../shared/data/tau2-airline`` beside the repository. The policy fixes the current time ("The current time
is 2024-05-15 15:00:00 EST."): the world's clock is that instant, unless ``$TANDEM_AIRLINE_NOW`` names
another (an ISO timestamp, or ``system``).
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path

from pipelines.domain import Clock, ConfigError, FixedClock, clock_from

from .world import AirlineWorld

__all__ = ["default_data_dir", "policy_clock", "load_world_clock_for", "load_world"]

_NOW = re.compile(r"current time is (\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})")


def default_data_dir() -> Path:
    env = os.environ.get("TANDEM_AIRLINE_DIR")
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[3].parent / "shared" / "data" / "tau2-airline"


def policy_clock(policy_text: str | None) -> Clock:
    """``$TANDEM_AIRLINE_NOW`` when set, else the time the policy states, else the system clock."""
    env = os.environ.get("TANDEM_AIRLINE_NOW")
    if env:
        return clock_from(env)
    m = _NOW.search(policy_text or "")
    return FixedClock(datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}")) if m else clock_from(None)


def load_world_clock_for(directory: Path) -> Clock:
    """The clock of the ``policy.md`` in ``directory`` (see :func:`policy_clock`)."""
    policy = directory / "policy.md"
    return policy_clock(policy.read_text(encoding="utf-8") if policy.is_file() else None)


def load_world(path: str | Path | None = None) -> AirlineWorld:
    """The world of ``db.json`` (``path``: the file or its directory; default :func:`default_data_dir`), with
    the clock of the ``policy.md`` beside it."""
    base = Path(path).expanduser() if path is not None else default_data_dir()
    db = base / "db.json" if base.is_dir() else base
    if not db.is_file():
        raise ConfigError(f"no airline db.json at {db} (set TANDEM_AIRLINE_DIR)", details={"path": str(db)})
    policy = db.with_name("policy.md")
    text = policy.read_text(encoding="utf-8") if policy.is_file() else None
    world = AirlineWorld.from_tau2_json(json.loads(db.read_text(encoding="utf-8")))
    return world.with_clock(policy_clock(text))
