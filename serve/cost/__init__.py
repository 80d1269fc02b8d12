"""``tandem cost``: model calls, tokens and engine time per turn, per pipeline kind, and what they would cost.

* :mod:`.measure` — the workload, each turn's cost played alone, goodput under load;
* :mod:`.report`  — per-turn distributions, production prices, ratios, the table and the plot;
* :mod:`.cli`     — ``main(argv)`` (``tandem cost``).
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """The ``tandem cost`` command (see :mod:`serve.cost.cli`)."""
    from .cli import main as _main

    return _main(argv)
