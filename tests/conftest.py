"""Suite-wide hooks: under CI a skipped test is a failure.

Every dependency of the suite is installed by the project itself (``make
test`` installs the Python packages and ``redis-server``; CI lays the shared
data folder beside the clone), so in CI a skip means something the project
promised is missing. With ``TANDEM_STRICT_SKIPS=1`` (``.ci/run`` sets it; a
truthy ``CI`` implies it unless ``TANDEM_STRICT_SKIPS=0``) every skip — of a
test or of a whole module at collection — is reported as a failure carrying
the skip's reason. Outside CI skips stay skips, with their reason shown by
``-rs``. A test whose dependency the project does *not* install can opt out
with ``@pytest.mark.optional_dependency("why")``.
"""

from __future__ import annotations

import os

import pytest

__all__ = ["strict_skips"]

_TRUE = {"1", "true", "yes", "on"}


def strict_skips(env: dict[str, str] | None = None) -> bool:
    """True when skips must fail: ``TANDEM_STRICT_SKIPS`` if set, else a truthy ``CI``."""
    env = os.environ if env is None else env
    explicit = env.get("TANDEM_STRICT_SKIPS")
    if explicit is not None and explicit.strip() != "":
        return explicit.strip().lower() in _TRUE
    return env.get("CI", "").strip().lower() in _TRUE


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "optional_dependency(reason): may skip even under CI (a dependency the project does not install)",
    )


def _reason(longrepr: object) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _fail(report: pytest.TestReport | pytest.CollectReport) -> None:
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under strict skips (CI / TANDEM_STRICT_SKIPS=1): {_reason(report.longrepr)}\n"
        "The project installs this dependency itself (make test, .ci/run); a skip here means it is missing."
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if (
        report.skipped
        and not hasattr(report, "wasxfail")
        and item.get_closest_marker("optional_dependency") is None
        and strict_skips()
    ):
        _fail(report)


_COLLECT_SKIPS = pytest.StashKey[list[str]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    # A module skipped at collection stays skipped (failing its collection would stop the
    # whole session before any test ran); the session's exit status fails instead.
    outcome = yield
    report = outcome.get_result()
    if report.skipped and strict_skips():
        skips = collector.config.stash.setdefault(_COLLECT_SKIPS, [])
        skips.append(f"{report.nodeid}: {_reason(report.longrepr)}")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    skips = config.stash.get(_COLLECT_SKIPS, [])
    if skips:
        terminalreporter.section("modules skipped at collection under strict skips (failure)")
        for line in skips:
            terminalreporter.write_line(line)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.stash.get(_COLLECT_SKIPS, []) and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
