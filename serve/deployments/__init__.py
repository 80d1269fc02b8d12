"""CPU deployments that host pipeline parts (tools, guardrails, rule kernels).

Each class is plain (not decorated where defined); ``serve/app.py`` turns it
into a deployment with options from the config, and ``serve/adapters.py``
wraps its handle in the Protocol the pipeline expects.

:func:`tools_server_for` is the one place that says which class hosts a domain's
world: the support world lives in the SQLite world store (``ToolsServer``), the
coach world is generated and carries per-session live state (``CoachToolsServer``),
and any other pack is hosted from its own ``make_tools(seed)`` (``PackToolsServer``).
"""

from __future__ import annotations

__all__ = ["tools_server_for"]


def tools_server_for(domain: str) -> tuple[type, str]:
    """The deployment class and name that host ``domain``'s tools."""
    if domain == "support":
        from serve.deployments.tools import ToolsServer

        return ToolsServer, "ToolsServer"
    if domain == "coach":
        from serve.deployments.coach import CoachToolsServer

        return CoachToolsServer, "CoachToolsServer"
    from serve.deployments.tools import PackToolsServer

    return PackToolsServer, "ToolsServer"
