"""The http_pack pack passes Tandem's conformance suite."""

from pipelines.domains.testing import PackConformance


class TestConformance(PackConformance):
    pack_name = "http_pack"

    def make_pack(self):
        """The pack over its service, started here on a free port (the suite reads through it)."""
        from tandem_http_pack import service
        from tandem_http_pack.pack import DomainPack

        url, _, self.stop = service.start(service.seeded(7))
        return DomainPack(base_url=url)

    def teardown_method(self) -> None:
        stop = self.__dict__.pop("stop", None)
        if stop is not None:
            stop()
