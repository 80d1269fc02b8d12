"""The http_pack world: users and their records, seeded (the same seed gives the same world).

It is a Tandem ``World``: stored as ``(kind, id, json)`` rows, forked for one write (the entities the
write may change: the user and their records), the changed entities adopted after the commit.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.domain import WriteScope

__all__ = ["Record", "User", "World", "generate_world"]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    record_id: str
    title: str
    status: str = "active"


class User(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str
    records: list[str] = Field(default_factory=list)


_MODELS: dict[str, type[BaseModel]] = {"user": User, "record": Record}


class World(BaseModel):
    model_config = ConfigDict(extra="forbid")

    users: dict[str, User] = Field(default_factory=dict)
    records: dict[str, Record] = Field(default_factory=dict)

    def _table(self, kind: str) -> dict[str, Any]:
        return self.users if kind == "user" else self.records

    def entities(self) -> list[tuple[str, str, str]]:
        return [(kind, key, self.entity_json(kind, key)) for kind in _MODELS for key in self._table(kind)]

    def entity_json(self, kind: str, key: str) -> str:
        return self._table(kind)[key].model_dump_json()

    @classmethod
    def from_entities(cls, rows: Iterable[tuple[str, str, str]]) -> World:
        world = cls()
        for kind, key, body in rows:
            world._table(kind)[key] = _MODELS[kind].model_validate_json(body)
        return world

    def write_scope(self, tool: str, args: Mapping[str, Any], user_id: str | None) -> WriteScope:
        user = self.users.get(user_id or "")
        return WriteScope(existing={"user": {user.user_id}, "record": set(user.records)}) if user else WriteScope()

    def fork(self, scope: WriteScope) -> World:
        users, records = dict(self.users), dict(self.records)
        for key in scope.existing.get("user", ()):
            users[key] = users[key].model_copy(deep=True)
        for key in scope.existing.get("record", ()):
            records[key] = records[key].model_copy(deep=True)
        return World.model_construct(users=users, records=records)

    def has(self, kind: str, key: str) -> bool:
        return key in self._table(kind)

    def adopt(self, other: World, changed: Mapping[str, Sequence[str]]) -> None:
        for kind, keys in changed.items():
            for key in keys:
                self._table(kind)[key] = other._table(kind)[key]


TITLES = ("spring plan", "garden plot", "reading list", "weekly box", "tool loan", "room booking")


def generate_world(seed: int = 7, users: int = 4) -> World:
    """A small world: each user owns two or three records."""
    rng = random.Random(seed)
    world = World()
    n = 0
    for u in range(1, users + 1):
        user = User(user_id=f"u{u:03d}")
        for _ in range(rng.randint(2, 3)):
            n += 1
            rid = f"R{n:04d}"
            world.records[rid] = Record(record_id=rid, title=rng.choice(TITLES))
            user.records.append(rid)
        world.users[user.user_id] = user
    return world
