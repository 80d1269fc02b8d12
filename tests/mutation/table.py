"""Mutants of the error table, which mutmut cannot reach.

mutmut 3 mutates function bodies only; the error table of
:mod:`pipelines.errors` is class attributes (``code``, ``http_status``,
``grpc_status`` declared on each class of the tree). This pass makes the
mutants a careless edit would: every declared value changed (an int + 1, a
string wrapped in ``XX``) and every declaration dropped where the inherited
value differs (a drop that inherits the same value is equivalent by
construction and not generated). Each mutant is applied with ``setattr`` /
``delattr`` in a forked child that then runs the selected tests in-process;
a failing test run kills it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.mutation.targets import LEAN_PYTEST_ARGS

__all__ = ["TableMutant", "table_mutants", "run_table_mutants", "MODULE"]

MODULE = "pipelines/errors.py [table]"
ATTRS = ("code", "http_status", "grpc_status")
_MISSING = object()


@dataclass(frozen=True)
class TableMutant:
    """One change to one class attribute of the error tree (``value`` is ``_MISSING`` for a drop)."""

    name: str
    cls: type
    attr: str
    value: Any

    def apply(self) -> None:
        if self.value is _MISSING:
            delattr(self.cls, self.attr)
        else:
            setattr(self.cls, self.attr, self.value)

    def describe(self) -> str:
        old = vars(self.cls)[self.attr]
        new = "(inherited)" if self.value is _MISSING else repr(self.value)
        return f"-    {self.attr} = {old!r}\n+    {self.attr} = {new}   # class {self.cls.__name__}"


def table_mutants() -> list[TableMutant]:
    """Every mutant of the declared table values, in tree order."""
    from pipelines.errors import all_error_classes

    out: list[TableMutant] = []
    for cls in all_error_classes():
        for attr in ATTRS:
            if attr not in vars(cls):
                continue
            value = vars(cls)[attr]
            base = f"pipelines.errors.table.{cls.__name__}.{attr}"
            changed = value + 1 if isinstance(value, int) else f"XX{value}XX"
            out.append(TableMutant(f"{base}__changed", cls, attr, changed))
            parent = cls.__mro__[1]
            if getattr(parent, attr, _MISSING) not in (_MISSING, value):
                out.append(TableMutant(f"{base}__inherited", cls, attr, _MISSING))
    return out


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    devnull = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(1), os.dup(2)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(devnull)


def _run_forked(tests: list[str], mutant: TableMutant | None) -> int:
    import pytest

    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # child: apply, run the tests, report through the exit status
        code = 2
        try:
            with _quiet():
                if mutant is not None:
                    mutant.apply()
                code = int(pytest.main(["-q", "-x", *LEAN_PYTEST_ARGS, *tests]))
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def run_table_mutants(tests: list[str]) -> dict[str, tuple[str, str]]:
    """Mutant name → (status, diff-like description); raises if the clean run fails."""
    import pytest  # noqa: F401 - imported once here, inherited by every forked child

    import pipelines.errors  # noqa: F401

    clean = _run_forked(tests, None)
    if clean != 0:
        raise RuntimeError(f"clean run of {tests} failed (exit {clean})")
    out: dict[str, tuple[str, str]] = {}
    for m in table_mutants():
        code = _run_forked(tests, m)
        status = {0: "survived", 1: "killed"}.get(code, "suspicious")
        out[m.name] = (status, m.describe())
    return out
