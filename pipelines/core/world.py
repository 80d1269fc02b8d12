"""A world of records: the platform's base for a pack whose state is tables of pydantic models keyed by id.

A pack declares its tables as fields (``dict[str, Model]``) and names the entity kind of each in
:attr:`RecordWorld.KINDS`; it writes :meth:`RecordWorld.write_scope` (what one write may change) and its
lookups. Everything else a :class:`~pipelines.core.runner.World` needs comes from here:

=====================  ============================================================================
``entities()``         every entity as ``(kind, id, json)``: what the world store persists
``from_entities(rows)`` the world made of stored rows
``entity_json``        one entity's JSON (unset optional fields left out)
``fork(scope)``        a copy whose scoped entities are private deep copies (the rest shared)
``diff(other, scope)`` the entities a write changed on a fork: scoped ones whose JSON differs, new ones
``adopt(other, ...)``  take the changed entities from a fork after the ledger commit
``has(kind, id)``      whether the entity exists
``from_json`` /        the whole world as one JSON document, in the tables' own shape (a dataset file
``to_json()``          such as tau2's ``db.json`` round-trips: ``from_json(d).to_json() == d``)
``clone()``            a deep, independent copy
=====================  ============================================================================

::

    class Library(RecordWorld):
        KINDS: ClassVar[dict[str, str]] = {"member": "members", "loan": "loans"}
        members: dict[str, Member] = Field(default_factory=dict)
        loans: dict[str, Loan] = Field(default_factory=dict)

        def write_scope(self, tool, args, user_id):
            member = self.members.get(user_id or "")
            return WriteScope(existing={"member": {member.member_id}, "loan": set(member.loans)}) if member \\
                else WriteScope()

Private attributes (a clock) travel with a fork. A write should not delete an entity (a status says that
a record is gone): the world store keeps rows, and a removed row cannot be committed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict

from .runner import WriteScope

__all__ = ["RecordWorld"]


class RecordWorld(BaseModel):
    """Tables of records keyed by id (see module docstring)."""

    model_config = ConfigDict(extra="forbid")

    #: Entity kind → the field that holds its table (``{"user": "users", "order": "orders"}``).
    KINDS: ClassVar[Mapping[str, str]] = {}

    # -- tables ------------------------------------------------------------------------------
    def table(self, kind: str) -> dict[str, Any]:
        """The table of ``kind`` (id → record); ``KeyError`` for a kind the world does not declare."""
        return getattr(self, self.KINDS[kind])  # type: ignore[no-any-return]

    @classmethod
    def model_of(cls, kind: str) -> type[BaseModel]:
        """The record model of ``kind``, read off its field's ``dict[str, Model]`` annotation."""
        annotation = cls.model_fields[cls.KINDS[kind]].annotation
        args = get_args(annotation) if get_origin(annotation) is dict else ()
        if len(args) != 2 or not (isinstance(args[1], type) and issubclass(args[1], BaseModel)):
            raise TypeError(f"{cls.__name__}.{cls.KINDS[kind]} must be a dict[str, <pydantic model>]")
        return args[1]

    def has(self, kind: str, key: str) -> bool:
        """Whether the entity exists."""
        return kind in self.KINDS and key in self.table(kind)

    # -- the world store's rows ----------------------------------------------------------------
    def entities(self) -> list[tuple[str, str, str]]:
        """Every entity as ``(kind, id, json)`` (what a world store persists)."""
        return [(kind, key, self.entity_json(kind, key)) for kind in self.KINDS for key in self.table(kind)]

    def entity_json(self, kind: str, key: str) -> str:
        """One entity's JSON (unset optional fields left out)."""
        return str(self.table(kind)[key].model_dump_json(exclude_none=True))

    @classmethod
    def from_entities(cls, rows: Iterable[tuple[str, str, str]]) -> Any:
        """The world made of stored ``(kind, id, json)`` rows."""
        tables: dict[str, dict[str, Any]] = {field: {} for field in cls.KINDS.values()}
        for kind, key, body in rows:
            tables[cls.KINDS[kind]][key] = cls.model_of(kind).model_validate_json(body)
        return cls(**tables)

    # -- one JSON document ---------------------------------------------------------------------
    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Any:
        """Validate a whole-world document (the tables' own shape, e.g. a tau2 ``db.json``)."""
        return cls.model_validate(data)

    def to_json(self) -> dict[str, Any]:
        """The world as one JSON document (unset optional fields left out)."""
        return self.model_dump(mode="json", exclude_none=True)

    def clone(self) -> Any:
        """A deep, independent copy (through the tables' JSON: many times faster than a deep copy)."""
        copy = type(self).model_validate(self.model_dump(mode="json"))
        for key, value in (self.__pydantic_private__ or {}).items():
            setattr(copy, key, value)
        return copy

    # -- one write ---------------------------------------------------------------------------
    def write_scope(self, tool: str, args: Mapping[str, Any], user_id: str | None) -> WriteScope:
        """What a write of ``tool`` by ``user_id`` may change (the pack says: its user's own records)."""
        raise NotImplementedError(f"{type(self).__name__}.write_scope: say what a write may change")

    def fork(self, scope: WriteScope) -> Any:
        """A copy in which the scope's entities are private deep copies; every other entity is shared with
        this world (read-only by contract) until :meth:`adopt`."""
        tables = {field: dict(getattr(self, field)) for field in self.KINDS.values()}
        for kind, keys in scope.existing.items():
            table = tables[self.KINDS[kind]]
            for key in keys:
                if key in table:
                    table[key] = table[key].model_copy(deep=True)
        return self.model_copy(update=tables)

    def diff(self, other: RecordWorld, scope: WriteScope) -> dict[str, list[str]]:
        """What a write on ``other`` (a fork of this world) changed: entities of the scope whose JSON differs,
        entities this world does not have, and entities ``other`` lost (kind → sorted ids)."""
        out: dict[str, list[str]] = {}
        for kind in self.KINDS:
            mine, theirs = self.table(kind), other.table(kind)
            keys = {k for k in scope.existing.get(kind, ()) if k in mine and k in theirs
                    and theirs[k] is not mine[k] and theirs[k] != mine[k]}
            keys |= set(theirs) ^ set(mine)
            if keys:
                out[kind] = sorted(keys)
        return out

    def adopt(self, other: RecordWorld, changed: Mapping[str, Sequence[str]]) -> None:
        """Take the changed entities from ``other`` (a fork after a committed write)."""
        for kind, keys in changed.items():
            mine, theirs = self.table(kind), other.table(kind)
            for key in keys:
                if key in theirs:
                    mine[key] = theirs[key]
                else:
                    mine.pop(key, None)
