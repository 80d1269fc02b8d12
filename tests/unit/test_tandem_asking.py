"""How the tandem turn asks (pipelines.tandem.asking): a question never asked twice unchanged, every card read back
in words, a card done never offered again, and the request's own labels under oracle perception."""

from __future__ import annotations

import pytest

from pipelines.errors import ValidationFailed
from pipelines.events import TurnRequest
from pipelines.tandem.cards import readback_parts, signature
from pipelines.tandem.settings import TandemSettings
from pipelines.turn_input import parse_turn_request
from tests.doubles import j, w1

from .harnesses import TandemHarness

ALEX = "alex_rivera_1001"


def _verified() -> TandemHarness:
    h = TandemHarness()
    h.turn("Hi, my email is alex.rivera@example.com", orch=[w1("greeting", "hello", "Let me find your account.")])
    assert h.meta["state"]["authenticated_user_id"] == ALEX
    return h


def test_a_question_answered_once_is_asked_again_with_the_users_own_choices_then_handed_over():
    h = _verified()
    # no payment method named: the card cannot be filled, so the question needs no model step
    r = h.turn("I want to return the earbuds of order #W1000002", orch=[w1("return", "items")])
    assert [q.question for q in r.of("clarify")] == ["Which of your payment methods should I use?"]
    r = h.turn("not sure, the normal one", orch=[w1("return", "items")])
    q = r.of("clarify")[0]  # asked again: with alex's methods in words (read for it), never the same words
    assert q.options == ["your visa credit card ending in 4107", "your gift card"]
    assert q.question == "Which payment method should I use: your visa credit card ending in 4107, your gift card?"
    r = h.turn("hmm, whichever", orch=[w1("return", "items")])
    assert [e.reason_code for e in r.of("escalation")] == ["no_progress"] and not r.of("clarify")
    assert h.counters.snapshot()["dispatch"]["no_progress"] == 1


def test_the_user_naming_the_method_the_order_was_paid_with_fills_the_card_read_back_in_full():
    h = _verified()
    h.turn("I want to return the earbuds of order #W1000002", orch=[w1("return", "items")])
    r = h.turn("put it back on the card I paid with", orch=[w1("return", "items"), j(
        decision="action", card_id="card.return_items",
        params={"order_id": "#W1000002", "item_ids": ["8818174143"], "payment_method_id": "credit_card_1000001"})])
    assert [c.card_id for c in r.of("action_card")] == ["card.return_items"]
    assert r.reply.startswith("I can return the selected items of order #W1000002: the Wireless Earbuds (blue, "
                              "6 hours); refunded to your visa credit card ending in 4107.")


class _Words:
    def __init__(self, words: dict[str, str]) -> None:
        self.words = words

    def readback(self, tool, args, facts):  # noqa: ANN001, D102
        return self.words


def test_every_argument_is_read_back_the_pack_s_words_first_then_each_left_out_by_its_value():
    args = {"order_id": "#W1", "item_ids": ["a", "b"], "reason": "no longer needed", "note": ""}
    assert readback_parts(_Words({}), "t", args, None, shown="cancel order #W1") == [
        "item ids: a, b", "reason: no longer needed"]  # the shown phrase carries the order; empty values skipped
    assert readback_parts(_Words({"item_ids,reason": "the lamp, as it is not needed"}), "t", args, None,
                          shown="cancel order #W1") == ["the lamp, as it is not needed"]
    assert readback_parts(_Words({"item_ids": "the lamp and the mat"}), "t", args, None, shown="") == [
        "the lamp and the mat", "order id: #W1", "reason: no longer needed"]


def test_a_write_done_is_never_offered_again_in_the_session():
    h = _verified()
    card = j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": "no longer needed"})
    h.turn("Please cancel order #W1000001, I no longer need it", orch=[w1("cancel", "order"), card])
    h.turn("yes")
    assert h.world.orders["#W1000001"].status == "cancelled"
    assert h.meta["done"] == [signature("card.cancel_order", {"order_id": "#W1000001", "reason": "no longer needed"})]
    r = h.turn("cancel order #W1000001 because I no longer need it", orch=[w1("cancel", "order"), card])
    assert not r.of("action_card")
    assert [q.question for q in r.of("clarify")] == ["I've already made that change. What else can I do for you?"]


