"""The airline policy's rules at their boundaries (expected values from policy.md, by hand)."""

from datetime import datetime

from tandem_airline import eligibility as el

NOW = datetime(2024, 5, 15, 15, 0, 0)


def test_free_bags_by_membership_and_cabin():
    assert [el.free_bags("regular", c) for c in ("basic_economy", "economy", "business")] == [0, 1, 2]
    assert [el.free_bags("silver", c) for c in ("basic_economy", "economy", "business")] == [1, 2, 3]
    assert [el.free_bags("gold", c) for c in ("basic_economy", "economy", "business")] == [2, 3, 4]
    assert el.bags_needing_fee("silver", "economy", 2, 4) == 0  # 2 x 2 free
    assert el.bags_needing_fee("silver", "economy", 2, 5) == 1
    assert el.bags_needing_fee("regular", "basic_economy", 3, 0) == 0


def test_segment_flown_at_the_day_boundary():
    assert el.segment_flown("2024-05-14", "available", NOW)
    assert not el.segment_flown("2024-05-15", "available", NOW)
    assert el.segment_flown("2024-05-15", "landed", NOW)
    assert el.segment_flown("2024-05-16", "flying", NOW)


def _cancel(**kw):
    base = dict(status=None, cabin="economy", insurance="no", created_at="2024-05-01T10:00:00", flown=[False],
                airline_cancelled=False, reason="change_of_plan", now=NOW)
    return el.cancel_refusal(**{**base, **kw})


def test_cancellation_window_is_24_hours_inclusive():
    assert _cancel(created_at="2024-05-14T15:00:00") is None
    assert _cancel(created_at="2024-05-14T14:59:59") == "not_cancellable"


def test_cancellation_reasons_cabin_and_insurance():
    assert _cancel() == "not_cancellable"
    assert _cancel(cabin="business") is None
    assert _cancel(airline_cancelled=True) is None
    assert _cancel(insurance="yes", reason="health") is None
    assert _cancel(insurance="yes", reason="weather") is None
    assert _cancel(insurance="yes", reason="change_of_plan") == "not_cancellable"
    assert _cancel(insurance="yes", reason=None) == "not_cancellable"
    assert _cancel(insurance="no", reason="health") == "not_cancellable"
    assert _cancel(cabin="business", flown=[True, False]) == "already_flown"
    assert _cancel(status="cancelled", cabin="business") == "already_cancelled"


def test_route_keeps_origin_destination_and_trip_type():
    assert el.route_refusal([("JFK", "ORD"), ("ORD", "SEA")], "JFK", "SEA", "one_way") is None
    assert el.route_refusal([("JFK", "ORD"), ("DTW", "SEA")], "JFK", "SEA", "one_way") == "route_changed"
    assert el.route_refusal([("JFK", "SEA")], "JFK", "LAX", "one_way") == "route_changed"
    assert el.route_refusal([("JFK", "SEA"), ("SEA", "JFK")], "JFK", "SEA", "round_trip") is None
    assert el.route_refusal([("JFK", "SEA")], "JFK", "SEA", "round_trip") == "route_changed"
    assert el.route_refusal([], "JFK", "SEA", "one_way") == "route_changed"


def test_changes_of_flights_and_cabin():
    kw = dict(status=None, cabin="basic_economy", new_cabin="basic_economy", flights_changed=True, any_flown=False)
    assert el.change_refusal(**kw) == "basic_economy_fixed"
    assert el.change_refusal(**{**kw, "flights_changed": False, "new_cabin": "economy"}) is None  # cabin only
    assert el.change_refusal(**{**kw, "cabin": "economy", "new_cabin": "business", "any_flown": True}) == "already_flown"
    assert el.change_refusal(**{**kw, "cabin": "economy"}) is None
    # neither the flights nor the cabin: nothing changes (basic economy too: it is no change of its flights)
    assert el.change_refusal(**{**kw, "cabin": "economy", "new_cabin": "economy", "flights_changed": False}) == \
        "no_change"
    assert el.change_refusal(**{**kw, "flights_changed": False}) == "no_change"
    assert el.change_refusal(**{**kw, "status": "cancelled", "flights_changed": False}) == "already_cancelled"


def test_payment_of_a_change():
    assert el.update_payment_refusal(None, None, 10) == "payment_not_found"
    assert el.update_payment_refusal("certificate", 500, 10) == "certificate_not_allowed"
    assert el.update_payment_refusal("gift_card", 99.99, 100) == "insufficient_balance"
    assert el.update_payment_refusal("gift_card", 100, 100) is None
    assert el.update_payment_refusal("credit_card", None, 1000) is None
    assert el.update_payment_refusal("gift_card", 0, -50) is None  # a refund


def test_bags_are_added_never_removed_and_paid_beyond_the_allowance():
    kw = dict(old_total=1, old_nonfree=0, membership="regular", cabin="economy", passengers=1)
    assert el.baggage_refusal(total=1, nonfree=0, **kw) == "no_bags_added"  # the count it holds: no change
    assert el.baggage_refusal(total=0, nonfree=0, **kw) == "bags_removed"
    assert el.baggage_refusal(total=2, nonfree=0, **kw) == "bags_under_charged"
    assert el.baggage_refusal(total=2, nonfree=1, **kw) is None
    assert el.baggage_refusal(total=2, nonfree=3, **kw) == "bags_removed"


def test_passengers_and_booking():
    assert el.passengers_refusal(2, 2) is None and el.passengers_refusal(2, 3) == "passenger_count"
    kw = dict(sources=["credit_card"], membership="gold", cabin="economy", total_bags=0, nonfree_bags=0)
    assert el.booking_refusal(passengers=5, **kw) is None
    assert el.booking_refusal(passengers=6, **kw) == "too_many_passengers"
    assert el.booking_refusal(passengers=0, **kw) == "too_many_passengers"
    pay = dict(passengers=1, membership="gold", cabin="economy", total_bags=0, nonfree_bags=0)
    assert el.booking_refusal(sources=["certificate", "credit_card", "gift_card", "gift_card", "gift_card"], **pay) is None
    assert el.booking_refusal(sources=["certificate", "certificate"], **pay) == "payment_mix"
    assert el.booking_refusal(sources=["credit_card", "credit_card"], **pay) == "payment_mix"
    assert el.booking_refusal(sources=["gift_card"] * 4, **pay) == "payment_mix"
    assert el.booking_refusal(sources=["gift_card", None], **pay) == "payment_not_found"
    bags = dict(passengers=2, sources=["credit_card"], membership="gold", cabin="economy")
    assert el.booking_refusal(total_bags=6, nonfree_bags=0, **bags) is None  # 3 free each
    assert el.booking_refusal(total_bags=7, nonfree_bags=0, **bags) == "bags_under_charged"


def test_compensation():
    assert el.compensation_refusal(membership="regular", insured=False, business=False, amount=100) == "no_compensation"
    assert el.compensation_refusal(membership="silver", insured=False, business=False, amount=100) is None
    assert el.compensation_refusal(membership="regular", insured=True, business=False, amount=50) is None
    assert el.compensation_refusal(membership="regular", insured=False, business=True, amount=150) is None
    assert el.compensation_refusal(membership="gold", insured=False, business=False, amount=75) == "bad_amount"
    assert el.compensation_refusal(membership="gold", insured=False, business=False, amount=0) == "bad_amount"
