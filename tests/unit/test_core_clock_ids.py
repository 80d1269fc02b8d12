"""The core's clock and id allocation (expected values by hand)."""

from datetime import datetime

import pytest

from pipelines.core.clock import FixedClock, SystemClock, clock_from
from pipelines.core.ids import allocate, successor
from pipelines.errors import ConfigError


def test_successor_counts_up_within_each_class_and_carries():
    assert successor("HATHAT") == "HATHAU"
    assert successor("ABC09") == "ABC10"
    assert successor("AZZ") == "BAA"
    assert successor("cert_19") == "cert_20"
    assert successor("a-9") == "b-0"
    with pytest.raises(ValueError):
        successor("ZZ")
    with pytest.raises(ValueError):
        successor("--")


def test_allocate_skips_taken_ids():
    taken = {"HATHAT", "HATHAU"}
    assert allocate("HATHAT", taken.__contains__) == "HATHAV"
    assert allocate("X1", set().__contains__) == "X1"


def test_clock_from():
    assert clock_from("2024-05-15T15:00:00").now() == datetime(2024, 5, 15, 15, 0)
    assert isinstance(clock_from(None), SystemClock) and isinstance(clock_from("system"), SystemClock)
    assert FixedClock(datetime(2020, 1, 1)).now().year == 2020
    with pytest.raises(ConfigError):
        clock_from("tomorrow")
