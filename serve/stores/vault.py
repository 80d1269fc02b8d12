"""PII at rest: stores hold placeholders; the per-session vault is sealed with a key the store never sees.

:class:`RedactingStore` wraps a :class:`~pipelines.sessions.TurnStore`
(SQLite or Redis). On every save it redacts ``user_text``, ``reply_text`` and
the string values of ``meta`` with the session's vault
(:class:`pipelines.guardrails.pii.Vault`: ``[EMAIL_1]``, ``[PHONE_2]``, ...; in
``meta`` also every value the vault holds, and a pipeline's own placeholders are
kept apart — its turn numbered them, not this vault — so a read returns them as saved),
seals the vault (placeholder → value) with Fernet (AES-128-CBC + HMAC-SHA256)
and hands both to the inner store, which writes them in the same transaction.
Reads restore the values for the session's owner — the runner's history (so
pipelines see what the user typed) and ``GET`` session — and nothing else: a
copy of the database file or a Redis dump holds placeholders and ciphertext.

The key (:class:`VaultCipher`): ``store.vault_key_env`` (an env var holding a
Fernet key; production: a Kubernetes secret), else ``store.vault_key_file``,
else ``<cache>/vault.key``, generated on first use with mode 0600 (embedded).
Losing the key loses the values, never the sessions: placeholders stay readable.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from pipelines.errors import ConfigError
from pipelines.guardrails.pii import PII_KINDS, PLACEHOLDER_RE, Vault
from pipelines.protocols import TurnRecord
from pipelines.sessions import LOCAL_PRINCIPAL, TurnLoad, load_turn_by_calls

__all__ = ["VaultCipher", "RedactingStore", "map_strings"]

logger = logging.getLogger("tandem.vault")


class VaultCipher:
    """Seals and opens a vault's entries (Fernet: authenticated encryption, key rotation by MultiFernet)."""

    def __init__(self, key: bytes | str) -> None:
        try:
            self._fernet = Fernet(key)
        except (ValueError, TypeError) as exc:
            raise ConfigError("the vault key is not a Fernet key (32 url-safe base64 bytes)") from exc

    @classmethod
    def from_settings(cls, *, key_env: str | None, key_file: str | None, default_file: Path) -> VaultCipher:
        """The key from the env var, else the file, else ``default_file`` (created, mode 0600)."""
        if key_env:
            key = os.environ.get(key_env, "").strip()
            if not key:
                raise ConfigError(f"store.vault_key_env names {key_env!r}, which is not set or empty")
            return cls(key)
        path = Path(key_file).expanduser() if key_file else default_file
        if not path.exists():
            if key_file:
                raise ConfigError(f"store.vault_key_file {path} does not exist")
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(Fernet.generate_key())
            logger.info("generated a vault key at %s", path)
        return cls(path.read_bytes().strip())

    def seal(self, entries: dict[str, str]) -> bytes:
        """The entries as an authenticated ciphertext."""
        return self._fernet.encrypt(json.dumps(entries, sort_keys=True).encode())

    def open(self, blob: bytes | str | None) -> dict[str, str]:
        """The entries of a sealed vault ({} when absent or unreadable with this key; logged)."""
        if not blob:
            return {}
        try:
            return dict(json.loads(self._fernet.decrypt(blob if isinstance(blob, bytes) else blob.encode())))
        except (InvalidToken, ValueError) as exc:
            logger.error("a session vault could not be opened (%s): values stay as placeholders", type(exc).__name__)
            return {}


#: A pipeline's placeholder at rest in meta: ``[EMAIL_1]`` stored as ``⟦EMAIL_1⟧``, which no vault restores.
_ESCAPED = re.compile(r"\u27e6(" + "|".join(PII_KINDS) + r")_(\d+)\u27e7")


def _escape(text: str) -> str:
    return PLACEHOLDER_RE.sub(lambda m: f"\u27e6{m.group(1)}_{m.group(2)}\u27e7", text)


def _unescape(text: str) -> str:
    return _ESCAPED.sub(lambda m: f"[{m.group(1)}_{m.group(2)}]", text)


