"""The versioned guardrail rule table: loading, validation, hot reload."""

from __future__ import annotations

import pytest

from pipelines.errors import ConfigError
from pipelines.guardrails import LocalGuardrails
from pipelines.guardrails.config import (
    DEFAULT_GUARDRAILS_PATH,
    default_guardrail_config,
    load_guardrail_config,
)


def _base() -> dict:
    return default_guardrail_config().model_dump(mode="json")


def test_default_table_loads_with_a_version() -> None:
    cfg = load_guardrail_config(DEFAULT_GUARDRAILS_PATH)
    assert cfg.version and cfg.injection and cfg.safety and cfg.human_request and cfg.affirmatives
    assert len(cfg.compiled["injection"]) == len(cfg.injection)


@pytest.mark.parametrize(
    ("patch", "path"),
    [
        ({"injection": [{"id": "x", "kind": "injection", "pattern": "(unclosed"}]}, "guardrails.injection.0.pattern"),
        ({"injection": [{"id": "x", "kind": "nope", "pattern": "a"}]}, "guardrails.injection.0.kind"),
        ({"surprise": 1}, "guardrails.surprise"),
        ({"pii_kinds": ["EMAIL", "PASSPORT"]}, "guardrails.pii_kinds"),
        ({"limits": {"max_chars": 0}}, "guardrails.limits.max_chars"),
        ({"human_request": ["[bad"]}, "guardrails.human_request"),
    ],
)
def test_bad_tables_raise_config_error_with_a_path(patch: dict, path: str) -> None:
    data = _base() | patch
    with pytest.raises(ConfigError) as exc:
        load_guardrail_config(data)
    assert exc.value.details["path"] == path


def test_duplicate_rule_ids_are_refused() -> None:
    rule = {"id": "dup", "kind": "injection", "pattern": "a"}
    with pytest.raises(ConfigError):
        load_guardrail_config(_base() | {"injection": [rule, rule]})


def test_missing_file_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError):
        load_guardrail_config(tmp_path / "none.yaml")


def test_reload_swaps_the_table_and_a_bad_one_keeps_the_old() -> None:
    g = LocalGuardrails()
    old = g.version
    g.reload(_base() | {"version": "v-next"})
    assert g.version == "v-next"
    with pytest.raises(ConfigError):
        g.reload(_base() | {"version": ""})
    assert g.version == "v-next" != old
