"""The instructed tau2 user: it says only what its instructions say, answers what was asked, judges cards by what it
wants; and the split of a task file into the half studied and the half measured. Every task here is written for
these tests."""

from __future__ import annotations

from pipelines.core.evaluation import AssistantTurn
from pipelines.core.tau2_user import (
    SPLIT_SEED,
    InstructedUser,
    _norm,
    conditionals,
    identity_lines,
    sayable,
    split_half,
)
from pipelines.domains.support.tau2_user import instructed_vocabulary

DB = {
    "users": {"nadia_okafor_1": {"user_id": "nadia_okafor_1", "payment_methods": {
        "credit_card_1": {"source": "credit_card", "brand": "visa", "last_four": "1111"},
        "paypal_2": {"source": "paypal"}}}},
    "orders": {"#W7000001": {"order_id": "#W7000001", "user_id": "nadia_okafor_1", "status": "delivered", "items": [
        {"name": "Electric Kettle", "product_id": "PK", "item_id": "K1", "options": {"capacity": "1L", "color": "white"}},
        {"name": "Yoga Mat", "product_id": "PY", "item_id": "Y1", "options": {"thickness": "4mm"}}]}},
    "products": {"PK": {"name": "Electric Kettle", "variants": {"K1": {"options": {"capacity": "1L"}},
                                                                 "K2": {"options": {"capacity": "2L"}}}},
                 "PY": {"name": "Yoga Mat", "variants": {"Y1": {"options": {"thickness": "4mm"}}}}},
}
CARD_TOOLS = {"card.exchange_items": "exchange_delivered_order_items", "card.cancel_order": "cancel_pending_order"}
WANT = {"order_id": "#W7000001", "item_ids": ["K1"], "new_item_ids": ["K2"], "payment_method_id": "paypal_2"}
REASON = ("You want to swap the kettle you got last week for a larger one. You would pay any difference with PayPal. "
          "If the agent asks about the yoga mat, say that it stays. Make sure the agent does not touch other items. "
          "(The kettle is white; please do not tell anyone.)")


def task(reason: str = REASON, known: str = "You are Nadia Okafor, zip code 60614.", manner: str = "Be brief.") -> dict:
    return {"id": "x1", "user_scenario": {"instructions": {"reason_for_call": reason, "known_info": known,
                                                            "unknown_info": "", "task_instructions": manner}},
            "evaluation_criteria": {"actions": [
                {"name": "find_user_id_by_name_zip", "arguments": {"first_name": "Nadia", "last_name": "Okafor",
                                                                    "zip": "60614"}},
                {"name": "exchange_delivered_order_items", "arguments": WANT}]}}


def user(**kw) -> InstructedUser:
    return InstructedUser(task(**kw), CARD_TOOLS, vocab=instructed_vocabulary(DB), max_turns=8)


def test_only_the_sentences_that_state_a_wish_are_sayable_in_the_first_person():
    assert sayable(REASON) == ["I want to swap the kettle I got last week for a larger one.",
                               "I would pay any difference with PayPal."]  # directives and hidden asides dropped
    assert conditionals(REASON) == [(frozenset({"yoga", "mat"}), "It stays.")]


def test_identity_comes_from_what_the_user_knows_in_the_order_the_pack_prefers():
    known = "You are mei_lin_4242, email mei.lin@example.com, living in zipcode 02134."
    assert identity_lines(known) == ["My email is mei.lin@example.com.", "My user id is mei_lin_4242, zip code 02134."]
    assert identity_lines(known, ("user_id",)) == ["My user id is mei_lin_4242, zip code 02134."]
    assert identity_lines("You are Nadia Okafor in zip code 60614.") == ["I'm Nadia Okafor, zip code 60614."]
    assert identity_lines("You are Nadia Okafor.") == []  # a name without a zip identifies no one here


