"""Ray handles wrapped in the Protocols the pipelines expect (``pipelines.dr.ports``).

Foreign errors (back-pressure, dead replicas) become :mod:`pipelines.errors`
here, so a pipeline never sees a Ray exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ray.serve.handle import DeploymentHandle

from pipelines.dr.ports import ToolCallResult, ToolSession
from pipelines.errors import TandemError, ToolError
from pipelines.guardrails import PostGuardView, PreGuardResult, SentenceVerdict

__all__ = ["HandleToolRunner", "HandleGuardrails", "HandleCoachTools", "HandleRuleKernels", "unwrap", "tool_port"]


def unwrap(exc: BaseException) -> BaseException:
    """The :class:`TandemError` a remote replica raised, if that is what Ray wrapped."""
    cause = getattr(exc, "cause", None)
    while cause is not None and not isinstance(exc, TandemError):
        exc, cause = cause, getattr(cause, "cause", None)
    return exc


class HandleToolRunner:
    """:class:`pipelines.dr.ports.ToolRunner` over a ``ToolsServer`` handle."""

    def __init__(self, handle: DeploymentHandle) -> None:
        self.handle = handle

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        try:
            return await self.handle.call.remote(name, args, session)
        except Exception as exc:
            inner = unwrap(exc)
            if isinstance(inner, TandemError):
                raise inner from exc
            raise ToolError(f"tool {name!r} failed in the tools deployment: {type(exc).__name__}") from exc

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        try:
            return await self.handle.precheck.remote(name, args, session)
        except Exception as exc:
            raise ToolError(f"precheck of {name!r} failed: {type(exc).__name__}") from exc


class HandleGuardrails:
    """:class:`pipelines.dr.ports.Guardrails` over a ``GuardrailsServer`` handle."""

    def __init__(self, handle: DeploymentHandle) -> None:
        self.handle = handle
        self._version = ""

    @property
    def version(self) -> str:
        return self._version

    async def pre(self, text: str, history: Sequence[str] = ()) -> PreGuardResult:
        try:
            res: PreGuardResult = await self.handle.pre.remote(text, list(history))
        except Exception as exc:
            inner = unwrap(exc)
            if isinstance(inner, TandemError):
                raise inner from exc
            raise
        self._version = res.rules_version
        return res

    async def post(self, sentence: str, view: PostGuardView, context: str = "") -> SentenceVerdict:
        return await self.handle.post.remote(sentence, view, context)


class _Remote:
    """Forward awaited method calls to a handle, translating remote TandemErrors."""

    def __init__(self, handle: DeploymentHandle) -> None:
        self.handle = handle

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return await getattr(self.handle, method).remote(*args, **kwargs)
        except Exception as exc:
            inner = unwrap(exc)
            if isinstance(inner, TandemError):
                raise inner from exc
            raise ToolError(f"{method} failed in a CPU deployment: {type(exc).__name__}") from exc


class HandleCoachTools(_Remote):
    """:class:`pipelines.sgc_turn.ports.CoachTools` (the tool port + live state) over a ``CoachToolsServer`` handle."""

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        return await self._call("call", name, args, session)

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        return None

    async def load_state(self, session_id: str, keys: Sequence[str]) -> Any:
        return await self._call("load_state", session_id, list(keys))

    async def live_facts(self, session_id: str) -> Any:
        return await self._call("live_facts", session_id)


class HandleRuleKernels(_Remote):
    """:class:`pipelines.sgc_turn.ports.RuleKernels` over a ``RuleKernels`` handle."""

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


def tool_port(domain: str, handle: DeploymentHandle | None) -> Any:
    """The one tool port over a domain's tools deployment (the coach's also reads live state)."""
    if handle is None:
        return None
    return HandleCoachTools(handle) if domain == "coach" else HandleToolRunner(handle)
