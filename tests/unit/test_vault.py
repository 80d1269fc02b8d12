"""serve.stores.vault: placeholders at rest, a sealed per-session vault, values back for the owner only."""

from __future__ import annotations

import asyncio
import sqlite3
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from pipelines import errors as E
from pipelines.protocols import TurnRecord
from serve.stores.sqlite import SQLiteSessionStore
from serve.stores.vault import RedactingStore, VaultCipher, map_strings

EMAIL, PHONE = "Alex.Rivera@example.com", "+1 415-555-0134"


def _store(tmp_path: Path, key: bytes | None = None) -> RedactingStore:
    return RedactingStore(SQLiteSessionStore(tmp_path / "s.db"), VaultCipher(key or Fernet.generate_key()))


def _save(store, sid, turn_id, user, reply="", meta=None, principal="alice"):
    rec = TurnRecord(turn_id=turn_id, index=0, user_text=user, reply_text=reply, meta=meta or {})
    return asyncio.run(store.save_turn(sid, rec, principal=principal))


def test_rows_hold_placeholders_and_the_owner_reads_values(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _save(store, "s", "t1", f"my email is {EMAIL}", reply=f"Thanks, I'll write to {EMAIL}.",
          meta={"dr": {"facts": {"email": EMAIL}}, "n": 3})
    _save(store, "s", "t2", f"and call {PHONE} or {EMAIL}")
    raw = [r[0] for r in sqlite3.connect(store.inner.path).execute("SELECT body FROM turns ORDER BY idx")]
    assert EMAIL not in "".join(raw) and PHONE not in "".join(raw)
    assert "[EMAIL_1]" in raw[0] and "[PHONE_1]" in raw[1] and "[EMAIL_" in raw[1]
    hist = asyncio.run(store.get_history("s"))
    assert hist[0].user_text == f"my email is {EMAIL}" and hist[0].reply_text == f"Thanks, I'll write to {EMAIL}."
    assert hist[0].meta == {"dr": {"facts": {"email": EMAIL}}, "n": 3}
    assert hist[1].user_text == f"and call {PHONE} or {EMAIL}"


def test_a_pipelines_own_placeholders_in_meta_come_back_as_they_were_saved(tmp_path: Path) -> None:
    # the turn named the typed address [ADDRESS_1]; this store's vault names another value [ADDRESS_1] (it read
    # the reply first): a read never turns the turn's placeholder into the store's value
    store = _store(tmp_path)
    _save(store, "s", "t1", "what is on file?", reply="You live at 4 Elm Street, Apt 9.")
    meta = {"tandem": {"pending": {"address1": "[ADDRESS_1]", "note": "to [ADDRESS_1], not 4 Elm Street"}}}
    _save(store, "s", "t2", "ship it to 12 Ocean Drive", meta=meta)
    raw = "".join(r[0] for r in sqlite3.connect(store.inner.path).execute("SELECT body FROM turns"))
    assert "4 Elm Street" not in raw and "12 Ocean Drive" not in raw
    assert asyncio.run(store.get_history("s"))[1].meta == meta


def test_a_value_the_vault_holds_is_sealed_in_meta_even_where_its_pattern_alone_is_not_found(tmp_path: Path) -> None:
    store = _store(tmp_path)
    # "Apt 9" is found as the second line of an address; alone, in meta, only the vault knows it
    _save(store, "s", "t1", "I live at 4 Elm Street, Apt 9.", meta={"tandem": {"address2": "Apt 9", "unit": "Apt 90"}})
    raw = "".join(r[0] for r in sqlite3.connect(store.inner.path).execute("SELECT body FROM turns"))
    assert "Apt 9\"" not in raw and "Apt 90" in raw  # another value ("Apt 90") is not the one held
    assert asyncio.run(store.get_history("s"))[0].meta == {"tandem": {"address2": "Apt 9", "unit": "Apt 90"}}


def test_the_vault_is_sealed_not_stored_in_the_clear(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _save(store, "s", "t1", f"my email is {EMAIL}")
    data = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*"))
    assert EMAIL.encode() not in data and EMAIL.lower().encode() not in data


def test_another_key_cannot_restore_values(tmp_path: Path) -> None:
    _save(_store(tmp_path), "s", "t1", f"mail {EMAIL}")
    stranger = _store(tmp_path)  # same file, another key
    assert asyncio.run(stranger.get_history("s"))[0].user_text == "mail [EMAIL_1]"


def test_a_checkpoint_then_the_final_save_keep_one_vault(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _save(store, "s", "t1", f"mail {EMAIL}", meta={"checkpoint": True})
    _save(store, "s", "t1", f"mail {EMAIL}", reply=f"sent to {EMAIL}")
    [rec] = asyncio.run(store.get_history("s"))
    assert rec.reply_text == f"sent to {EMAIL}"
    assert asyncio.run(store.find_turn("s", "nope")) is None


def test_ownership_passes_through(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _save(store, "s", "t1", "hello")
    with pytest.raises(E.NotFound):
        _save(store, "s", "t2", "hi", principal="mallory")
    assert asyncio.run(store.owner("s")) == "alice"


def test_key_from_env_file_or_generated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = tmp_path / "cache" / "vault.key"
    c1 = VaultCipher.from_settings(key_env=None, key_file=None, default_file=default)
    assert stat.S_IMODE(default.stat().st_mode) == 0o600
    c2 = VaultCipher.from_settings(key_env=None, key_file=None, default_file=default)  # reused, not regenerated
    assert c2.open(c1.seal({"[EMAIL_1]": EMAIL})) == {"[EMAIL_1]": EMAIL}
    monkeypatch.setenv("TANDEM_TEST_VAULT", default.read_text())
    c3 = VaultCipher.from_settings(key_env="TANDEM_TEST_VAULT", key_file=None, default_file=tmp_path / "x")
    assert c3.open(c1.seal({"a": "b"})) == {"a": "b"}
    with pytest.raises(E.ConfigError):
        VaultCipher.from_settings(key_env="TANDEM_UNSET_VAULT", key_file=None, default_file=default)
    with pytest.raises(E.ConfigError):
        VaultCipher.from_settings(key_env=None, key_file=str(tmp_path / "missing"), default_file=default)
    with pytest.raises(E.ConfigError):
        VaultCipher(b"not a key")


def test_map_strings_touches_values_not_keys() -> None:
    assert map_strings({"a@b.co": ["x", 1, {"k": "y"}]}, str.upper) == {"a@b.co": ["X", 1, {"k": "Y"}]}