def test_it_answers_what_was_asked_and_says_when_it_does_not_know():
    u = user()
    assert u.opening() == "I want to swap the kettle I got last week for a larger one."
    assert u.respond(AssistantTurn(question="Could you share your email, or your name and zip code?")).text == \
        "I'm Nadia Okafor, zip code 60614."
    r = u.respond(AssistantTurn(question="Which order do you mean? Please share the order number."))
    assert r.text == "I don't know the order number. I want to swap the kettle I got last week for a larger one."
    assert u.respond(AssistantTurn(question="Which of your payment methods should I use?")).text == \
        "I would pay any difference with PayPal."
    r = u.respond(AssistantTurn(question="Why would you like to cancel?"))
    assert (r.text, r.rule) == ("I'd rather not say.", "facts")  # nothing on it: the pack's line, no fact made up
    assert u.respond(AssistantTurn(question="Anything about the Yoga Mat to change?")).text == "It stays."


def test_how_it_behaves_answers_on_its_topics_and_is_never_volunteered():
    # task_instructions: tau2's user reads them too: a conditional there is an answer, a sentence there stating a
    # topic answers a question on it, a persona is never said
    u = user(manner="You are calm and patient. If the agent asks for a cancellation reason, say the kettle was "
                    "a gift you never used.")
    u.opening()
    r = u.respond(AssistantTurn(question="Why would you like to cancel?"))
    assert (r.text, r.rule) == ("The kettle was a gift I never used.", "instructed")
    u = user(manner="You are calm and patient. You cancel only because the mat arrived late.")
    u.opening()
    assert u.respond(AssistantTurn(question="Why would you like to cancel?")).text == \
        "I cancel only because the mat arrived late."
    u = user(manner="You are calm and patient.")
    u.opening()
    said = [u.respond(AssistantTurn(text="Okay.")).text for _ in range(3)]
    assert not any("calm" in (x or "") for x in said)  # a persona is not a wish: the request is restated instead
    assert said[0] == "I would pay any difference with PayPal."


def test_a_question_asked_again_word_for_word_after_an_answer_is_a_repeated_ask():
    u = user()
    u.opening()
    q = AssistantTurn(question="Which of your payment methods should I use?")
    assert not u.respond(q).repeated_ask
    assert u.respond(AssistantTurn(question="Which item do you mean?")).repeated_ask is False
    assert u.respond(q).repeated_ask and u.repeated_asks == 1


def test_a_card_is_judged_against_what_it_wants_and_a_card_offered_again_after_a_no_is_counted():
    u = user()
    u.opening()
    wrong = {**WANT, "item_ids": ["K1", "Y1"], "new_item_ids": ["K2", "Y1"]}
    assert u.respond(AssistantTurn(cards=(("card.exchange_items", wrong),))).rule == "no"
    r = u.respond(AssistantTurn(question="What should I change about it?"))
    assert (r.text, r.rule) == ("Not the Yoga Mat.", "what_differs")  # what differs, in words
    assert u.respond(AssistantTurn(cards=(("card.exchange_items", wrong),))).rule == "no"
    assert (u.cards_refused, u.reoffered_after_no) == (2, 1)
    assert u.pursuing() == "exchange_delivered_order_items"
    assert u.respond(AssistantTurn(cards=(("card.exchange_items", WANT),))).rule == "yes"
    assert u.pursuing() is None
    assert u.respond(AssistantTurn(text="Done.")).rule == "done"


def test_it_picks_among_listed_choices_by_its_instructions_words_and_tells_the_rest_then_gives_up():
    u = user()
    u.opening()
    r = u.respond(AssistantTurn(question="Which one: your visa ending 1111, your PayPal account?",
                                options=("your visa ending 1111", "your PayPal account")))
    assert (r.text, r.rule) == ("I would pay any difference with PayPal.", "chooses")
    v = user()
    v.opening()
    assert v.respond(AssistantTurn(text="Let me look.")).rule == "tells"  # the next sentence not said yet
    assert v.respond(AssistantTurn(text="Okay.")).rule == "restate"
    assert v.respond(AssistantTurn(text="Okay.")).rule == "restate"
    assert v.respond(AssistantTurn(text="Okay.")).rule == "stuck"


def test_the_split_is_fixed_by_its_seed_and_halves_the_tasks():
    ids = [str(i) for i in range(11)]
    halves = split_half(ids)
    assert halves == split_half(list(reversed(ids)))  # file order does not matter
    assert sum(h == "studied" for h in halves.values()) == 6 and set(halves.values()) == {"studied", "measured"}
    assert split_half(ids, seed=SPLIT_SEED + 1) != halves


