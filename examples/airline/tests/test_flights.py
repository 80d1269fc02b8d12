"""A change of flights (tandem_airline.flights): the directions of a reservation, the dates wanted, the itineraries
that fit, ranked as the user's words rank them, and the new itinerary whole. Expected values written from the
rules in the module's docstring."""

import pytest
from tandem_airline import flights as fl

ROUND = {"origin": "JFK", "destination": "SEA", "legs": "JFK>ORD>2024-05-20>HAT001;ORD>SEA>2024-05-20>HAT002;"
                                                       "SEA>JFK>2024-05-27>HAT003"}


def _flight(number, origin, dest, day, departs, economy=100, seats=5, arrives="23:00:00"):
    return {"flight_number": number, "origin": origin, "destination": dest, "date": day,
            "scheduled_departure_time_est": departs, "scheduled_arrival_time_est": arrives,
            "prices": {"economy": economy, "business": economy * 3}, "available_seats": {"economy": seats,
                                                                                        "business": 1}}


def _searched(*results):
    flights, trips = {}, []
    for r in results:
        fl.keep_trips(flights, trips, r)
    return flights, trips


def test_directions_split_at_the_destination():
    dirs = fl.directions(ROUND)
    assert dirs == [("JFK", "SEA", "2024-05-20", ["HAT001@2024-05-20", "HAT002@2024-05-20"]),
                    ("SEA", "JFK", "2024-05-27", ["HAT003@2024-05-27"])]
    one_way = {"origin": "JFK", "destination": "SEA", "legs": "JFK>SEA>2024-05-20>HAT009"}
    assert fl.directions(one_way) == [("JFK", "SEA", "2024-05-20", ["HAT009@2024-05-20"])]
    assert fl.directions({"origin": "JFK", "destination": "SEA"}) == []


def test_a_search_keeps_each_itinerary_by_number_and_date():
    flights, trips = _searched(
        {"flights": [_flight("HAT010", "JFK", "SEA", "2024-05-21", "08:00:00")]},
        {"trips": [[_flight("HAT011", "JFK", "ORD", "2024-05-21", "09:00:00"),
                    _flight("HAT012", "ORD", "SEA", "2024-05-21", "13:00:00")]]},
        {"flights": [{"flight_number": "HAT013", "origin": "JFK", "destination": "SEA"}]})  # no date: not kept
    assert trips == [["HAT010@2024-05-21"], ["HAT011@2024-05-21", "HAT012@2024-05-21"]]
    assert flights["HAT010@2024-05-21"]["price:economy"] == "100"
    assert flights["HAT012@2024-05-21"]["seats:business"] == "1"
    fl.keep_trips(flights, trips, {"flights": [_flight("HAT010", "JFK", "SEA", "2024-05-21", "08:00:00")]})
    assert len(trips) == 2  # the same itinerary searched again is kept once


def test_what_searches_keep_is_bounded(monkeypatch):
    monkeypatch.setattr(fl, "MAX_FLIGHTS", 3)
    monkeypatch.setattr(fl, "MAX_TRIPS", 2)
    flights, trips = _searched({"flights": [_flight(f"HAT10{i}", "JFK", "SEA", "2024-05-21", "08:00:00")
                                            for i in range(5)]})
    assert len(flights) == 3 and trips == [["HAT100@2024-05-21"], ["HAT101@2024-05-21"]]  # the third: no room
    fl.keep_trips(flights, trips, {"trips": [[_flight("HAT100", "JFK", "SEA", "2024-05-21", "08:00:00"),
                                              _flight("HAT109", "SEA", "JFK", "2024-05-21", "12:00:00")]]})
    assert len(flights) == 3 and len(trips) == 2  # a trip whose flight finds no room is not kept in part


