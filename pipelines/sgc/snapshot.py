"""The live-state snapshot W1 reads, with prewarm (session open) and fill (tool time).

A :class:`Snapshot` is immutable. Each entry remembers the live-state
``version`` it was read at and the turn it was loaded in, so that a cached
value is never mistaken for a fresh one: :meth:`Snapshot.stale_keys` names the
entries that are older than the live version or than the allowed age.
State reaches the kernels through the one-method :class:`StateLoader` Protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SnapshotEntry",
    "Snapshot",
    "LoadedState",
    "StateLoader",
    "prewarm",
    "fill",
]


class SnapshotEntry(BaseModel):
    """One state key's value, with where and when it was read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: Any
    version: int = Field(..., ge=0, description="Live-state version the value was read at.")
    loaded_at_turn: int = Field(..., ge=0)


class Snapshot(BaseModel):
    """Immutable per-session view of live state (keys → entries)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: str = ""
    version: int = Field(0, ge=0, description="Newest live-state version seen by any load.")
    loaded_at_turn: int = Field(0, ge=0, description="Turn of the newest load.")
    entries: dict[str, SnapshotEntry] = Field(default_factory=dict)

    def has(self, key: str) -> bool:
        return key in self.entries

    def value(self, key: str, default: Any = None) -> Any:
        entry = self.entries.get(key)
        return default if entry is None else entry.value

    def values(self) -> dict[str, Any]:
        """Plain key → value mapping."""
        return {k: e.value for k, e in self.entries.items()}

    def missing_keys(self, keys: Iterable[str]) -> list[str]:
        return [k for k in keys if k not in self.entries]

    def stale_keys(
        self,
        keys: Iterable[str],
        *,
        turn: int | None = None,
        live_version: int | None = None,
        max_age_turns: int | None = None,
    ) -> list[str]:
        """Present keys whose entry is older than ``live_version`` or than ``max_age_turns`` at ``turn``."""
        out = []
        for k in keys:
            e = self.entries.get(k)
            if e is None:
                continue
            if live_version is not None and e.version < live_version:
                out.append(k)
            elif turn is not None and max_age_turns is not None and turn - e.loaded_at_turn > max_age_turns:
                out.append(k)
        return out

    def with_values(self, values: Mapping[str, Any], *, version: int, turn: int) -> Snapshot:
        """A new snapshot with ``values`` merged in, stamped with ``version`` and ``turn``."""
        entries = dict(self.entries)
        for k, v in values.items():
            entries[k] = SnapshotEntry(value=v, version=version, loaded_at_turn=turn)
        return Snapshot(
            session_id=self.session_id,
            version=max(self.version, version),
            loaded_at_turn=max(self.loaded_at_turn, turn),
            entries=entries,
        )

    @classmethod
    def of(cls, values: Mapping[str, Any], *, session_id: str = "", version: int = 0, turn: int = 0) -> Snapshot:
        """A snapshot built directly from values (tests, offline replays)."""
        return cls(session_id=session_id).with_values(values, version=version, turn=turn)


class LoadedState(BaseModel):
    """What a loader returns: the values found and the live version they were read at."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(..., ge=0)
    values: dict[str, Any]


@runtime_checkable
class StateLoader(Protocol):
    """Reads live user state by key (a store, a tool backend, a test double)."""

    async def load(self, session_id: str, keys: Sequence[str]) -> LoadedState:
        """Return the values of those ``keys`` that exist, and the live-state version read.

        Keys the state does not have are left out of ``values`` (not an error).
        """
        ...


async def prewarm(loader: StateLoader, session_id: str, keys: Sequence[str], *, turn: int = 0) -> Snapshot:
    """Session open: load the fast-path ``keys`` into a new snapshot."""
    loaded = await loader.load(session_id, list(keys))
    return Snapshot(session_id=session_id).with_values(loaded.values, version=loaded.version, turn=turn)


async def fill(
    snapshot: Snapshot,
    loader: StateLoader,
    keys: Sequence[str],
    *,
    turn: int,
    refresh: bool = False,
) -> Snapshot:
    """Tool time: load ``keys`` the snapshot lacks (all of them when ``refresh``) into a new snapshot."""
    wanted = list(keys) if refresh else snapshot.missing_keys(keys)
    if not wanted:
        return snapshot
    loaded = await loader.load(snapshot.session_id, wanted)
    return snapshot.with_values(loaded.values, version=loaded.version, turn=turn)
