"""Where the guard runs (``guardrails.placement``): its table, its live reload, the deployments it needs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from serve.config import ServeFile, parse_app_config
from serve.deployments.guardrails import GuardrailsServer, LiveGuardrails

REPO = Path(__file__).resolve().parents[2]
TABLE = yaml.safe_load((REPO / "configs" / "guardrails.yaml").read_text())
BAD = {**TABLE, "version": "bad-1", "injection": [{"id": "x", "kind": "injection", "pattern": "("}]}
ARGS = {"models": {"m": {"model_id": "m", "source": "embedded"}},
        "roles": {"orchestrator": "m", "generator": "m", "slot_extractor": "m"}, "domain": {"name": "support"}}


def _file(deployments: list[dict[str, Any]], **args: Any) -> dict[str, Any]:
    return {"applications": [{"name": "t", "import_path": "serve.app:build_app", "deployments": deployments,
                              "args": {**ARGS, **args}}]}


def _v(version: str) -> dict[str, Any]:
    return {**TABLE, "version": version}


# -- the Serve file -----------------------------------------------------------------------------


def test_the_guard_runs_in_the_ingress_by_default():
    assert parse_app_config(ARGS).guardrails.placement == "ingress"


def test_an_ingress_guard_takes_its_table_from_the_ingress_user_config():
    ServeFile.model_validate(_file([{"name": "TandemIngress", "user_config": {"guardrails": {"table": _v("g-2")}}}]))
    ServeFile.model_validate(_file([{"name": "TandemIngress", "user_config": {
        "auth": {"keys": []}, "guardrails": {"table": _v("g-2")}}}]))


@pytest.mark.parametrize(("user_config", "match"), [
    ({"guardrails": {"table": BAD}}, r"deployments\.0 \(TandemIngress\): guardrails: "),
    ({"guardrails": {"tables": _v("g-2")}}, r"guardrails: expected \{table"),
    ({"guardrails": {"table": _v("g-2"), "extra": 1}}, r"guardrails: expected \{table"),
    ({"guardrails": _v("g-2")}, r"guardrails: expected \{table"),
    ({"rules": {}}, r"unknown keys \['rules'\]"),
])
def test_a_bad_ingress_table_is_refused_with_its_path(user_config, match):
    with pytest.raises(ValueError, match=match):
        ServeFile.model_validate(_file([{"name": "TandemIngress", "user_config": user_config}]))


def test_a_table_for_the_deployment_that_does_not_run_is_refused_with_the_right_place():
    gs = {"name": "GuardrailsServer", "user_config": {"table": _v("g-2")}}
    with pytest.raises(ValueError, match=r"TandemIngress, user_config: \{guardrails: \{table"):
        ServeFile.model_validate(_file([gs]))
    ServeFile.model_validate(_file([gs], guardrails={"placement": "deployment"}))
    ing = {"name": "TandemIngress", "user_config": {"guardrails": {"table": _v("g-2")}}}
    with pytest.raises(ValueError, match=r"GuardrailsServer, user_config: \{table"):
        ServeFile.model_validate(_file([ing], guardrails={"placement": "deployment"}))
    # auth keys on the ingress are fine either way
    ServeFile.model_validate(_file([{"name": "TandemIngress", "user_config": {"auth": {"keys": []}}}],
                                   guardrails={"placement": "deployment"}))


def test_an_unknown_placement_is_refused():
    with pytest.raises(Exception, match="placement"):
        parse_app_config({**ARGS, "guardrails": {"placement": "sidecar"}})


@pytest.mark.parametrize(("placement", "deployed"), [("ingress", False), ("deployment", True)])
def test_guardrails_server_is_deployed_only_where_it_runs_the_guard(placement, deployed):
    from serve.app import cpu_deployments

    for kind in ("tandem", "dr"):
        cfg = parse_app_config({**ARGS, "pipeline": {"kind": kind}, "guardrails": {"placement": placement}})
        assert ("guardrails" in cpu_deployments(cfg)) is deployed
        assert "tools" in cpu_deployments(cfg)


# -- the live table -----------------------------------------------------------------------------


def test_a_live_table_swaps_in_and_a_refused_one_keeps_the_active_table():
    g = LiveGuardrails()
    bundled = g.version
    assert g.apply(_v("g-2")) and g.version == "g-2" and g.last_error is None
    assert not g.apply(BAD) and g.version == "g-2" and "refused table bad-1" in g.last_error
    assert not g.apply(None) and not g.apply({}) and g.version == "g-2"  # nothing given: nothing changes
    assert g.last_error is not None  # ... and the last refusal is still reported
    assert g.apply(_v(bundled)) and g.last_error is None
    info = g.info()
    assert info["version"] == bundled and info["last_error"] is None and isinstance(info["pid"], int)


def test_guardrails_server_reloads_through_the_same_live_table():
    s = GuardrailsServer()
    s.reconfigure({"table": _v("g-3")})
    assert asyncio.run(s.version()) == "g-3"
    s.reconfigure({"table": BAD})
    info = asyncio.run(s.info())
    assert info["version"] == "g-3" and s.last_error == info["last_error"] and "bad-1" in info["last_error"]
    s.reconfigure(None)
    assert asyncio.run(s.version()) == "g-3"


class _Nothing:
    def __call__(self, method: str, args: tuple, kwargs: dict) -> Any:
        return None


def _ingress(tmp: Path, **extra: Any) -> Any:
    """A real tandem ingress over fake handles (nothing is called: the tests read its parts)."""
    from serve.testing import FakeHandle, IngressHarness
    from tests.unit.edge_app import EchoLLM, config

    handles = {k: FakeHandle(_Nothing()) for k in ("tools", "rule_kernels", "guardrails")}
    return IngressHarness(config(tmp, kind="tandem", **extra), llm=EchoLLM().handle, **handles).ingress


def test_the_ingress_guard_is_the_pipelines_and_reloads_live(tmp_path: Path):
    ing = _ingress(tmp_path)
    assert ing.pipeline.guardrails is ing.guard  # the handle given for GuardrailsServer is not used
    before = asyncio.run(ing.guard_info())
    ing.reconfigure({"auth": {"keys": []}, "guardrails": {"table": _v("g-4")}})
    after = asyncio.run(ing.guard_info())
    assert after["version"] == "g-4" and after["pid"] == before["pid"] and ing.pipeline.guardrails.version == "g-4"
    ing.reconfigure({"guardrails": {"table": BAD}})
    refused = asyncio.run(ing.guard_info())
    assert refused["version"] == "g-4" and "bad-1" in refused["last_error"]
    ing.reconfigure({"auth": {"keys": []}})  # keys only: the table stays
    assert asyncio.run(ing.guard_info())["version"] == "g-4"


def test_with_the_deployment_placement_the_pipeline_calls_guardrails_server(tmp_path: Path):
    from serve.adapters import HandleGuardrails

    ing = _ingress(tmp_path, guardrails={"placement": "deployment"})
    assert ing.guard is None and isinstance(ing.pipeline.guardrails, HandleGuardrails)
    assert asyncio.run(ing.guard_info()) == {}
    ing.reconfigure({"guardrails": {"table": _v("g-5")}})  # not its table: logged, ignored
    assert ing.guard is None
