"""The http_pack pack passes Tandem's conformance suite."""

from pipelines.domains.testing import PackConformance


class TestConformance(PackConformance):
    pack_name = "http_pack"
