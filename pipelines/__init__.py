"""Tandem's pure domain logic: contracts, kernels, loops and the turn pipeline.

Nothing in this package imports Ray or vLLM. Models, tools and stores reach it
through the small Protocols in :mod:`pipelines.protocols`.
"""
