"""The scripted tau2 user: its replies to hand-written assistant turns, the intent labels, the card rule."""

from __future__ import annotations

from pipelines.core.evaluation import AssistantTurn
from pipelines.domains.support.tau2_user import ScriptedUser, intent_label

DB = {
    "users": {
        "ana_lee_1": {
            "user_id": "ana_lee_1", "email": "ana.lee@example.com",
            "payment_methods": {
                "credit_card_11": {"source": "credit_card", "id": "credit_card_11", "brand": "visa", "last_four": "4242"},
                "paypal_12": {"source": "paypal", "id": "paypal_12"},
            },
        },
    },
    "orders": {
        "#W100": {"order_id": "#W100", "user_id": "ana_lee_1", "status": "delivered", "items": [
            {"name": "Desk Lamp", "product_id": "P1", "item_id": "I1", "price": 10.0,
             "options": {"color": "black", "power": "battery"}},
        ]},
    },
    "products": {"P1": {"name": "Desk Lamp", "product_id": "P1", "variants": {
        "I1": {"item_id": "I1", "options": {"color": "black", "power": "battery"}},
        "I2": {"item_id": "I2", "options": {"color": "white", "power": "USB"}},
    }}},
}

CARD_TOOLS = {"card.exchange_items": "exchange_delivered_order_items", "card.cancel_order": "cancel_pending_order"}


def task(actions, known="You are Ana Lee, ana.lee@example.com.", reason="You want to exchange your lamp. Be brief."):
    return {"id": "t1", "user_scenario": {"instructions": {"known_info": known, "reason_for_call": reason}},
            "evaluation_criteria": {"actions": actions}}


EXCHANGE = {"action_id": "a1", "name": "exchange_delivered_order_items", "arguments": {
    "order_id": "#W100", "item_ids": ["I1"], "new_item_ids": ["I2"], "payment_method_id": "credit_card_11"}}
LOOKUP = {"action_id": "a0", "name": "find_user_id_by_email", "arguments": {"email": "ana.lee@example.com"}}


def user(actions=(LOOKUP, EXCHANGE), **kw):
    return ScriptedUser(task(list(actions), **kw), CARD_TOOLS, db=DB, max_turns=6)


def test_opening_is_the_first_sentence_in_first_person():
    assert user().opening() == "I want to exchange my lamp."


def test_identity_question_gets_the_lookup_arguments():
    u = user()
    u.opening()
    r = u.respond(AssistantTurn(question="Could you give me your email address?"))
    assert (r.text, r.rule, r.repeated_ask) == ("My email is ana.lee@example.com.", "identity", False)
    r = u.respond(AssistantTurn(question="What is your email?"))
    assert (r.rule, r.repeated_ask, u.repeated_asks) == ("identity", True, 1)


def test_identity_from_known_info_name_and_zip_without_a_lookup():
    u = user(actions=(EXCHANGE,), known="You are Ana Lee in zip code 02134.")
    assert u.identity() == "I'm Ana Lee, zip code 02134."


def test_order_question_gets_the_order_id_and_repeats_count_when_said_before():
    u = user()
    u.opening()
    r = u.respond(AssistantTurn(question="Which order do you mean?"))
    assert (r.text, r.repeated_ask) == ("It's order #W100.", False)
    r = u.respond(AssistantTurn(question="Sorry, which order number?"))
    assert (r.text, r.repeated_ask) == ("It's order #W100.", True)


def test_item_question_names_the_product_and_options_never_the_item_id():
    u = user()
    u.opening()
    r = u.respond(AssistantTurn(question="Which item would you like to exchange, and for which option?"))
    assert r.text == ("I'd like to change the Desk Lamp (color black, power battery) to color white, power USB.")
    assert "I1" not in r.text and "I2" not in r.text


def test_payment_question_by_kind_and_last_digits():
    u = user()
    u.opening()
    r = u.respond(AssistantTurn(question="Which payment method should we use?"))
    assert r.text == "Please use my visa credit card ending in 4242."


def test_card_equal_to_the_expected_write_is_accepted_then_session_ends():
    u = user()
    u.opening()
    params = {"order_id": "#W100", "item_ids": ["I1"], "new_item_ids": ["I2"], "payment_method_id": "credit_card_11"}
    r = u.respond(AssistantTurn(cards=(("card.exchange_items", params),)))
    assert (r.text, r.rule, u.done) == ("Yes, please go ahead.", "yes", {1})
    r = u.respond(AssistantTurn(text="Your exchange has been requested."))
    assert (r.text, r.rule, u.ended) == (None, "done", "done")


def test_card_with_other_arguments_or_tool_is_refused_and_counted():
    u = user()
    u.opening()
    wrong = {"order_id": "#W100", "item_ids": ["I1"], "new_item_ids": ["I2"], "payment_method_id": "paypal_12"}
    r = u.respond(AssistantTurn(cards=(("card.exchange_items", wrong),)))
    assert (r.text, r.rule) == ("No, that's not what I want.", "no")
    r = u.respond(AssistantTurn(cards=(("card.cancel_order", {"order_id": "#W100", "reason": "no longer needed"}),)))
    assert (r.rule, u.cards_refused, u.done) == ("no", 2, set())


