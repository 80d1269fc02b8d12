"""What ``make mutation`` mutates, and which tests may kill each module's mutants.

A *profile* is one mutmut run: the modules it mutates (globs over source
files) and the test files mutmut may select from. mutmut then picks, per
mutated function, only the tests that executed that function in a clean run,
so a profile's test list bounds the work rather than fixing it.

``full`` is the whole list of guarantee-carrying modules (run by ``make
mutation``); ``kernels``, ``guard`` and ``grounding`` are its parts (the rule
kernels, errors, eligibility and contract; the guardrails; the grounded
arguments), for working on one;
``slice`` is the error table and the contract closure, small enough for
``make test``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LEAN_PYTEST_ARGS", "Profile", "PROFILES", "THRESHOLD"]

# Every mutant is one pytest start-up: the plugins the mutated tests never use stay off (the
# API fuzzer, property tests, coverage, async and timeout plugins, xdist; mutmut times out itself).
LEAN_PYTEST_ARGS = (
    "-p", "no:cacheprovider", "-p", "no:schemathesis", "-p", "no:hypothesispytest", "-p", "no:pytest_cov",
    "-p", "no:anyio", "-p", "no:timeout", "-p", "no:platformdirs", "-p", "no:xdist",
)

# Minimum share of non-equivalent mutants killed, per module.
THRESHOLD = 0.85


@dataclass(frozen=True)
class Profile:
    """One mutmut run: modules to mutate and the test files it may select from."""

    name: str
    modules: tuple[str, ...]
    tests: tuple[str, ...]
    max_children: int = 2


_KERNEL_TESTS = (
    "tests/unit/test_sgc_w1.py",
    "tests/unit/test_sgc_w2.py",
    "tests/unit/test_sgc_w3.py",
    "tests/unit/test_sgc_phi.py",
    "tests/unit/test_sgc_tables.py",
    "tests/unit/test_sgc_kernel_psi_table.py",
    "tests/unit/test_sgc_kernel_w2_table.py",
    "tests/unit/test_sgc_kernel_w3_table.py",
    "tests/unit/test_sgc_kernel_misc.py",
    "tests/unit/test_coach_world.py",
    "tests/unit/test_w1_tags.py",
    "tests/unit/test_sgc_turn_w1.py",
    "tests/unit/test_tandem_w1_segments.py",
    "tests/unit/test_w1_parser_fixed.py",
    "tests/unit/test_config_errors_fixed.py",
    "tests/unit/test_grammar_tables_fixed.py",
    "tests/unit/test_fixed_sgc_w1_psi.py",
    "tests/unit/test_fixed_sgc_w2_w3.py",
)
_SUPPORT_TESTS = (
    "tests/unit/test_support_tools.py",
    "tests/unit/test_support_eligibility_table.py",
    "tests/unit/test_support_cards.py",
    "tests/unit/test_fixed_grounding_more.py",  # eligibility and observations edges too
)
_CONTRACT_TESTS = (
    "tests/unit/test_dr_contract.py",
    "tests/unit/test_dr_closure_table.py",
    "tests/unit/test_contract_helpers.py",
)
_ERROR_TESTS = ("tests/unit/test_errors.py",)
_GUARD_TESTS = (
    "tests/unit/test_guard_config.py",
    "tests/unit/test_guard_mid.py",
    "tests/unit/test_guard_pii.py",
    "tests/unit/test_guard_post.py",
    "tests/unit/test_guard_pre.py",
    "tests/unit/test_guard_tables.py",
    "tests/unit/test_dr_pii.py",
    "tests/unit/test_guard_injection.py",
    "tests/unit/test_guard_pii_kinds.py",
    "tests/unit/test_guard_post_split.py",
    "tests/unit/test_dr_canary.py",
    "tests/unit/test_guard_fixed.py",
    "tests/unit/test_config_errors_fixed.py",
    "tests/unit/test_guard_ids_fixed.py",
    "tests/unit/test_guard_normalize_fixed.py",
    "tests/unit/test_guard_post_fixed.py",
    "tests/unit/test_fixed_guard_more.py",
    "tests/unit/test_gate.py",
    "tests/unit/test_fixed_gate_release.py",
    "tests/unit/test_fixed_gate_judges.py",
    "tests/unit/test_fixed_gate_completion.py",
    "tests/unit/test_tandem_w1_segments.py",  # the narration gate inside the turn
)

_KERNEL_MODULES = (
    "pipelines/sgc/*",
    "pipelines/errors.py",
    "pipelines/domains/support/eligibility.py",
    "pipelines/domains/support/cards.py",
    "pipelines/domains/support/observations.py",
    "pipelines/core/contract.py",
)
# the guardrails, and the one fail-closed sentence gate with its judges
_GUARD_MODULES = ("pipelines/guardrails/*", "pipelines/gate.py")
# Grounded arguments: the enum constraint of tool and card arguments, and the backend's re-check.
_GROUNDING_MODULES = (
    "pipelines/grounding.py",
    "pipelines/domains/support/grounded.py",
    "pipelines/domains/support/candidates.py",
)
_GROUNDING_TESTS = (
    "tests/unit/test_grounding.py",
    "tests/unit/test_grounded.py",
    "tests/unit/test_candidates_fixed.py",
    "tests/unit/test_support_candidates.py",
    "tests/unit/test_dr_poisoned_world.py",
    "tests/unit/test_tandem_pipeline.py",
    "tests/unit/test_tandem_writes.py",
    "tests/unit/test_tandem_coach.py",
    "tests/unit/test_write_ledger.py",
    "tests/unit/test_dr_pipeline.py",
    "tests/unit/test_fixed_grounding_more.py",
    "tests/unit/test_support_described.py",  # items, variants (comparatives) and payment methods in words
)

# Tenancy and the session's one holder: owners, leases, the one read a turn starts with.
_SESSION_MODULES = ("pipelines/sessions.py",)
_SESSION_TESTS = (
    "tests/unit/test_session_load.py",
    "tests/unit/test_session_locks.py",
    "tests/unit/test_turn_runner.py",
    "tests/unit/test_turn_safety.py",
    "tests/unit/test_sqlite_turn_store.py",
)

PROFILES: dict[str, Profile] = {
    "full": Profile(
        name="full",
        modules=_KERNEL_MODULES + _GUARD_MODULES + _GROUNDING_MODULES + _SESSION_MODULES,
        tests=(_KERNEL_TESTS + _SUPPORT_TESTS + _CONTRACT_TESTS + _ERROR_TESTS + _GUARD_TESTS + _GROUNDING_TESTS
               + _SESSION_TESTS),
    ),
    "kernels": Profile(
        name="kernels",
        modules=_KERNEL_MODULES,
        tests=_KERNEL_TESTS + _SUPPORT_TESTS + _CONTRACT_TESTS + _ERROR_TESTS,
    ),
    "guard": Profile(name="guard", modules=_GUARD_MODULES, tests=_GUARD_TESTS + _CONTRACT_TESTS),
    # the sentence gate and the post-guard alone (the release rules of streamed text)
    "gate": Profile(name="gate", modules=("pipelines/gate.py", "pipelines/guardrails/post.py"),
                    tests=_GUARD_TESTS),
    "grounding": Profile(name="grounding", modules=_GROUNDING_MODULES, tests=_GROUNDING_TESTS),
    "sessions": Profile(name="sessions", modules=_SESSION_MODULES, tests=_SESSION_TESTS),
    "slice": Profile(
        name="slice",
        modules=("pipelines/errors.py", "pipelines/core/contract.py"),
        tests=_CONTRACT_TESTS + _ERROR_TESTS,
    ),
}
