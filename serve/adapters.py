"""Ray handles wrapped in the Protocols the pipelines expect (``pipelines.core.ports``).

Foreign errors (back-pressure, dead replicas) become :mod:`pipelines.errors`
here, so a pipeline never sees a Ray exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ray.serve.handle import DeploymentHandle

from pipelines.core.ports import ToolCallResult, ToolSession
from pipelines.errors import ToolError
from pipelines.guardrails import PostGuardView, PreGuardResult, SentenceVerdict
from serve.foreign import CPU_ERRORS, translate, unwrap

__all__ = ["HandleTools", "HandleGuardrails", "HandleRuleKernels", "unwrap",
           "remote_call", "tool_port"]


async def remote_call(handle: DeploymentHandle, method: str, *args: Any, what: str, **kwargs: Any) -> Any:
    """Await ``handle.<method>.remote(...)``; every foreign error leaves as a :mod:`pipelines.errors` class
    (a TandemError the replica raised keeps its class; see :mod:`serve.foreign`)."""
    try:
        return await getattr(handle, method).remote(*args, **kwargs)
    except Exception as exc:
        raise translate(exc, CPU_ERRORS, what=what, default=ToolError) from exc


class HandleGuardrails:
    """:class:`pipelines.core.ports.Guardrails` over a ``GuardrailsServer`` handle."""

    def __init__(self, handle: DeploymentHandle) -> None:
        self.handle = handle
        self._version = ""

    @property
    def version(self) -> str:
        return self._version

    async def pre(self, text: str, history: Sequence[str] = ()) -> PreGuardResult:
        res: PreGuardResult = await remote_call(self.handle, "pre", text, list(history), what="pre-guard failed")
        self._version = res.rules_version
        return res

    async def post(self, sentence: str, view: PostGuardView, context: str = "") -> SentenceVerdict:
        return await remote_call(self.handle, "post", sentence, view, context, what="post-guard failed")


class _Remote:
    """Forward awaited method calls to a handle, translating remote TandemErrors."""

    def __init__(self, handle: DeploymentHandle) -> None:
        self.handle = handle

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await remote_call(self.handle, method, *args, what=f"{method} failed in a CPU deployment", **kwargs)


class HandleTools(_Remote):
    """The one tool port (:class:`pipelines.core.ports.ToolRunner`, and :class:`~pipelines.core.ports.LiveStateTools`
    for a pack whose sessions carry live state) over a ``ToolsServer`` handle."""

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        return await remote_call(self.handle, "call", name, args, session,
                                 what=f"tool {name!r} failed in the tools deployment")

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        return await remote_call(self.handle, "precheck", name, args, session, what=f"precheck of {name!r} failed")

    async def load_state(self, session_id: str, keys: Sequence[str]) -> Any:
        return await self._call("load_state", session_id, list(keys))

    async def live_facts(self, session_id: str) -> Any:
        return await self._call("live_facts", session_id)

    async def bind_user(self, session_id: str, user_id: str | None) -> str:
        return await self._call("bind_user", session_id, user_id)


class HandleRuleKernels(_Remote):
    """:class:`pipelines.core.ports.RuleKernels` over a ``RuleKernels`` handle."""

    async def tables_version(self) -> str:
        return await self._call("tables_version")

    async def w1_tables(self) -> Any:
        return await self._call("w1_tables")

    async def ground(self, slots: dict[str, Any], facts: dict[str, Any], intent: str) -> dict[str, Any]:
        return await self._call("ground", slots, facts, intent)

    async def paragraphs(self, conflicts: list[dict[str, Any]], intent: str,
                         constraints: list[str] | None = None) -> dict[str, Any]:
        return await self._call("paragraphs", conflicts, intent, constraints)

    async def schedule(self, session_id: str, prior_metas: list[dict[str, Any]], intent_ctx: dict[str, Any],
                       candidates: list[dict[str, Any]], turn_index: int, *, seed: int | None = None) -> Any:
        return await self._call("schedule", session_id, prior_metas, intent_ctx, candidates, turn_index, seed=seed)


def tool_port(handle: DeploymentHandle | None) -> HandleTools | None:
    """The one tool port over the tools deployment (``None`` for a kind that needs no tools)."""
    return None if handle is None else HandleTools(handle)
