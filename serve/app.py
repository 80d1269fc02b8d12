"""The application builder: the Serve YAML ``import_path`` (``serve.app:build_app``).

Graph (embedded profile; production differs only by config)::

    client ─HTTP/SSE─┐                    ┌─► LLMServer:<model>  (orchestrator / generator / slot_extractor
    client ─gRPC─────┼─► TandemIngress ───┤                       roles map to model deployments by config)
    client ─OpenAI───┘   (routes, auth,   ├─► ToolsServer       (typed tools + world store; dr / monolithic)
                          turn pipeline)  ├─► GuardrailsServer  (pre / post guard; rule table via user_config)
                                          └─► SessionStore (SQLite | Redis)

``build_app`` validates the args strictly first (a bad key fails with its
path), then binds one ``TandemLLMServer`` per configured model and the ingress.
"""

from __future__ import annotations

import logging
from typing import Any

from ray import serve
from ray.serve.deployment import Application

from models.llm import build_model_deployment, model_card
from serve.config import AppConfig, parse_app_config
from serve.ingress import build_ingress_class
from serve.pipeline_factory import NEEDS_COACH, NEEDS_TOOLS

__all__ = ["build_app", "ingress_options"]

logger = logging.getLogger("tandem.app")


def ingress_options(cfg: AppConfig) -> dict[str, Any]:
    opts = cfg.ingress.to_serve_options()
    opts["name"] = "TandemIngress"
    return opts


def build_app(args: dict[str, Any] | AppConfig) -> Application:
    """Build the Tandem application from its config (a dict from YAML or an :class:`AppConfig`)."""
    cfg = parse_app_config(args)
    llm_apps: dict[str, Application] = {}
    cards: dict[str, Any] = {}
    for name, mcfg in cfg.models.items():
        app, conf = build_model_deployment(mcfg)
        llm_apps[mcfg.model_id] = app
        cards[mcfg.model_id] = model_card(conf)
        logger.info("model deployment %s → LLMServer:%s", name, mcfg.model_id)
    extra: dict[str, Application] = {}
    if cfg.pipeline.kind in NEEDS_TOOLS:
        from serve.deployments.guardrails import GuardrailsServer
        from serve.deployments.tools import ToolsServer

        extra["tools"] = serve.deployment(ToolsServer, name="ToolsServer", **cfg.deployments.tools.to_serve_options()
                                          ).bind(cfg.domain.model_dump(mode="json"))
        # The rule table starts as the bundled one; a Serve file's `deployments: [{name:
        # GuardrailsServer, user_config: {table: ...}}]` replaces it live (see serve/deploy.py).
        extra["guardrails"] = serve.deployment(
            GuardrailsServer, name="GuardrailsServer", **cfg.deployments.guardrails.to_serve_options(),
        ).bind()
    if cfg.pipeline.kind in NEEDS_COACH:
        from serve.deployments.coach import CoachToolsServer, RuleKernelsServer

        extra["coach_tools"] = serve.deployment(
            CoachToolsServer, name="CoachToolsServer", **cfg.deployments.tools.to_serve_options()
        ).bind(cfg.domain.model_dump(mode="json"))
        # Tables start as the coach pack's; `deployments: [{name: RuleKernels, user_config: {rules: ...}}]`
        # in the Serve file replaces them live.
        extra["rule_kernels"] = serve.deployment(
            RuleKernelsServer, name="RuleKernels", **cfg.deployments.rule_kernels.to_serve_options()
        ).bind()
    ingress_cls = build_ingress_class()
    return serve.deployment(ingress_cls, **ingress_options(cfg)).bind(
        llm_deployments=llm_apps,
        model_cards=cards,
        app_config=cfg.model_dump(mode="json"),
        **extra,
    )