def test_labels_in_the_request_are_refused_unless_the_app_takes_them():
    body = {"text": "hello", "perception": {"intent": "cancel", "sub_intent": "order"}}
    with pytest.raises(ValidationFailed) as err:
        parse_turn_request(body, max_text_chars=100)
    assert err.value.code == "validation_error"
    assert parse_turn_request(body, max_text_chars=100, accepts_perception=True).perception.intent == "cancel"
    with pytest.raises(ValidationFailed):  # a label is a word of the pack's vocabulary, never free text
        parse_turn_request({"text": "hi", "perception": {"intent": "Cancel it!", "sub_intent": "x"}},
                           max_text_chars=100, accepts_perception=True)


def test_oracle_labels_replace_what_the_model_would_perceive():
    h = TandemHarness(settings=TandemSettings(oracle_perception=True))
    h.turn("Hi, my email is alex.rivera@example.com", orch=[w1("greeting", "hello", "Let me find your account.")])
    n = len(h.models.calls)
    h.user_id = None
    req = TurnRequest(text="the office chair one", perception={"intent": "cancel", "sub_intent": "order"})
    h._run_request(req, orch=[w1("cancel", "order")])
    grammar = next(c.structured_output.spec for role, c in h.models.calls[n:]
                   if role == "orchestrator" and c.structured_output and c.structured_output.kind == "grammar")
    assert '"cancel"' in grammar and '"greeting"' not in grammar and '"return"' not in grammar
    assert h.meta["perception"] == {"source": "oracle", "intent": "cancel", "sub_intent": "order"}
    h2 = TandemHarness()  # the setting off: a request's labels are ignored by the turn (and refused at the edge)
    h2._run_request(TurnRequest(text="hello there", perception={"intent": "cancel", "sub_intent": "order"}),
                    orch=[w1("greeting", "hello")])
    assert "perception" not in h2.meta


def test_a_request_the_words_left_open_is_settled_by_the_order_s_state():
    h = _verified()
    # "no longer need" allows a cancel or a return; the model reads a return, the office chair's order is pending
    cancel = j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001",
                                                                        "reason": "no longer needed"})
    r = h.turn("I no longer need the office chair of order #W1000001", orch=[w1("return", "items"), cancel])
    assert [f["settled"] for k, f in h.sink.events if k == "tandem.settle"] == [["cancel", "order"]]
    assert h.meta["c1"] == {"intent": "cancel", "sub_intent": "order"}
    assert [q.question for q in r.of("clarify")] == [] and [c.card_id for c in r.of("action_card")] == [
        "card.cancel_order"]  # its reason is in the words: the card is filled
    h2 = _verified()  # the words asked for a return only: nothing is settled for them
    h2.turn("please return the office chair of order #W1000001", orch=[w1("return", "items"), j(decision="respond")],
            gen=["Let me check."])
    assert not [f for k, f in h2.sink.events if k == "tandem.settle"]


def test_the_correction_after_a_no_goes_on_with_the_refused_request():
    from pipelines.tandem.decide import carried_request

    h = _verified()
    card = j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": "no longer needed"})
    h.turn("Please cancel order #W1000001, I no longer need it", orch=[w1("cancel", "order"), card])
    assert h.meta["state"]["pending"]["labels"] == ["cancel", "order"]
    h.turn("no")
    assert h.meta["c1"] == {"intent": "cancel", "sub_intent": "order"}
    assert carried_request(h.domain, h.store.records("s1")) == ("cancel", "order")


