"""tests/conftest.py: skips become failures under CI, stay skips locally."""

from __future__ import annotations

import pytest

from tests.conftest import strict_skips

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(
    ("env", "strict"),
    [
        ({}, False),
        ({"CI": "true"}, True),
        ({"CI": "1"}, True),
        ({"CI": "false"}, False),
        ({"CI": ""}, False),
        ({"TANDEM_STRICT_SKIPS": "1"}, True),
        ({"TANDEM_STRICT_SKIPS": "0", "CI": "true"}, False),
        ({"TANDEM_STRICT_SKIPS": "true"}, True),
        ({"TANDEM_STRICT_SKIPS": "", "CI": "true"}, True),
    ],
)
def test_strict_mode_from_environment(env: dict[str, str], strict: bool) -> None:
    assert strict_skips(env) is strict


_MODULE = '''
import pytest

def test_runtime_skip():
    pytest.skip("redis-server is not on PATH")

@pytest.mark.optional_dependency("not installed by the project")
def test_optional():
    pytest.skip("no accelerator")

@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False

def test_passes():
    assert True
'''

_SKIPPED_MODULE = '''
import pytest
pytest.importorskip("a_module_that_does_not_exist_anywhere")

def test_never_runs():
    pass
'''


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, strict: str) -> pytest.RunResult:
    monkeypatch.setenv("TANDEM_STRICT_SKIPS", strict)
    pytester.makeconftest("pytest_plugins = ['tests.conftest']\n")
    pytester.makepyfile(test_mod=_MODULE, test_skipped_module=_SKIPPED_MODULE)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rs")


def test_locally_skips_stay_skips(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _run(pytester, monkeypatch, "0")
    result.assert_outcomes(passed=1, skipped=3, xfailed=1)
    result.stdout.fnmatch_lines(["*redis-server is not on PATH*"])


def test_under_ci_a_skip_fails_with_its_reason(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _run(pytester, monkeypatch, "1")
    # the runtime skip fails; the opt-out and the xfail stay; the module skipped at collection
    # is still counted as skipped (the other modules ran) but fails the session
    result.assert_outcomes(passed=1, failed=1, skipped=2, xfailed=1)
    result.stdout.fnmatch_lines([
        "*strict skips*redis-server is not on PATH*",
        "*modules skipped at collection under strict skips*",
        "*test_skipped_module.py*a_module_that_does_not_exist_anywhere*",
    ])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_under_ci_only_collection_skips_still_fail_the_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TANDEM_STRICT_SKIPS", "1")
    pytester.makeconftest("pytest_plugins = ['tests.conftest']\n")
    pytester.makepyfile(test_ok="def test_ok():\n    assert True\n", test_skipped_module=_SKIPPED_MODULE)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    monkeypatch.setenv("TANDEM_STRICT_SKIPS", "0")
    assert pytester.runpytest_inprocess("-p", "no:cacheprovider").ret == pytest.ExitCode.OK
