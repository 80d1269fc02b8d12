"""Session and state stores behind :class:`pipelines.protocols.SessionStore`."""

from pathlib import Path
from typing import Any

__all__ = ["make_store"]


def make_store(cfg: Any) -> Any:
    """The configured session store (a ``StoreConfig``), behind the PII vault (placeholders at rest, sealed
    values). Light to import: operator tools (replay, explain, whatif) read the store without the app's stack."""
    from models.prepare import cache_dir
    from serve.stores.vault import RedactingStore, VaultCipher

    if cfg.kind == "sqlite":
        from serve.stores.sqlite import SQLiteSessionStore

        inner: Any = SQLiteSessionStore(Path(cfg.path).expanduser() if cfg.path else cache_dir() / "sessions.db",
                                        ttl_s=cfg.ttl_s)
    else:
        from serve.stores.redis import RedisSessionStore  # production profile

        inner = RedisSessionStore.from_config(cfg)
    cipher = VaultCipher.from_settings(key_env=cfg.vault_key_env, key_file=cfg.vault_key_file,
                                       default_file=cache_dir() / "vault.key")
    return RedactingStore(inner, cipher)
