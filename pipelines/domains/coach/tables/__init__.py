"""Data only: the coach rule tables (``phi.yaml``, ``psi.yaml``, ``tiers.yaml``, ``w3.yaml``).

A package so that setuptools' ``package-data`` pattern (``*.yaml``) ships the files in a wheel.
"""

__all__: list[str] = []
