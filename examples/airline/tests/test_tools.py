"""The airline tools over the tau2-airline world, through Tandem's tool port (values read off db.json by hand)."""

import asyncio

import pytest
from tandem_airline.data import default_data_dir
from tandem_airline.pack import AirlinePack

from pipelines.domain import ToolSession, UnconfirmedWrite

pytestmark = pytest.mark.skipif(not (default_data_dir() / "db.json").is_file(),
                                reason="tau2-airline data not found (set TANDEM_AIRLINE_DIR)")


@pytest.fixture(scope="module")
def pack():
    return AirlinePack()


@pytest.fixture
def tools(pack):
    return pack.tool_runner(pack.new_world(0), None)


def _run(coro):
    return asyncio.run(coro)


def test_the_policy_clock_is_the_policy_time(tools):
    assert tools.world.now().isoformat() == "2024-05-15T15:00:00"


def test_a_business_reservation_is_cancelled_once_after_the_yes_with_refunds(tools):
    s = ToolSession(session_id="s", authenticated_user_id="chen_jackson_3290",
                    user_texts=["please cancel 4WQ150, my plans changed"])
    args = {"reservation_id": "4WQ150", "reason": "change_of_plan"}
    assert _run(tools.precheck("cancel_reservation", args, s)) is None
    with pytest.raises(UnconfirmedWrite):  # the core's tool port: no write before the user's yes to its card
        _run(tools.call("cancel_reservation", args, s))
    assert tools.world.reservations["4WQ150"].status is None
    yes = s.confirm("cancel_reservation", args, "k1")
    first = _run(tools.call("cancel_reservation", args, yes))
    again = _run(tools.call("cancel_reservation", args, yes))
    assert first.observation.ok and again.replayed
    res = tools.world.reservations["4WQ150"]
    assert res.status == "cancelled"
    assert [(p.payment_id, p.amount) for p in res.payment_history] == [("gift_card_3576581", 4986),
                                                                        ("gift_card_3576581", -4986)]


def test_someone_elses_reservation_is_refused(tools):
    s = ToolSession(session_id="s", authenticated_user_id="mia_li_3668", user_texts=["4WQ150"])
    out = _run(tools.call("get_reservation_details", {"reservation_id": "4WQ150"}, s))
    assert not out.observation.ok and out.reason == "other_user"


def test_basic_economy_keeps_its_flights_but_may_change_cabin(tools):
    s = ToolSession(session_id="s", authenticated_user_id="daiki_muller_1116",
                    user_texts=["XEHM4B: HAT005 on 2024-05-21 please, credit_card_2408938"])
    moved = {"reservation_id": "XEHM4B", "cabin": "basic_economy", "payment_id": "credit_card_2408938",
             "flights": [{"flight_number": "HAT005", "date": "2024-05-21"},
                         {"flight_number": "HAT178", "date": "2024-05-30"}]}
    assert _run(tools.precheck("update_reservation_flights", moved, s)) == "basic_economy_fixed"
    upgrade = dict(moved, cabin="economy", flights=[{"flight_number": "HAT005", "date": "2024-05-20"},
                                                    {"flight_number": "HAT178", "date": "2024-05-30"}])
    # a cabin the user neither named nor holds is never theirs: the backend refuses it
    assert _run(tools.precheck("update_reservation_flights", upgrade, s)) == "ungrounded_argument:cabin"
    said = ToolSession(session_id="s", authenticated_user_id="daiki_muller_1116",
                       user_texts=["XEHM4B: move me up to economy please, credit_card_2408938"])
    assert _run(tools.precheck("update_reservation_flights", upgrade, said)) is None
    kept = dict(upgrade, cabin="basic_economy")  # the cabin it holds, not named: grounded, but nothing changes
    assert _run(tools.precheck("update_reservation_flights", kept, s)) == "no_change"


