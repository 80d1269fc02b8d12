"""The records service, started on a free local port for each test that asks for it."""

import pytest
from tandem_http_pack import service


@pytest.fixture
def records_service():
    """``(base_url, state)`` of a freshly seeded service in a background thread; stopped afterwards."""
    url, state, stop = service.start(service.seeded(7))
    try:
        yield url, state
    finally:
        stop()