@pytest.mark.parametrize(("said", "texts", "want"), [
    ([], ["I'd like to move my trip"], [None, None]),  # nothing said of another flight: the flights are kept
    (["2024-05-22"], [""], ["2024-05-22", None]),  # one new date: the direction whose date it is nearest
    (["2024-05-26"], [""], [None, "2024-05-26"]),
    (["2024-05-23"], [""], ["2024-05-23", None]),  # 3 days from the outbound, 4 from the return
    (["2024-05-24"], [""], [None, "2024-05-24"]),  # 4 from the outbound, 3 from the return
    (["2024-05-29", "2024-05-21"], [""], ["2024-05-21", "2024-05-29"]),  # two: in date order
    (["2024-05-20", "2024-05-25"], [""], ["2024-05-25", None]),  # a date held names its direction: no new date
    (["2024-05-27", "2024-05-22"], [""], [None, "2024-05-22"]),  # the return named, though nearer the outbound
    (["2024-05-20", "2024-05-27", "2024-05-22"], [""], ["2024-05-22", None]),  # both named: the nearest
    (["2024-05-20", "2024-05-27", "2024-05-26"], [""], [None, "2024-05-26"]),
    ([], ["fly me the day after instead"], ["2024-05-21", "2024-05-28"]),
    ([], ["a day earlier please"], ["2024-05-19", "2024-05-26"]),
    ([], ["the cheapest flight you have"], ["2024-05-20", "2024-05-27"]),  # another flight, the dates held
    ([], ["a nonstop one"], ["2024-05-20", "2024-05-27"]),
])
def test_the_dates_wanted(said, texts, want):
    assert fl.wanted_dates(fl.directions(ROUND), said, texts) == want


def test_ranking_words():
    assert fl.ranks(["the least expensive one"]) == "price"
    assert fl.ranks(["something earlier"]) == "earliest"
    assert fl.ranks(["the latest flight"]) == "latest"
    assert fl.ranks(["any flight will do"]) is None
    assert fl.ranks(["the cheapest", "no, the earliest"]) == "earliest"  # the newest text ranks


DAY = "2024-05-21"
OUT = ("JFK", "SEA", "2024-05-20", ["HAT001@2024-05-20", "HAT002@2024-05-20"])


def _day_search():
    return _searched(
        {"flights": [_flight("HAT020", "JFK", "SEA", DAY, "15:00:00", economy=300),
                     _flight("HAT021", "JFK", "SEA", DAY, "07:00:00", economy=250, seats=1),
                     _flight("HAT022", "JFK", "SEA", "2024-05-22", "06:00:00", economy=50),  # another day
                     _flight("HAT023", "JFK", "BOS", DAY, "06:00:00", economy=50)]},  # another route
        {"trips": [[_flight("HAT024", "JFK", "ORD", DAY, "10:00:00", economy=90),
                    _flight("HAT025", "ORD", "SEA", DAY, "14:00:00", economy=90, arrives="01:10:00+1")]]})


def test_the_itineraries_that_fit_a_direction_on_its_day_best_first():
    flights, trips = _day_search()
    fits = fl.fitting_trips(flights, trips, OUT, DAY, "economy", 1, None)
    assert fits == [["HAT021@" + DAY], ["HAT020@" + DAY], ["HAT024@" + DAY, "HAT025@" + DAY]]  # direct first
    assert fl.fitting_trips(flights, trips, OUT, DAY, "economy", 2, None) == [
        ["HAT020@" + DAY], ["HAT024@" + DAY, "HAT025@" + DAY]]  # one seat left is not enough for two
    assert fl.fitting_trips(flights, trips, OUT, DAY, "economy", 1, "price")[0] == ["HAT024@" + DAY,
                                                                                     "HAT025@" + DAY]  # 180
    assert fl.fitting_trips(flights, trips, OUT, DAY, "economy", 1, "earliest")[0] == ["HAT021@" + DAY]
    assert fl.fitting_trips(flights, trips, OUT, DAY, "economy", 1, "latest")[0] == ["HAT020@" + DAY]
    assert fl.fitting_trips(flights, trips, OUT, "2024-05-23", "economy", 1, None) == []


