"""The eval's judge of a requested airline card (``tandem eval``'s "unrequested cards"): every card has a rule,
written apart from the pack's cues, that a request for it meets and a request for another card does not."""

import pytest
from tandem_airline.evaluation import CARD_RULES, AirlineEvaluation
from tandem_airline.pack import CARDS


def test_every_card_has_a_rule():
    assert sorted(AirlineEvaluation().card_rules()) == sorted(c.id for c in CARDS)


@pytest.mark.parametrize(("card", "asked", "not_asked"), [
    ("card.cancel_reservation", ["Please cancel my trip to Denver.", "We're calling off the whole thing.",
                                 "I no longer need the flight next week."],
     ["Can I bring two bags?", "Is my flight on time?"]),
    ("card.change_flights", ["Could you move my flight to Friday?", "Please upgrade me to business.",
                             "Is there a later flight that day?"],
     ["Please cancel it.", "Add a bag, please."]),
    ("card.add_bags", ["I'd like to add 2 bags.", "Can I check in one more suitcase?", "two extra bags please"],
     ["What's my baggage allowance?", "Change the date."]),
    ("card.change_passengers", ["Please correct the passenger's name.", "I need to update the date of birth.",
                                "Replace one traveler with my son."],
     ["Add a checked bag.", "Move the flight to Monday."]),
    ("card.book_reservation", ["I want to book a flight to Seattle.", "Can I buy two tickets for June?",
                               "Make a new reservation for me."],
     ["Cancel my reservation.", "What flights are there to Seattle?"]),
    ("card.send_certificate", ["I'd like some compensation for the delay.", "Can I get a travel certificate?"],
     ["My flight was delayed.", "Cancel it."]),
])
def test_a_request_for_the_card_meets_its_rule_and_a_request_for_another_does_not(card, asked, not_asked):
    rule = CARD_RULES[card][1]
    assert [bool(rule.search(t)) for t in asked] == [True] * len(asked)
    assert [bool(rule.search(t)) for t in not_asked] == [False] * len(not_asked)
