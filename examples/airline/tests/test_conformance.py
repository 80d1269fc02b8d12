"""The airline pack passes Tandem's conformance suite."""

from pipelines.domains.testing import PackConformance


class TestConformance(PackConformance):
    pack_name = "airline"
