"""The http_pack pack passes Tandem's conformance suite (installed or not: the pack is built here)."""

from tandem_http_pack.pack import DomainPack

from pipelines.domains.testing import PackConformance


class TestConformance(PackConformance):
    pack_name = "http_pack"

    def make_pack(self) -> DomainPack:
        return DomainPack()