def map_strings(obj: Any, fn: Any) -> Any:
    """A copy of a JSON-like value with ``fn`` applied to every string value (keys untouched)."""
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: map_strings(v, fn) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [map_strings(v, fn) for v in obj]
    return obj


class RedactingStore:
    """A :class:`~pipelines.sessions.TurnStore` that keeps PII out of the inner store (module docstring)."""

    def __init__(self, inner: Any, cipher: VaultCipher) -> None:
        self.inner = inner
        self.cipher = cipher

    async def _vault(self, session_id: str) -> Vault:
        return Vault.from_entries(self.cipher.open(await self.inner.get_vault(session_id)))

    @staticmethod
    def _restore(vault: Vault, rec: TurnRecord) -> TurnRecord:
        return rec.model_copy(update={
            "user_text": vault.restore(rec.user_text),
            "reply_text": vault.restore(rec.reply_text),
            "meta": map_strings(rec.meta, lambda s: _unescape(vault.restore(s))),
        })

    async def get_history(self, session_id: str, limit: int | None = None) -> list[TurnRecord]:
        """The owner's view: stored turns with their values restored."""
        rows = await self.inner.get_history(session_id, limit)
        if not rows:
            return rows
        vault = await self._vault(session_id)
        return [self._restore(vault, r) for r in rows]

    async def load_turn(self, session_id: str, idempotency_key: str | None, limit: int | None) -> TurnLoad:
        """Owner, keyed turn and history restored with the session's vault: one inner read where the inner
        store reads its vault with them (``load_turn_sealed``), else the inner calls one by one."""
        sealed = getattr(self.inner, "load_turn_sealed", None)
        if sealed is None:
            return await load_turn_by_calls(self, session_id, idempotency_key, limit)  # type: ignore[arg-type]
        loaded, blob = await sealed(session_id, idempotency_key, limit)
        if loaded.known is None and not loaded.history:
            return loaded
        vault = Vault.from_entries(self.cipher.open(blob))
        return TurnLoad(loaded.owner, None if loaded.known is None else self._restore(vault, loaded.known),
                        [self._restore(vault, r) for r in loaded.history])

    async def session_exists(self, session_id: str) -> bool:
        return await self.inner.session_exists(session_id)

    async def owner(self, session_id: str) -> str | None:
        return await self.inner.owner(session_id)

    async def save_turn(self, session_id: str, record: TurnRecord, *, principal: str,
                        idempotency_key: str | None = None, fence: int | None = None) -> TurnRecord:
        """Redact the record with the session's vault; the inner store writes both at once (fenced with
        ``fence``, the turn's lease token, when given)."""
        vault = await self._vault(session_id)
        redacted = record.model_copy(update={
            "user_text": vault.redact(record.user_text),
            "reply_text": vault.redact(record.reply_text),
            # a pipeline's own placeholders in meta are its turn's, not this vault's: kept apart (escaped) so a
            # read never restores them to another value; then every value this vault holds is sealed, also one
            # whose pattern alone is not found (an address's second line said before)
            "meta": vault.conceal(map_strings(record.meta, lambda s: vault.redact(_escape(s)))),
        })
        fenced = {} if fence is None else {"fence": fence}
        stored = await self.inner.save_turn(session_id, redacted, principal=principal,
                                            idempotency_key=idempotency_key, vault=self.cipher.seal(vault.entries()),
                                            **fenced)
        return self._restore(vault, stored)

    async def append_turn(self, session_id: str, record: TurnRecord) -> None:
        await self.save_turn(session_id, record, principal=await self.owner(session_id) or LOCAL_PRINCIPAL)

    async def find_turn(self, session_id: str, idempotency_key: str) -> TurnRecord | None:
        rec = await self.inner.find_turn(session_id, idempotency_key)
        return None if rec is None else self._restore(await self._vault(session_id), rec)

    async def acquire_lease(self, session_id: str, holder: str, ttl_s: float) -> int:
        return await self.inner.acquire_lease(session_id, holder, ttl_s)

    async def release_lease(self, session_id: str, holder: str) -> None:
        await self.inner.release_lease(session_id, holder)

    async def lease_left_s(self, session_id: str) -> float | None:
        left = getattr(self.inner, "lease_left_s", None)
        return None if left is None else await left(session_id)
