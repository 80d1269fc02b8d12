"""Who is calling, and how often: API keys as hashes with ids, and per-key rate limits.

* :class:`ApiKeys` — ``Authorization: Bearer <key>`` (gRPC metadata ``authorization``).
  The server holds only ``sha256(key)`` per key id; a presented key is hashed and
  compared with :func:`hmac.compare_digest` against every entry. The *id* is the
  principal that owns sessions — the key itself is never stored or logged.
  Sources, merged: the config's ``keys``, the env var ``api_keys_env``
  (``id:sha256,id:sha256``), the ``keys_file`` (re-read when its mtime changes)
  and the ingress's Ray Serve ``user_config`` (``{auth: {keys: [...]}}``): the
  last two rotate keys without a restart. Auth off: every caller is ``local``.
* :class:`RateLimiter` — a moving window per key id (the ``limits`` library; memory
  storage in one replica, Redis storage shared by every ingress replica):
  :class:`~pipelines.errors.RateLimited` (429 / RESOURCE_EXHAUSTED) with the
  seconds until the window frees a slot. A limit store that cannot answer (Redis down or
  restarting) is :class:`~pipelines.errors.StoreUnavailable` (503 + Retry-After), not an
  untyped 500: the request is refused, as the session store would refuse it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from pipelines.errors import (
    ConfigError,
    RateLimited,
    StoreUnavailable,
    TandemError,
    Unauthenticated,
)
from pipelines.sessions import LOCAL_PRINCIPAL
from serve.config import ApiKeyEntry, AuthConfig, LimitsConfig

__all__ = ["hash_key", "ApiKeys", "RateLimiter", "parse_key_entries"]

logger = logging.getLogger("tandem.auth")


def hash_key(key: str) -> str:
    """The hex SHA-256 of an API key (what the config holds)."""
    return hashlib.sha256(key.encode()).hexdigest()


def parse_key_entries(raw: Any, *, source: str) -> list[ApiKeyEntry]:
    """Key entries from ``"id:sha256,..."`` or a list of ``{id, sha256}`` (``ConfigError`` names the source)."""
    if isinstance(raw, str):
        raw = [dict(zip(("id", "sha256"), part.strip().split(":", 1), strict=False))
               for part in raw.split(",") if part.strip()]
    try:
        return [ApiKeyEntry.model_validate(e) for e in (raw or [])]
    except Exception as exc:
        raise ConfigError(f"{source}: API keys must be id + sha256 (64 hex) entries") from exc


class ApiKeys:
    """Resolves a bearer token to its key id (see module docstring)."""

    def __init__(self, cfg: AuthConfig, *, file_check_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = cfg.enabled
        self._static = list(cfg.keys)
        if cfg.api_keys_env:
            self._static += parse_key_entries(os.environ.get(cfg.api_keys_env, ""), source=cfg.api_keys_env)
        self._file = Path(cfg.keys_file).expanduser() if cfg.keys_file else None
        self._file_entries: list[ApiKeyEntry] = []
        self._file_mtime: float | None = None
        self._file_checked = -math.inf
        self._file_check_s = file_check_s
        self._live: list[ApiKeyEntry] = []
        self._clock = clock
        self._refresh_file(force=True)
        if self.enabled and not self.entries():
            logger.warning("auth is enabled but no API key is configured: every request will be refused")

    def entries(self) -> list[ApiKeyEntry]:
        """Every key the server accepts now."""
        return [*self._static, *self._file_entries, *self._live]

    def set_live_keys(self, entries: Iterable[ApiKeyEntry]) -> None:
        """Replace the keys that arrived as ``user_config`` (a redeploy rotates them live)."""
        self._live = list(entries)
        logger.info("API keys reconfigured: %d live entries", len(self._live))

    def _refresh_file(self, force: bool = False) -> None:
        if self._file is None:
            return
        now = self._clock()
        if not force and now - self._file_checked < self._file_check_s:
            return
        self._file_checked = now
        try:
            mtime = self._file.stat().st_mtime
        except OSError:
            if self._file_entries:
                logger.warning("keys_file %s is gone: its keys are no longer accepted", self._file)
            self._file_entries, self._file_mtime = [], None
            return
        if mtime == self._file_mtime:
            return
        try:
            self._file_entries = parse_key_entries(yaml.safe_load(self._file.read_text()), source=str(self._file))
            self._file_mtime = mtime
        except (ConfigError, yaml.YAMLError, OSError) as exc:  # keep the last good set
            logger.error("keys_file %s not reloaded: %s", self._file, exc)

    def principal(self, header: str | None) -> str:
        """The key id of a valid bearer token (``local`` with auth off); :class:`Unauthenticated` otherwise."""
        if not self.enabled:
            return LOCAL_PRINCIPAL
        if not header or not header[:7].lower() == "bearer ":
            raise Unauthenticated("missing bearer token (Authorization: Bearer <api key>)")
        token = header[7:].strip()
        if not token:
            raise Unauthenticated("missing bearer token (Authorization: Bearer <api key>)")
        self._refresh_file()
        digest = hash_key(token)
        found: str | None = None
        for e in self.entries():  # no early exit: the time taken does not depend on which entry matched
            if hmac.compare_digest(digest, e.sha256) and found is None:
                found = e.id
        if found is None:
            raise Unauthenticated("unknown API key")
        return found

    def check(self, header: str | None) -> None:
        """Raise :class:`Unauthenticated` unless the header carries a valid key (auth on)."""
        self.principal(header)


class RateLimiter:
    """Per-principal moving-window limits; a no-op when ``limits.rate`` is unset."""

    def __init__(self, cfg: LimitsConfig, *, wall_clock: Callable[[], float] = time.time) -> None:
        self.items: list[Any] = []
        self._wall = wall_clock
        if cfg.rate is None:
            self._limiter = None
            return
        import limits
        from limits.storage import storage_from_string
        from limits.strategies import MovingWindowRateLimiter

        url = cfg.storage_url
        if cfg.storage_url_env:
            url = os.environ.get(cfg.storage_url_env, "").strip()
            if not url:
                raise ConfigError(f"limits.storage_url_env names {cfg.storage_url_env!r}, which is not set")
        self.items = limits.parse_many(cfg.rate)
        self._limiter = MovingWindowRateLimiter(storage_from_string(url))

    def hit(self, principal: str) -> None:
        """Count one request of ``principal``; :class:`RateLimited` when a window is full."""
        if self._limiter is None:
            return
        try:
            for item in self.items:
                if not self._limiter.hit(item, "tandem", principal):
                    stats = self._limiter.get_window_stats(item, "tandem", principal)
                    wait = max(1.0, math.ceil(stats.reset_time - self._wall()))
                    raise RateLimited(f"API key {principal!r} is over its rate limit ({item})",
                                      details={"limit": str(item)}, retry_after_s=wait)
        except TandemError:
            raise
        except Exception as exc:  # the storage's own errors (redis-py's, the limits library's wrappers)
            logger.warning("rate-limit store failed: %s: %s", type(exc).__name__, exc)
            raise StoreUnavailable("the rate-limit store failed; the request was not served",
                                   details={"reason": type(exc).__name__}) from exc