def two_writes_task() -> dict:
    """A kettle exchange listed first and a cancellation of a second order listed after it."""
    t = task(reason="You want to cancel order #W7000002 as it is not needed any more. You also want to swap the "
                    "kettle for a larger one, paying with PayPal.")
    t["evaluation_criteria"]["actions"].append(
        {"name": "cancel_pending_order", "arguments": {"order_id": "#W7000002", "reason": "no longer needed"}})
    return t


def test_the_oracle_follows_the_request_the_user_speaks_of_not_the_order_the_writes_are_listed_in():
    u = InstructedUser(two_writes_task(), CARD_TOOLS, vocab=instructed_vocabulary(DB), max_turns=8)
    assert u.pursuing() == "exchange_delivered_order_items"  # nothing said yet: the first expected write
    u.opening()  # "I want to cancel order #W7000002 as it is not needed any more."
    assert u.pursuing() == "cancel_pending_order"  # its order, by id
    u.said.append("Okay.")
    assert u.pursuing() == "cancel_pending_order"  # named nothing: the request spoken of before goes on
    u.said.append("And the Electric Kettle, a larger one.")
    assert u.pursuing() == "exchange_delivered_order_items"  # its item, by name
    u.done.add(1)  # the exchange is done: the cancellation is all that is left, whatever was said last
    assert u.pursuing() == "cancel_pending_order"
    u.done.add(2)
    assert u.pursuing() is None


def test_an_id_said_as_part_of_a_longer_id_names_no_record():
    u = InstructedUser(two_writes_task(), CARD_TOOLS, vocab=instructed_vocabulary(DB), max_turns=8)
    write = {"name": "cancel_pending_order", "arguments": {"order_id": "#W7000002", "reason": "no longer needed"}}
    assert u._mentions(write, "order w7000002 please") == 1
    assert u._mentions(write, "order w70000021 please") == 0  # another id that starts the same
    assert u._mentions(write, "") == 0
    profile = {"name": "modify_user_address", "arguments": {"user_id": "nadia_okafor_1", "zip": "60614"}}
    assert u._mentions(profile, _norm("My user id is nadia_okafor_1.")) == 0  # who they are names no request
    assert u._mentions(profile, _norm("Move me to zip 60614.")) == 1


def test_a_conditional_answer_fires_on_a_question_of_its_topic_in_other_words():
    reason = "You want to cancel order #W7000002. If the agent asks about the reason for cancelling, mention a typo."
    u = user(reason=reason)
    assert conditionals(reason) == [(frozenset({"reason", "cancelling"}), "A typo.")]
    r = u.respond(AssistantTurn(question="Why would you like to cancel: no longer needed, or ordered by mistake?"))
    assert (r.text, r.rule) == ("A typo.", "instructed")  # "why" asks for the reason
    v = user(reason=reason)
    assert v.respond(AssistantTurn(question="Which order do you mean?")).rule != "instructed"  # another topic


def test_a_write_whose_topic_the_user_speaks_of_outweighs_one_it_does_not():
    t = two_writes_task()
    t["evaluation_criteria"]["actions"].insert(1, {"name": "modify_pending_order_address", "arguments": {
        "order_id": "#W7000001", "address1": "5 Oak Road", "address2": "", "city": "Reno", "state": "NV",
        "country": "USA", "zip": "89501"}})
    tools = {**CARD_TOOLS, "card.modify_address": "modify_pending_order_address"}
    u = InstructedUser(t, tools, vocab=instructed_vocabulary(DB), max_turns=8)
    u.said.append("Please send the order with my Electric Kettle to my other address.")
    assert u.pursuing() == "modify_pending_order_address"  # the kettle (1) and the address (1): listed first
    u.said.append("The Electric Kettle should be a larger one, paid with PayPal.")
    assert u.pursuing() == "exchange_delivered_order_items"  # the kettle (1) and the payment (1) against none


