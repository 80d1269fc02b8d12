"""The http_pack tools: typed arguments and results, a read and a write, each one call to the service.

The world is a ``RemoteWorld``: nothing but the ``HttpBackend`` of the records service. ``list_records`` is a
read (retried by the backend when the service is busy); ``archive_record`` is a write (sent once, with the
core's write key as ``Idempotency-Key``). Its eligibility reads the user's records first, so a precheck
refuses what the service would refuse, without changing anything; the service checks again when the write
arrives.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from pipelines.domain import RemoteWorld, ToolContext, ToolSpec, refuse

__all__ = ["TOOLS", "Records", "RecordResult", "owned_records"]


class UserArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: str


class RecordArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    record_id: str


class RecordResult(BaseModel):
    record_id: str
    title: str
    status: str


class Records(BaseModel):
    records: list[RecordResult]


def owned_records(world: RemoteWorld, user_id: str) -> list[RecordResult]:
    """The user's records, as the service lists them (a read)."""
    return world.backend.read(f"/users/{user_id}/records", result=Records).records


def list_records(args: UserArgs, ctx: ToolContext, world: RemoteWorld) -> Records:
    if args.user_id != ctx.authenticated_user_id:
        refuse("not_owned", "only your own records")
    return Records(records=owned_records(world, args.user_id))


def archive_eligible(args: RecordArgs, ctx: ToolContext, world: RemoteWorld) -> None:
    """The rules of the write, checked on the service's current records (reads only)."""
    if not ctx.authenticated_user_id:
        refuse("not_owned", "who is asking?")
    record = {r.record_id: r for r in owned_records(world, ctx.authenticated_user_id)}.get(args.record_id)
    if record is None:
        refuse("not_owned", "that record is not yours")
    if record.status != "active":
        refuse("not_active", f"the record is {record.status}")
    if not ctx.confirmed:
        refuse("not_confirmed", "a change needs the user's yes")


def archive_record(args: RecordArgs, ctx: ToolContext, world: RemoteWorld) -> RecordResult:
    return world.backend.write(f"/records/{args.record_id}/archive", json={"user_id": ctx.authenticated_user_id},
                               idempotency_key=ctx.idempotency_key, result=RecordResult)


TOOLS = (
    ToolSpec("list_records", "The user's records and their status.", UserArgs, Records, list_records),
    ToolSpec("archive_record", "Archive one of the user's active records.", RecordArgs, RecordResult,
             archive_record, "write", archive_eligible),
)
