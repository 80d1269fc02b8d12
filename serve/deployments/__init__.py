"""CPU deployments that host pipeline parts: the tools (:mod:`.tools`), the guardrails (:mod:`.guardrails`) and
the rule kernels (:mod:`.kernels`), for whichever pack the config names.

Each class is plain (not decorated where defined); ``serve/app.py`` turns it into a deployment with options
from the config, and ``serve/adapters.py`` wraps its handle in the Protocol the pipeline expects.
"""

from __future__ import annotations

__all__: list[str] = []