def test_a_cancellation_reason_must_be_the_users(tools):
    s = ToolSession(session_id="s", authenticated_user_id="chen_jackson_3290", user_texts=["cancel 4WQ150"])
    assert _run(tools.precheck("cancel_reservation", {"reservation_id": "4WQ150", "reason": "weather"}, s)) \
        == "ungrounded_argument:reason"


def test_a_booking_pays_with_certificate_and_card_and_gets_the_next_id(tools):
    args = {"user_id": "mia_li_3668", "origin": "JFK", "destination": "SEA", "flight_type": "one_way",
            "cabin": "economy", "flights": [{"flight_number": "HAT136", "date": "2024-05-20"},
                                            {"flight_number": "HAT039", "date": "2024-05-20"}],
            "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
            "payment_methods": [{"payment_id": "certificate_7504069", "amount": 250},
                                {"payment_id": "credit_card_4421486", "amount": 5}],
            "total_baggages": 3, "nonfree_baggages": 0, "insurance": "no"}
    s = ToolSession(session_id="s", authenticated_user_id="mia_li_3668", user_texts=["JFK to SEA, economy"])
    assert _run(tools.precheck("book_reservation", args, s)) is None
    stranger = dict(args, passengers=[{"first_name": "Zed", "last_name": "Unknown", "dob": "2000-01-01"}])
    assert _run(tools.precheck("book_reservation", stranger, s))== \
        "ungrounded_argument:passengers[].dob,passengers[].first_name,passengers[].last_name"
    seats = tools.world.flights["HAT136"].dates["2024-05-20"].available_seats["economy"]
    out = _run(tools.call("book_reservation", args, s.confirm("book_reservation", args, "k-book")))
    assert out.observation.ok and out.observation.result["reservation_id"] == "HATHAT"
    assert out.observation.result["created_at"] == "2024-05-15T15:00:00"
    user = tools.world.users["mia_li_3668"]
    assert "certificate_7504069" not in user.payment_methods and user.reservations[-1] == "HATHAT"
    assert tools.world.flights["HAT136"].dates["2024-05-20"].available_seats["economy"] == seats - 1
    underpaid = dict(args, payment_methods=[{"payment_id": "credit_card_4421486", "amount": 5}])
    assert _run(tools.precheck("book_reservation", underpaid, s)) == "payment_mismatch"


def test_searches(tools):
    s = ToolSession(session_id="s")
    direct = _run(tools.call("search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}, s))
    found = [(f["flight_number"], f["scheduled_departure_time_est"]) for f in direct.observation.result["flights"]]
    assert sorted(found) == [("HAT069", "06:00:00"), ("HAT083", "01:00:00")]
    onestop = _run(tools.call("search_onestop_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}, s))
    legs = [[leg["flight_number"] for leg in trip] for trip in onestop.observation.result["trips"]]
    assert ["HAT136", "HAT039"] in legs
    calc = _run(tools.call("calculate", {"expression": "2 * ((350 - 122) + (499 - 127))"}, s))
    assert calc.observation.result == {"value": 1200.0}


def test_the_world_store_keeps_a_confirmed_write(pack, tmp_path):
    from serve.stores.world_sqlite import SQLiteWorldStore

    store = SQLiteWorldStore(tmp_path / "w.db")
    store.seed_if_empty(pack.new_world(0))
    tools = pack.tool_runner(store.load(pack.world_from_entities), store)
    assert tools.world.now().isoformat() == "2024-05-15T15:00:00"
    args = {"reservation_id": "4WQ150", "reason": "change_of_plan"}
    s = ToolSession(session_id="s", authenticated_user_id="chen_jackson_3290",
                    user_texts=["cancel 4WQ150, change of plan"]).confirm("cancel_reservation", args, "k")
    out = _run(tools.call("cancel_reservation", args, s))
    assert out.observation.ok and out.changed == {"reservation": ["4WQ150"]}  # what the world found changed
    again = store.load(pack.world_from_entities)
    assert again.reservations["4WQ150"].status == "cancelled" and len(again.reservations) == 2000
