"""``models.<name>.shared_app``: an application that calls another application's engine (no Ray here).

``build_app`` binds a :class:`SharedModel` reference in place of the model's deployment (and still its
OpenAI model card); the ingress resolves it to a handle of ``LLMServer:<model_id>`` in that application;
``build_models_app`` serves exactly one model that is not itself shared.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from models.llm import SharedModel
from pipelines.errors import ConfigError
from serve.config import ServeFile, parse_app_config

REPO = Path(__file__).resolve().parents[2]


def _args() -> dict:
    return yaml.safe_load((REPO / "configs" / "embedded.yaml").read_text())["applications"][0]["args"]


def test_the_reference_names_the_deployment_and_resolves_through_serve(monkeypatch):
    ref = SharedModel("models", "smollm2-135m-instruct")
    assert ref.deployment == "LLMServer:smollm2-135m-instruct"
    from ray import serve

    asked = []
    monkeypatch.setattr(serve, "get_deployment_handle", lambda name, app_name: asked.append((name, app_name)) or "h")
    assert ref.handle() == "h"
    assert asked == [("LLMServer:smollm2-135m-instruct", "models")]


def test_a_shared_model_binds_a_reference_and_its_card_not_a_deployment():
    from serve.app import build_app

    args = _args()
    args["models"]["smollm2"]["shared_app"] = "models"
    app = build_app(args)
    kwargs = app._bound_deployment.init_kwargs
    assert kwargs["llm_deployments"] == {"smollm2-135m-instruct": SharedModel("models", "smollm2-135m-instruct")}
    assert set(kwargs["model_cards"]) == {"smollm2-135m-instruct"}
    assert kwargs["model_cards"]["smollm2-135m-instruct"].id == "smollm2-135m-instruct"


def test_shared_app_must_name_an_application():
    args = _args()
    args["models"]["smollm2"]["shared_app"] = ""
    with pytest.raises(ConfigError, match=r"args\.models\.smollm2\.shared_app"):
        parse_app_config(args)


def test_a_models_application_serves_exactly_one_model_of_its_own():
    from serve.app import build_models_app

    args = _args()
    args["models"]["smollm2"]["shared_app"] = "elsewhere"
    with pytest.raises(ConfigError, match="serves exactly one model; args.models has 0"):
        build_models_app(args)
    args = _args()
    args["models"]["second"] = {**args["models"]["smollm2"], "model_id": "second"}
    with pytest.raises(ConfigError, match="serves exactly one model; args.models has 2"):
        build_models_app(args)


def test_a_models_application_may_have_no_http_route():
    raw = yaml.safe_load((REPO / "configs" / "embedded.yaml").read_text())
    raw["applications"].append({"name": "models", "route_prefix": None, "import_path": "serve.app:build_models_app",
                                "args": _args()})
    sf = ServeFile.model_validate(raw)
    assert [a.route_prefix for a in sf.applications] == ["/", None]


def test_the_cluster_plan_places_no_engine_for_a_shared_model():
    from serve.cluster import placement_of

    raw = yaml.safe_load((REPO / "configs" / "cluster-dev.yaml").read_text())
    raw["applications"][0]["args"]["models"]["smollm2"]["shared_app"] = "models"
    need = placement_of(ServeFile.model_validate(raw))
    assert not [k for k in need if k.startswith("model:")]