@pytest.mark.parametrize(("text", "first"), [
    ("one leaving after 2pm", ["HAT020"]),
    ("something after 10:00", ["HAT020", "HAT024"]),  # 10:00 itself is after 10:00
    ("before 7 am", ["HAT021"]),
    ("the 3 pm flight", ["HAT020"]),
    ("in the morning", ["HAT021", "HAT024"]),
    ("in the afternoon", ["HAT020"]),
    ("a direct flight", ["HAT021", "HAT020"]),
    ("one stop is fine", ["HAT024"]),
    ("arriving by 11 pm", ["HAT021", "HAT020"]),  # both land at 23:00; the stop lands after midnight
    ("gets in after 11:30 pm", ["HAT024"]),  # landing the next day is after any time that day
    ("leaving at 5 am", ["HAT021", "HAT020", "HAT024"]),  # none then: nothing narrowed
    ("flight on 2024-05-21", ["HAT021", "HAT020", "HAT024"]),  # a date is no time
])
def test_what_is_said_of_the_flight_narrows_the_fits(text, first):
    flights, trips = _day_search()
    fits = fl.fitting_trips(flights, trips, OUT, DAY, "economy", 1, None, fl.said_filters([text]))
    assert [t[0].split("@")[0] for t in fits] == first


def test_noon_and_24_hour_times():
    flights, trips = _day_search()
    for text in ("after noon", "after 12:00"):
        fits = fl.fitting_trips(flights, trips, OUT, DAY, "economy", 1, None, fl.said_filters([text]))
        assert [t[0].split("@")[0] for t in fits] == ["HAT020"]
    assert fl.said_filters(["at 13 pm"]) == []  # no such time


BACK = ("SEA", "JFK", "2024-05-27", ["HAT003@2024-05-27"])
A, B, C = ["HAT030@2024-05-21"], ["HAT031@2024-05-21", "HAT032@2024-05-21"], ["HAT033@2024-05-28"]


def test_the_itinerary_whole():
    dirs = [OUT, BACK]
    # the outbound changes to the flight picked; the return keeps its flight
    assert fl.itinerary(["HAT030"], dirs, [[A, B], []], False) == ["HAT030@2024-05-21", "HAT003@2024-05-27"]
    # a stop's first leg brings its second
    assert fl.itinerary(["HAT031"], dirs, [[A, B], []], False) == [*B, "HAT003@2024-05-27"]
    # picked by number and date alike
    assert fl.itinerary(["HAT031@2024-05-21"], dirs, [[A, B], []], False) == [*B, "HAT003@2024-05-27"]
    # both directions new: the return's only option completes it; several unranked leave it open
    assert fl.itinerary(["HAT030"], dirs, [[A, B], [C]], False) == [*A, *C]
    assert fl.itinerary(["HAT033"], dirs, [[A, B], [C]], False) is None
    assert fl.itinerary(["HAT033"], dirs, [[A, B], [C]], True) == [*A, *C]  # ranked: the best
    # a held flight picked where nothing changes: the flights held
    assert fl.itinerary(["HAT001"], dirs, [[], []], False) == [*OUT[3], *BACK[3]]


def test_the_direction_left_open():
    dirs = [OUT, BACK]
    assert fl.open_direction(["HAT033"], dirs, [[A, B], [C]], False) == 0
    assert fl.open_direction(["HAT031"], dirs, [[A, B], [C]], False) is None
    assert fl.open_direction(["HAT033"], dirs, [[A, B], [C]], True) is None
    assert fl.open_direction(["HAT030"], dirs, [[A], []], False) is None  # one option: no choice


def test_an_itinerary_in_words():
    flights, _ = _day_search()
    trip = ["HAT024@" + DAY, "HAT025@" + DAY]
    assert fl.describe_trip(flights, trip, "economy") == "HAT024 at 10:00 and HAT025 at 14:00 on 2024-05-21 " \
                                                         "($180 in economy)"
    assert fl.describe_trip(flights, ["HAT024@" + DAY], "basic_economy") == "HAT024 at 10:00 on 2024-05-21"
    assert fl.describe_trip(flights, ["HAT999@" + DAY], "economy") == ""


@pytest.mark.parametrize(("text", "departs", "fits"), [
    ("in the morning", "11:59:00", True), ("in the morning", "12:00:00", False),
    ("in the afternoon", "12:00:00", True), ("in the afternoon", "16:59:00", True),
    ("in the afternoon", "17:00:00", False), ("an evening flight", "17:00:00", True),
    ("an evening flight", "16:30:00", False),
])
def test_parts_of_the_day_and_their_edges(text, departs, fits):
    (test,) = fl.said_filters([text])
    assert test(["HAT001@2024-05-21"], [{"departs": departs}]) is fits
