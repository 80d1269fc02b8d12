"""Turn streams on the wire: SSE frames and keep-alive heartbeats while a turn is silent.

:func:`with_heartbeats` runs the turn's event iterator in one task of its own
(the runner's deadline and cancellation stay bound to that task) and yields
:data:`HEARTBEAT` whenever ``interval_s`` passes without an event. Closing the
consumer (a client that leaves) cancels that task, which the runner handles
like any cancellation: the turn is stored and the session released.

An idle-timeout proxy (nginx's 60 s read timeout, cloud load balancers) then
never sees a silent SSE stream. gRPC streams rely on HTTP/2 keepalive instead
(see :data:`GRPC_CLIENT_OPTIONS`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pipelines.events import Heartbeat

__all__ = ["HEARTBEAT", "SSE_HEARTBEAT", "sse_frame", "with_heartbeats", "GRPC_CLIENT_OPTIONS"]

HEARTBEAT = Heartbeat()
SSE_HEARTBEAT = ": keep-alive\n\n"  # an SSE comment line: clients ignore it, proxies see bytes

# Client channel options for long silent StreamTurn calls. Ray Serve's gRPC proxy runs
# grpc-core's server defaults: it accepts a keepalive ping no more often than every
# 5 minutes without data (more often earns GOAWAY "too_many_pings"), so clients ping
# every 5 minutes and give up on a dead peer after 20 s.
GRPC_CLIENT_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 300_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),
)

_END = object()


def sse_frame(ev: Any) -> str:
    """One SSE frame: the event name is the event's ``type``; a heartbeat is a comment line."""
    if isinstance(ev, Heartbeat):
        return SSE_HEARTBEAT
    return f"event: {ev.type}\ndata: {ev.model_dump_json()}\n\n"


async def with_heartbeats(events: AsyncIterator[Any], interval_s: float,
                          first_s: float | None = None, *, buffer: int = 64) -> AsyncIterator[Any]:
    """``events`` with :data:`HEARTBEAT` yielded after every ``interval_s`` of silence
    (``first_s`` for the first wait, when given).

    At most ``buffer`` events wait for the consumer: past that the turn's task waits too
    (a slow client slows its own turn; memory stays bounded).
    """
    queue: asyncio.Queue[tuple[Any, Any]] = asyncio.Queue(maxsize=buffer)

    async def pump() -> None:
        try:
            async for ev in events:
                await queue.put((ev, None))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # handed to the consumer, raised there
            await queue.put((_END, exc))
            return
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        await queue.put((_END, None))

    task = asyncio.create_task(pump())
    wait = interval_s if first_s is None else first_s
    try:
        while True:
            try:
                ev, exc = await asyncio.wait_for(queue.get(), timeout=wait)
            except TimeoutError:
                yield HEARTBEAT
                continue
            finally:
                wait = interval_s
            if ev is _END:
                if exc is not None:
                    raise exc
                return
            yield ev
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
