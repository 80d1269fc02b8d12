"""pipelines.admission: the limit follows the measured rate and the deadline; a turn over it is refused at once."""

from __future__ import annotations

import pytest

from pipelines.admission import AdaptiveAdmission
from pipelines.errors import Overloaded


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _adm(**kw) -> tuple[AdaptiveAdmission, Clock]:
    c = Clock()
    kw.setdefault("alpha", 1.0)  # the last sample is the estimate: values by hand
    return AdaptiveAdmission(60.0, clock=c, **kw), c


def test_cold_it_admits_the_initial_limit_and_refuses_the_next_at_once_with_retry_after() -> None:
    a, _ = _adm(initial_limit=2)
    t1, t2 = a.admit(), a.admit()
    with pytest.raises(Overloaded) as e:
        a.admit()
    assert e.value.http_status == 503 and e.value.retry_after_s == 1.0  # no rate yet: the minimum
    assert e.value.details == {"in_flight": 2, "limit": 2}
    assert (a.admitted, a.refused, a.inflight) == (2, 1, 2)
    a.release(t1, completed=False)
    a.admit()  # a slot freed: admitted again
    assert t2 is not None


def test_one_turn_alone_gives_rate_one_over_its_latency() -> None:
    a, c = _adm(target=0.5)
    t = a.admit()
    c.t += 10.0
    a.release(t, completed=True)
    assert a.rate == pytest.approx(0.1)  # N̄ = 1 over 10 s
    assert a.limit == 3  # ⌊0.1 × 30⌋
    assert a.retry_after_s() == pytest.approx(10.0)


def test_turns_sharing_the_box_measure_its_rate_by_littles_law() -> None:
    a, c = _adm(target=0.5, initial_limit=4)
    tickets = [a.admit() for _ in range(4)]  # four at once, each takes 20 s: 0.2 turns/s
    c.t += 20.0
    for t in tickets:
        a.release(t, completed=True)
    assert a.rate == pytest.approx(4 / 20)
    assert a.limit == 6  # ⌊0.2 × 30⌋


def test_the_in_flight_mean_counts_only_the_turns_life() -> None:
    a, c = _adm(initial_limit=3)
    first = a.admit()
    c.t += 5.0  # alone for 5 s
    second = a.admit()
    c.t += 5.0  # two in flight for 5 s
    a.release(first, completed=True)
    assert a.rate == pytest.approx(((5 * 1 + 5 * 2) / 10) / 10)  # N̄ 1.5 over 10 s
    c.t += 5.0
    a.release(second, completed=True)
    assert a.rate == pytest.approx(((5 * 2 + 5 * 1) / 10) / 10)


def test_a_slower_box_gets_a_lower_limit_and_a_faster_one_a_higher() -> None:
    slow, cs = _adm()
    fast, cf = _adm()
    for adm, clock, secs in ((slow, cs, 40.0), (fast, cf, 2.0)):
        t = adm.admit()
        clock.t += secs
        adm.release(t, completed=True)
    assert slow.limit == 1 and fast.limit == 15


def test_limit_bounds_and_ewma() -> None:
    a, c = _adm(alpha=0.5, max_limit=10, min_limit=1)
    t = a.admit()
    c.t += 1.0
    a.release(t, completed=True)
    assert a.rate == 1.0 and a.limit == 10  # ⌊30⌋ capped
    t = a.admit()
    c.t += 3.0
    a.release(t, completed=True)
    assert a.rate == pytest.approx(0.5 * 1.0 + 0.5 * (1 / 3))


def test_a_late_turn_halves_the_rate_and_a_failed_one_is_no_sample() -> None:
    a, c = _adm(initial_limit=2)
    t = a.admit()
    c.t += 10.0
    a.release(t, completed=True)
    assert a.rate == pytest.approx(0.1)
    t = a.admit()
    c.t += 61.0
    a.release(t, completed=False, late=True)
    assert a.rate == pytest.approx(0.05) and a.late == 1 and a.limit == 1
    t = a.admit()
    c.t += 0.01
    a.release(t, completed=False)  # refused by a later check / the client left: only the slot
    assert a.rate == pytest.approx(0.05) and a.inflight == 0


def test_a_late_turn_before_any_sample_sets_a_halved_rate() -> None:
    a, c = _adm(initial_limit=2)
    t = a.admit()
    c.t += 80.0
    a.release(t, completed=False, late=True)
    assert a.rate == pytest.approx(1 / 80 / 2) and a.limit == 1


def test_release_twice_does_nothing() -> None:
    a, c = _adm()
    t = a.admit()
    c.t += 1.0
    a.release(t, completed=True)
    a.release(t, completed=True)
    assert (a.inflight, a.completed) == (0, 1)


@pytest.mark.parametrize("kw", [{"target": 0.0}, {"target": 1.5}, {"initial_limit": 0, "min_limit": 1},
                                {"initial_limit": 5, "max_limit": 4}])
def test_bad_settings_are_refused(kw) -> None:
    with pytest.raises(ValueError):
        AdaptiveAdmission(60.0, **kw)


def test_snapshot() -> None:
    a, _ = _adm(initial_limit=3)
    a.admit()
    assert a.snapshot() == {"limit": 3, "in_flight": 1, "rate_per_s": None, "admitted": 1, "refused": 0,
                            "completed": 0, "late": 0, "expired": 0}


def test_a_ticket_never_released_stops_counting_twice_the_deadline_after() -> None:
    a, c = _adm(initial_limit=1)
    lost = a.admit()
    c.t += 120.0  # exactly twice the 60 s deadline: still counted
    with pytest.raises(Overloaded):
        a.admit()
    c.t += 0.5
    late = a.admit()  # past it: the lost ticket no longer holds the slot
    assert a.expired == 1 and a.inflight == 1
    a.release(lost, completed=True)  # its late release changes nothing
    assert (a.inflight, a.completed) == (1, 0)
    a.release(late, completed=False)
    assert a.inflight == 0