def test_escalation_ends_and_statements_restate_then_give_up():
    u = user()
    u.opening()
    assert u.respond(AssistantTurn(text="Let me look into that.")).text == "I'd like to exchange items from order #W100."
    assert u.respond(AssistantTurn(text="Okay.")).rule == "restate"
    r = u.respond(AssistantTurn(text="Okay."))
    assert (r.text, r.rule) == (None, "stuck")
    v = user()
    v.opening()
    assert v.respond(AssistantTurn(text="Transferring you.", escalated=True)).rule == "escalated"


def test_turn_cap_bounds_the_session():
    u = user()
    u.opening()
    for _ in range(5):
        assert u.respond(AssistantTurn(question="Which order?")).text is not None
    r = u.respond(AssistantTurn(question="Which order?"))
    assert (r.text, r.rule, u.turns) == (None, "turn_cap", 6)


def test_sse_events_to_assistant_turn():
    t = AssistantTurn.from_sse([
        {"type": "narration.delta", "text": "Checking. "},
        {"type": "clarify", "question": "Which order?", "options": ["#W100"]},
        {"type": "action_card", "card_id": "card.cancel_order", "params": {"order_id": "#W100"}},
        {"type": "done"},
    ])
    assert t.question == "Which order?" and t.cards == (("card.cancel_order", {"order_id": "#W100"}),)
    assert t.text == "Checking.  Which order? #W100" and not t.escalated
    # a question or hand-over message the turn streamed already is not said twice; options it did not say are added
    # after what it streamed
    t = AssistantTurn.from_sse([
        {"type": "reply.delta", "text": "Which order: #W100 or #W200?"},
        {"type": "clarify", "question": "Which order: #W100 or #W200?", "options": ["#W100", "#W300"]},
        {"type": "reply.delta", "text": " Transferring you."}, {"type": "escalation", "message": "Transferring you."}])
    assert t.text == "Which order: #W100 or #W200? Transferring you. #W300" and t.escalated
    # the question event may come before the stream that says it: said once
    t = AssistantTurn.from_sse([
        {"type": "narration.delta", "text": "Checking."}, {"type": "clarify", "question": "Which order?"},
        {"type": "reply.delta", "text": " Which order?"}, {"type": "escalation", "message": "Hold on."},
        {"type": "reply.delta", "text": " Hold on."}])
    assert t.text == "Checking. Which order? Hold on." and t.question == "Which order?"


def test_intent_label_from_the_first_expected_write():
    assert intent_label([LOOKUP, EXCHANGE]) == "exchange"
    assert intent_label([LOOKUP]) == "status only"
    assert intent_label([{"name": "modify_user_address", "arguments": {}}]) == "modify address"
    assert intent_label([{"name": "cancel_pending_order", "arguments": {}}]) == "cancel"


def test_only_the_sentences_that_ask_are_answered():
    from pipelines.domains.support.tau2_user import asking

    text = ("I'm sorry. I can't exchange items for order #W1: that item is not part of the order. "
            "After a return or exchange request you receive an email with instructions. Which item do you mean?")
    assert asking(text) == "Which item do you mean?"
    assert asking("Please share the email on your account.") == "Please share the email on your account."
    assert asking("Your order is on its way.") == ""


def test_a_card_is_read_back_as_its_records_in_any_order_and_its_pairs_as_pairs():
    from pipelines.domains.support.tau2_user import same_arguments

    want = {"order_id": "#W1", "item_ids": ["a", "b", "c"], "payment_method_id": "p"}
    assert same_arguments({"order_id": "#W1", "item_ids": ["c", "a", "b"], "payment_method_id": "p"}, want)
    assert not same_arguments({"order_id": "#W1", "item_ids": ["a", "b"], "payment_method_id": "p"}, want)
    assert not same_arguments({"order_id": "#W1", "item_ids": ["a", "b", "b"], "payment_method_id": "p"}, want)
    assert not same_arguments({"order_id": "#W2", "item_ids": ["a", "b", "c"], "payment_method_id": "p"}, want)
    pairs = {"item_ids": ["a", "b"], "new_item_ids": ["A", "B"]}
    assert same_arguments({"item_ids": ["b", "a"], "new_item_ids": ["B", "A"]}, pairs)  # the same pairs
    assert not same_arguments({"item_ids": ["b", "a"], "new_item_ids": ["A", "B"]}, pairs)  # a → B: another change
    assert not same_arguments({"item_ids": "a"}, {"item_ids": ["a"]})


def test_asked_about_a_product_its_request_leaves_alone_the_user_says_so_and_it_is_no_repeated_ask():
    import copy

    db = copy.deepcopy(DB)
    db["orders"]["#W100"]["items"].append({"name": "Water Bottle", "product_id": "P2", "item_id": "B1",
                                           "price": 5.0, "options": {"capacity": "500ml"}})
    u = ScriptedUser(task([LOOKUP, EXCHANGE]), CARD_TOOLS, db=db, max_turns=6)
    u.opening()
    r = u.respond(AssistantTurn(question="Which option of the Water Bottle would you like instead?"))
    assert (r.text, r.rule, r.repeated_ask) == ("Not the Water Bottle: only the Desk Lamp.", "not_wanted", False)
    assert u.repeated_asks == 0
    r = u.respond(AssistantTurn(question="Which option of the Desk Lamp would you like instead?"))
    assert r.rule == "facts" and "color white, power USB" in r.text  # the lamp is its request
