"""The application builder: the Serve YAML ``import_path`` (``serve.app:build_app``).

Graph (embedded profile; production differs only by config)::

    client ─HTTP/SSE─┐                    ┌─► LLMServer:<model>  (orchestrator / generator / slot_extractor
    client ─gRPC─────┼─► TandemIngress ───┤                       roles map to model deployments by config)
    client ─OpenAI───┘   (routes, auth,   ├─► ToolsServer       (the domain's typed tools + its world)
                          turn pipeline,  ├─► GuardrailsServer  (only with guardrails.placement: deployment)
                          pre/post guard) │
                                          ├─► RuleKernels       (Φ / Ψ / tiers / W3 of the domain; user_config)
                                          └─► SessionStore (SQLite | Redis)

The kind's record (``pipelines/registry.py``) says which CPU deployments it needs;
the pack (``pipelines.domains``, by name) says what its tools server hosts: its world and store.

``build_app`` validates the args strictly first (a bad key fails with its
path), then binds one ``TandemLLMServer`` per configured model and the ingress.
"""

from __future__ import annotations

import logging
from typing import Any

from ray import serve
from ray.serve.deployment import Application

from models.llm import SharedModel, build_model_deployment, llm_config, model_card
from pipelines.registry import kind_record
from serve.config import AppConfig, parse_app_config
from serve.ingress import build_ingress_class

__all__ = ["build_app", "build_models_app", "ingress_options", "cpu_deployments"]

logger = logging.getLogger("tandem.app")


def ingress_options(cfg: AppConfig) -> dict[str, Any]:
    opts = cfg.ingress.to_serve_options()
    opts["name"] = "TandemIngress"
    return opts


def cpu_deployments(cfg: AppConfig) -> dict[str, Application]:
    """The CPU deployments the configured kind needs (tools, guardrails, rule kernels), bound."""
    from serve.deployments.guardrails import GuardrailsServer
    from serve.deployments.kernels import RuleKernelsServer
    from serve.deployments.tools import ToolsServer

    record = kind_record(cfg.pipeline.kind)
    domain = cfg.domain.model_dump(mode="json")
    opts = cfg.deployments
    out: dict[str, Application] = {}
    if "tools" in record.deployments:
        out["tools"] = serve.deployment(ToolsServer, name="ToolsServer", **opts.tools.to_serve_options()).bind(domain)
    if "guardrails" in record.deployments and cfg.guardrails.placement == "deployment":
        # The rule table starts as the bundled one; a Serve file's `deployments: [{name:
        # GuardrailsServer, user_config: {table: ...}}]` replaces it live (see serve/deploy.py).
        # With `guardrails.placement: ingress` (the default) the ingress runs the guard itself.
        out["guardrails"] = serve.deployment(
            GuardrailsServer, name="GuardrailsServer", **opts.guardrails.to_serve_options()).bind()
    if "rule_kernels" in record.deployments:
        # Tables start as the domain pack's; `deployments: [{name: RuleKernels, user_config: {rules: ...}}]`
        # in the Serve file replaces them live.
        out["rule_kernels"] = serve.deployment(
            RuleKernelsServer, name="RuleKernels", **opts.rule_kernels.to_serve_options()).bind(cfg.domain.name)
    return out


def build_app(args: dict[str, Any] | AppConfig) -> Application:
    """Build the Tandem application from its config (a dict from YAML or an :class:`AppConfig`)."""
    cfg = parse_app_config(args)
    llm_apps: dict[str, Application] = {}
    cards: dict[str, Any] = {}
    for name, mcfg in cfg.models.items():
        if mcfg.shared_app:  # served by another application of the cluster: no engine of our own
            llm_apps[mcfg.model_id] = SharedModel(mcfg.shared_app, mcfg.model_id)
            cards[mcfg.model_id] = model_card(llm_config(mcfg))
            logger.info("model %s → LLMServer:%s of application %r", name, mcfg.model_id, mcfg.shared_app)
            continue
        app, conf = build_model_deployment(mcfg)
        llm_apps[mcfg.model_id] = app
        cards[mcfg.model_id] = model_card(conf)
        logger.info("model deployment %s → LLMServer:%s", name, mcfg.model_id)
    ingress_cls = build_ingress_class()
    return serve.deployment(ingress_cls, **ingress_options(cfg)).bind(
        llm_deployments=llm_apps,
        model_cards=cards,
        app_config=cfg.model_dump(mode="json"),
        **cpu_deployments(cfg),
    )


def build_models_app(args: dict[str, Any] | AppConfig) -> Application:
    """An application that serves one model and nothing else (``import_path: serve.app:build_models_app``).

    Its args are an application's args (the same strict config); its one model that is not itself shared
    is bound as the application's ingress, ``LLMServer:<model_id>``. Other applications reach it by
    naming this application in their model entry's ``shared_app``: one engine behind several assistants.
    """
    cfg = parse_app_config(args)
    own = [m for m in cfg.models.values() if not m.shared_app]
    if len(own) != 1:
        from pipelines.errors import ConfigError

        raise ConfigError(f"a models application serves exactly one model; args.models has {len(own)} that are "
                          "not shared (deploy one application per model)")
    app, _ = build_model_deployment(own[0])
    logger.info("models application: LLMServer:%s", own[0].model_id)
    return app
