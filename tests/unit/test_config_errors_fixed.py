"""Fixed values for the rule-table loaders' refusals: the message and details of each ``ConfigError``
(what an operator reads when a live reload is refused), and the canary token's boundary."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

from pipelines.errors import ConfigError
from pipelines.guardrails.config import (
    DEFAULT_CANARY,
    DEFAULT_GUARDRAILS_PATH,
    CanaryConfig,
    default_guardrail_config,
    load_guardrail_config,
)
from pipelines.sgc.config import error_path, load_model


def _refused(source) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_guardrail_config(source)
    return info.value


def test_the_default_table_is_the_shipped_file_loaded_once() -> None:
    shipped = yaml.safe_load(DEFAULT_GUARDRAILS_PATH.read_text(encoding="utf-8"))
    assert load_guardrail_config(None).version == shipped["version"]
    first = default_guardrail_config()
    assert first is not None and first is default_guardrail_config() and first.version == shipped["version"]


def test_an_unreadable_table_names_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    e = _refused(missing)
    assert e.message.startswith(f"cannot read guardrail table {missing}: ") and e.details == {"path": str(missing)}
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: [unclosed\n", encoding="utf-8")
    assert _refused(str(broken)).details == {"path": str(broken)}


def test_a_table_that_is_not_a_mapping(tmp_path: Path) -> None:
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n", encoding="utf-8")
    e = _refused(listed)
    assert (e.message, e.details) == ("guardrail table must be a mapping", {"path": "guardrails"})


def test_a_bad_field_is_named_with_its_dotted_path() -> None:
    data = yaml.safe_load(DEFAULT_GUARDRAILS_PATH.read_text(encoding="utf-8"))
    data["limits"]["max_lines"] = "many"
    e = _refused(data)
    assert e.details == {"path": "guardrails.limits.max_lines"}
    assert e.message.startswith("guardrails.limits.max_lines: ") and "integer" in e.message
    data = yaml.safe_load(DEFAULT_GUARDRAILS_PATH.read_text(encoding="utf-8"))
    data["injection"][0]["pattern"] = "(unclosed"
    e = _refused(data)
    assert e.details["path"].startswith("guardrails.injection") and "invalid regex '(unclosed'" in e.message


@pytest.mark.parametrize(("env", "token", "expected"), [
    ("abcdefgh", None, "abcdefgh"),           # 8 characters: used
    ("  abcdefgh  ", None, "abcdefgh"),       # stripped first
    ("abcdefg", None, DEFAULT_CANARY),        # 7: too short, the default
    ("abcdefg", "tok-12345", "tok-12345"),    # too short, the configured token
    (None, "tok-12345", "tok-12345"),         # unset
    (None, None, DEFAULT_CANARY),
])
def test_the_canary_token(monkeypatch, env, token, expected) -> None:
    if env is None:
        monkeypatch.delenv("TANDEM_CANARY_T", raising=False)
    else:
        monkeypatch.setenv("TANDEM_CANARY_T", env)
    assert CanaryConfig(env="TANDEM_CANARY_T", token=token).resolve() == expected


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int
    name: str


def test_load_model_lists_every_bad_path() -> None:
    assert error_path("phi", ()) == "phi" and error_path("phi", ("rows", 3, "tool")) == "phi.rows.3.tool"
    with pytest.raises(ConfigError) as info:
        load_model(_Row, {"n": "x", "extra": 1}, "psi.rules.2")
    e = info.value
    assert e.message == "psi.rules.2.n: Input should be a valid integer, unable to parse string as an integer"
    assert e.details == {"path": "psi.rules.2.n", "errors": [
        {"path": "psi.rules.2.n", "msg": "Input should be a valid integer, unable to parse string as an integer"},
        {"path": "psi.rules.2.name", "msg": "Field required"},
        {"path": "psi.rules.2.extra", "msg": "Extra inputs are not permitted"},
    ]}
    with pytest.raises(ConfigError) as info:
        load_model(_Row, ["n"], "w3")
    assert (info.value.message, info.value.details) == ("w3: expected a mapping, got list", {"path": "w3"})
    row = _Row(n=1, name="a")
    assert load_model(_Row, row, "x") is row