def test_what_a_refused_card_misses_is_said_against_the_write_on_the_same_order():
    db = {**DB, "orders": {**DB["orders"], "#W7000003": {"order_id": "#W7000003", "user_id": "nadia_okafor_1",
          "status": "delivered", "items": [{"name": "Desk Lamp", "product_id": "PL", "item_id": "L1", "options": {}},
                                           {"name": "Tea Tray", "product_id": "PT", "item_id": "T1", "options": {}}]}},
          "products": {**DB["products"], "PL": {"name": "Desk Lamp", "variants": {"L2": {"options": {}}}},
                       "PT": {"name": "Tea Tray", "variants": {"T2": {"options": {}}}}}}
    t = task()
    t["evaluation_criteria"]["actions"].append({"name": "exchange_delivered_order_items", "arguments": {
        "order_id": "#W7000003", "item_ids": ["L1", "T1"], "new_item_ids": ["L2", "T2"], "payment_method_id": "paypal_2"}})
    u = InstructedUser(t, CARD_TOOLS, vocab=instructed_vocabulary(db), max_turns=8)
    u.opening()
    card = {"order_id": "#W7000003", "item_ids": ["L1"], "new_item_ids": ["L2"], "payment_method_id": "paypal_2"}
    assert u.respond(AssistantTurn(cards=(("card.exchange_items", card),))).rule == "no"
    r = u.respond(AssistantTurn(question="What should I change about it?"))
    assert (r.text, r.rule) == ("Also the Tea Tray.", "what_differs")  # not "Not the Desk Lamp": the kettle's write


def cancel_task(reason: str, want_reason: str = "no longer needed") -> dict:
    return {"id": "x2", "user_scenario": {"instructions": {"reason_for_call": reason,
                                                            "known_info": "You are Nadia Okafor, zip code 60614.",
                                                            "unknown_info": "", "task_instructions": ""}},
            "evaluation_criteria": {"actions": [{"name": "cancel_pending_order", "arguments": {
                "order_id": "#W7000001", "reason": want_reason}}]}}


def test_offered_choices_none_of_its_sentences_tells_apart_it_picks_the_one_it_wants_and_never_an_id():
    reasons = ("no longer needed", "ordered by mistake")
    for want in reasons:
        u = InstructedUser(cancel_task("You want to cancel the order with the kettle.", want), CARD_TOOLS,
                           vocab=instructed_vocabulary(DB))
        u.opening()
        r = u.respond(AssistantTurn(question="Why would you like to cancel: is it no longer needed, or was it "
                                             "ordered by mistake?", options=reasons))
        assert (r.text, r.rule) == (want[0].upper() + want[1:] + ".", "picks")
    u = InstructedUser(cancel_task("You want to cancel the order with the kettle."), CARD_TOOLS,
                       vocab=instructed_vocabulary(DB))
    u.opening()
    r = u.respond(AssistantTurn(question="Why would you like to cancel?"))  # an open question: nothing made up
    assert (r.text, r.rule) == ("I'd rather not say.", "facts")
    r = u.respond(AssistantTurn(question="Which order do you mean: #W7000001, #W7000002?",
                                options=("#W7000001", "#W7000002")))
    assert r.rule != "picks" and "W7000001" not in r.text  # an order number is not something a person knows
    assert u.respond(AssistantTurn(question="Is it this?", options=("no longer needed",))).rule != "picks"  # one


def test_a_function_word_in_a_sentence_does_not_choose_between_offered_choices():
    # "no" of "no rush" tells "no longer needed" from "ordered by mistake" apart no more than "or" does
    u = InstructedUser(cancel_task("You want to cancel the kettle order. There is no rush."),
                       CARD_TOOLS, vocab=instructed_vocabulary(DB))
    u.opening()
    r = u.respond(AssistantTurn(question="Which of these do you mean: no longer needed, ordered by mistake?",
                                options=("no longer needed", "ordered by mistake")))
    assert (r.text, r.rule) == ("No longer needed.", "picks")
    u = InstructedUser(cancel_task("You want to cancel the kettle order: you ordered it by mistake."), CARD_TOOLS,
                       vocab=instructed_vocabulary(DB))
    u.opening()
    r = u.respond(AssistantTurn(question="Which of these do you mean: no longer needed, ordered by mistake?",
                                options=("no longer needed", "ordered by mistake")))
    assert r.rule == "chooses" and "by mistake" in r.text  # its own words come first


