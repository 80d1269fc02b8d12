"""The http_pack tools: typed arguments and results, a read and a write, run against the world."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from pipelines.domain import ToolContext, ToolRegistry, ToolSpec
from pipelines.errors import IneligibleAction, ToolError

from .world import World

__all__ = ["build_registry"]


class UserArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: str


class RecordArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    record_id: str


class Records(BaseModel):
    records: list[dict[str, str]]


class RecordResult(BaseModel):
    record_id: str
    title: str
    status: str


def _owned(args: RecordArgs, ctx: ToolContext, world: World):
    record = world.records.get(args.record_id)
    user = world.users.get(ctx.authenticated_user_id or "")
    if record is None:
        raise ToolError(f"no record {args.record_id} [record_not_found]", details={"reason": "record_not_found"})
    if user is None or args.record_id not in user.records:
        raise IneligibleAction("that record is not yours [not_owned]", details={"reason": "not_owned"})
    return record


def list_records(args: UserArgs, ctx: ToolContext, world: World) -> Records:
    user = world.users.get(args.user_id)
    if user is None or args.user_id != ctx.authenticated_user_id:
        raise IneligibleAction("only your own records [not_owned]", details={"reason": "not_owned"})
    return Records(records=[{"record_id": r, "title": world.records[r].title, "status": world.records[r].status}
                            for r in user.records])


def archive_record(args: RecordArgs, ctx: ToolContext, world: World) -> RecordResult:
    record = _owned(args, ctx, world)
    if record.status != "active":
        raise IneligibleAction(f"the record is {record.status} [not_active]", details={"reason": "not_active"})
    if not ctx.confirmed:
        raise IneligibleAction("a change needs the user's yes [not_confirmed]", details={"reason": "not_confirmed"})
    record.status = "archived"
    return RecordResult(**record.model_dump())


def build_registry() -> ToolRegistry[World]:
    reg: ToolRegistry[World] = ToolRegistry()
    reg.register(ToolSpec("list_records", "The user's records and their status.", UserArgs, Records, list_records))
    reg.register(ToolSpec("archive_record", "Archive one of the user's active records.", RecordArgs, RecordResult,
                          archive_record, "write"))
    return reg