def test_a_no_that_goes_on_declines_the_card_and_the_correction_never_gets_the_same_card_again():
    from pipelines.tandem.cards import signature as sig

    h = _verified()
    params = {"order_id": "#W1000001", "reason": "no longer needed"}
    card = j(decision="action", card_id="card.cancel_order", params=params)
    h.turn("Please cancel order #W1000001, I no longer need it", orch=[w1("cancel", "order"), card])
    r = h.turn("No, that's not what I want. I meant the other order.", orch=[w1("cancel", "order"), card])
    assert h.meta["declined"] == [sig("card.cancel_order", params)]  # refused though the text goes on
    assert h.meta["c1"] == {"intent": "cancel", "sub_intent": "order"}
    assert not r.of("action_card")  # the model proposed the same card: blocked, the turn asks what should change
    assert [q.question for q in r.of("clarify")] == ["What should I change on the card to cancel order (#W1000001)?"]
    assert h.meta["state"]["pending"] is None
    h = _verified()
    h.turn("Please cancel order #W1000001, I no longer need it", orch=[w1("cancel", "order"), card])
    h.turn("Could you also tell me the status?", orch=[w1("cancel", "order"), card])
    assert h.meta["declined"] == [] and h.meta["state"]["pending"] is None  # dropped, not refused: no no was said


def test_a_question_that_names_the_users_choices_offers_them_as_choices_one_that_does_not_offers_none():
    h = _verified()
    r = h.turn("Please cancel order #W1000001", orch=[w1("cancel", "order")])
    [q] = r.of("clarify")
    assert q.question == "Why would you like to cancel: is it no longer needed, or was it ordered by mistake?"
    assert q.options == ["no longer needed", "ordered by mistake"]  # the words name them: a client shows both
    h = _verified()
    r = h.turn("I want to return the earbuds of order #W1000002", orch=[w1("return", "items")])
    [q] = r.of("clarify")
    assert q.question == "Which of your payment methods should I use?" and q.options == []  # names none of them


def test_what_should_change_names_the_refused_card_where_the_pack_words_it_else_asks_plainly():
    from pipelines.domains import load_domain
    from pipelines.tandem.cards import declined_outcome

    pack = load_domain("support")
    asked: list[str] = []
    one = declined_outcome(pack, asked, "card.exchange_items", {"order_id": "#W1000001", "item_ids": ["1"]})
    other = declined_outcome(pack, asked, "card.modify_user_address", {"user_id": "u1", "address1": "1 Main St"})
    assert one.clarify_question == "What should I change on the card to exchange items (#W1000001)?"
    assert other.clarify_question == "What should I change on the card to change default address?"  # no order
    assert one.clarify_about == "change" and len(asked) == 2 and asked[0] != asked[1]
    assert declined_outcome(pack, None, "card.unknown", {}).clarify_question == "What should I change about it?"
    plain = pack.texts.model_copy(update={"clarify": {k: v for k, v in pack.texts.clarify.items()
                                                      if k != "change_card"}})

    class Plain:  # a pack that words no card-naming question
        cards, entity_kind, texts = pack.cards, pack.entity_kind, plain

    q = declined_outcome(Plain(), None, "card.exchange_items", {"order_id": "#W1000001"}).clarify_question  # type: ignore[arg-type]
    assert q == "What should I change about it?"


def test_an_address_asked_again_is_asked_among_the_addresses_of_the_users_orders_in_words():
    from pipelines.domains.support.world import Address

    h = _verified()
    home = h.world.users[ALEX].address
    other = next(o for o in h.world.users[ALEX].orders)
    h.world.orders[other].address = Address(address1="8 Maple Road", address2="Unit 4", city="Chicago",
                                            country="USA", state="IL", zip="60621")
    for o in h.world.users[ALEX].orders:  # every other order ships home: the one new address is Chicago's
        if o != other:
            h.world.orders[o].address = home.model_copy()
    r = h.turn("I need to change my default address", orch=[w1("account", "address"), j(decision="clarify",
                                                                                          about="address")])
    assert [q.question for q in r.of("clarify")] == [
        "What is the full new address: street, city, state, zip code and country?"]
    r = h.turn("my sister's place, not sure of the street", orch=[w1("account", "address"),
                                                                  j(decision="clarify", about="address")])
    q = r.of("clarify")[0]  # asked again: the user's orders read for it, the one address not the profile's
    assert q.question == "Do you mean 8 Maple Road, Unit 4, Chicago, IL, 60621, USA?"
    assert q.options == ["8 Maple Road, Unit 4, Chicago, IL, 60621, USA"]  # in words, never a placeholder
    read = [f["args"]["order_id"] for k, f in h.sink.events if k == "tandem.tool" and f["tool"] == "get_order_details"]
    assert other in read