def test_a_conditional_the_card_meets_is_said_with_the_no_and_a_leading_conjunction_still_makes_a_conditional():
    reason = ("You want to cancel the kettle order because you no longer need it. But when the agent asks for "
              "confirmation, you decide to keep it after all.")
    assert conditionals(reason) == [(frozenset({"confirmation"}), "I decide to keep it after all.")]
    u = InstructedUser(cancel_task(reason, "ordered by mistake"), CARD_TOOLS, vocab=instructed_vocabulary(DB))
    u.opening()
    card = AssistantTurn(text="I can cancel order #W7000001. Please reply yes to confirm, or no to keep it as it is.",
                         cards=(("card.cancel_order", {"order_id": "#W7000001", "reason": "no longer needed"}),))
    r = u.respond(card)
    assert (r.text, r.rule) == ("No, that's not what I want. I decide to keep it after all.", "no")
    assert u.said[-1] == r.text and u.cards_refused == 1
    r = u.respond(card)  # once: the next no is a plain no
    assert (r.text, r.rule) == ("No, that's not what I want.", "no") and u.reoffered_after_no == 1
    u = InstructedUser(cancel_task(reason, "no longer needed"), CARD_TOOLS, vocab=instructed_vocabulary(DB))
    u.opening()
    assert u.respond(card).text == "Yes, please go ahead."  # the card it wants: a yes, whatever the instruction


def test_what_to_do_when_told_something_cannot_be_done_is_parsed_from_its_condition():
    from pipelines.core.tau2_user import outcomes

    reason = ("You want the kettle swapped. If a refund to PayPal is not possible, you take store credit instead. "
              "In case there is no larger kettle, keep the current one. If asked for the reason, say it is small. "
              "If the agent cannot do it, ask the agent to call you. If you like it, say thanks.")
    assert outcomes(reason) == [(frozenset({"refund", "paypal"}), "I take store credit instead."),
                                (frozenset({"larger", "kettle"}), "Keep the current one.")]  # no directive, no asked-for
    assert outcomes("If the blue one is out of stock, pick red.") == [(frozenset({"blue", "one"}), "Pick red.")]
    assert outcomes("If it is unavailable, wait.") == []  # no word says what cannot be


def test_told_that_something_cannot_be_done_it_says_what_its_instructions_say_to_do_then_once():
    reason = ("You want to swap the kettle you got last week for a larger one. If paying with PayPal is not "
              "possible, you pay with your visa card.")
    u = user(reason=reason)
    u.opening()
    refusal = AssistantTurn(text="I'm sorry. I can't charge PayPal for this exchange: which method should I use?")
    r = u.respond(refusal)
    assert (r.text, r.rule) == ("I pay with my visa card.", "otherwise")
    assert u.respond(refusal).rule != "otherwise"  # once
    u = user(reason=reason)
    u.opening()
    assert u.respond(AssistantTurn(text="I can't find a kettle order: which order is it?")).rule != "otherwise"
    # no word of its condition
    u = user(reason=reason)
    u.opening()
    assert u.respond(AssistantTurn(text="Which method should I charge, PayPal or visa?")).rule != "otherwise"
    # nothing said to be impossible


def test_a_conditional_answer_says_every_clause_up_to_the_first_that_directs_the_conversation():
    reason = ("You want to swap the kettle. If the agent asks which kettle, it is the white one, and there are in fact "
              "two kettles that you want swapped. If asked for the reason, it is too small, and then ask the agent "
              "to hurry. If asked for the colour, it is white, but you ask for the price first.")
    assert conditionals(reason) == [
        (frozenset({"kettle"}), "It is the white one, and there are in fact two kettles that I want swapped."),
        (frozenset({"reason"}), "It is too small."),  # "then ask the agent …" directs: not said
        (frozenset({"colour"}), "It is white."),  # "you ask for …": what to do, not what to say
    ]
