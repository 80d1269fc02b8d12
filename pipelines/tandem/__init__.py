"""The ``tandem`` turn: W1 perception with guarded narration and Φ's early reads, W2 grounding, the
bounded orchestrator over grounded candidates, the kernels' context blocks, one forward contract and
the reply through the sentence gate — on any domain pack.

Built on the core (:mod:`pipelines.core`) and the ``Domain`` protocol alone (no family, no pack:
``tests/unit/test_architecture.py``). The path of one turn: :mod:`.pipeline` (``TandemPipeline.run``)
→ :func:`pipelines.core.prologue.open_turn` → :mod:`.routes` → :mod:`.decide` → :mod:`.respond`.
"""
