"""The tandem turn over whole requests: a request goes on after a clarify (the identity detour among them),
a fixed-vocabulary card argument is never picked for the user, and a card needs a change asked in words."""

from __future__ import annotations

from pipelines.domains import load_domain
from pipelines.tandem.decide import allowed_labels
from pipelines.tandem.orchestrate import change_asked
from pipelines.tandem.pipeline import stated_fixed
from tests.doubles import j, w1

from .harnesses import TandemHarness

OID = "#W1000001"
EMAIL = "Hi, my email is alex.rivera@example.com"


def _label_grammar(h: TandemHarness, since: int) -> str:
    return next(c.structured_output.spec for role, c in h.models.calls[since:]
                if role == "orchestrator" and c.structured_output and c.structured_output.kind == "grammar")


def test_a_request_made_before_the_identity_question_goes_on_after_it() -> None:
    h = TandemHarness()
    r = h.turn(f"Cancel order {OID} now.", orch=[w1("cancel", "order", "Let me check that.")])
    assert [e.type for e in r.events if e.type == "clarify"] == ["clarify"]
    assert h.meta["path"] == "clarify" and h.meta["c1"] == {"intent": "cancel", "sub_intent": "order"}
    n = len(h.models.calls)
    h.turn("my email is alex.rivera@example.com", orch=[w1("cancel", "order", "Let me find your account."),
                                                         j(decision="clarify", about="reason")])
    assert h.meta["carried"] == {"intent": "cancel", "sub_intent": "order"}
    grammar = _label_grammar(h, n)
    assert '"cancel"' in grammar and '"account"' not in grammar and '"greeting"' not in grammar
    assert h.meta["state"]["authenticated_user_id"] == "alex_rivera_1001"


def _turn_events(h: TandemHarness, since: int, kind: str) -> list[dict]:
    return [f for k, f in h.sink.events[since:] if k == kind]


def test_after_the_identity_lookup_the_turn_reads_the_order_named_before_it() -> None:
    h = TandemHarness()
    h.turn(f"Cancel order {OID} now.", orch=[w1("cancel", "order", "Let me check that.")])
    n = len(h.sink.events)
    r = h.turn("my email is alex.rivera@example.com", orch=[w1("cancel", "order", "Let me find your account."),
                                                             j(decision="clarify", about="reason")])
    phi = _turn_events(h, n, "tandem.phi")
    assert [(p["tools"], p.get("chained", False), p["then"]) for p in phi] == [
        (["find_user_id_by_email"], False, None), (["get_order_details"], True, "propose")]
    assert [t["tool"] for t in _turn_events(h, n, "tandem.tool")] == ["find_user_id_by_email", "get_order_details"]
    assert [e.question for e in r.events if e.type == "clarify"] == [
        "Why would you like to cancel: is it no longer needed, or was it ordered by mistake?"]
    assert h.counters.snapshot()["dispatch"]["phi_chain"] == 1


def test_after_the_identity_lookup_without_a_named_order_the_turn_finds_the_one_a_cancel_can_change() -> None:
    h = TandemHarness()
    h.turn("I want to cancel an order.", orch=[w1("cancel", "order", "Let me check that.")])
    n = len(h.sink.events)
    r = h.turn("my email is alex.rivera@example.com", orch=[w1("cancel", "order", "Let me find your account.")])
    assert [(p["tools"], p["then"]) for p in _turn_events(h, n, "tandem.phi")] == [
        (["find_user_id_by_email"], None), (["get_user_details"], "choose")]
    # each of alex's three orders read; only #W1000001 is pending: it is the order in question
    reads = sorted(t["args"]["order_id"] for t in _turn_events(h, n, "tandem.tool") if t["tool"] == "get_order_details")
    assert reads == ["#W1000001", "#W1000002", "#W1000003"]
    assert h.meta["state"]["selected"]["id"] == OID
    assert [e.question for e in r.events if e.type == "clarify"] == [
        "Why would you like to cancel: is it no longer needed, or was it ordered by mistake?"]


def test_two_orders_that_fit_are_asked_by_what_they_hold() -> None:
    h = TandemHarness()
    h.turn("Hi, my email is omar.silva2812@example.com", orch=[w1("greeting", "hello")])
    r = h.turn("I want to return my order.", orch=[w1("return", "items")])
    q = r.of("clarify")[0]
    # two delivered orders (a return can change neither the exchanged nor the cancelled one)
    assert q.options == ["#W0289396 (Yoga Mat, Water Bottle, Backpack; delivered)",
                         "#W8169504 (Wireless Earbuds, T-Shirt; delivered)"]
    assert q.question == "Which order do you mean: " + ", ".join(q.options) + "?"


def test_an_order_described_by_an_item_it_holds_is_found() -> None:
    h = TandemHarness()
    h.turn("Hi, my email is omar.silva2812@example.com", orch=[w1("greeting", "hello")])
    r = h.turn("I want to return the backpack.", orch=[w1("return", "items")])
    assert h.meta["state"]["selected"]["id"] == "#W0289396"
    assert not [q for q in r.of("clarify") if q.question.startswith("Which order")]


def test_a_row_that_ends_the_decision_is_not_chained() -> None:
    h = TandemHarness()
    h.turn("my email is alex.rivera@example.com", orch=[w1("greeting", "hello", "Let me find your account.")])
    n = len(h.sink.events)
    h.turn(f"Please cancel order {OID}", orch=[w1("cancel", "order", "Let me check that order.")])
    phi = _turn_events(h, n, "tandem.phi")
    assert [(p["tools"], p["then"]) for p in phi] == [(["get_order_details"], "propose")]  # verified: one row


def test_the_carried_request_skips_turns_that_fell_back() -> None:
    from types import SimpleNamespace

    from pipelines.tandem.decide import carried_request

    d = load_domain("support")

    def turn(path, intent="exchange", sub="items"):
        return SimpleNamespace(meta={"tandem": {"path": path, "c1": {"intent": intent, "sub_intent": sub}}})

    assert carried_request(d, [turn("clarify"), turn("fallback", "modify", "address")]) == ("exchange", "items")
    assert carried_request(d, [turn("clarify"), turn("answer", "order_status", "status")]) is None
    assert carried_request(d, [turn("clarify", "greeting", "hello")]) is None
    assert carried_request(d, []) is None


def test_an_answer_whose_cues_include_the_request_continues_it() -> None:
    d = load_domain("support")
    answer = "I'd like to change the shirt to a bigger size"
    assert set(d.intent_prior(answer)) == {"exchange", "modify"}  # the order's state tells them apart
    assert allowed_labels(d, answer, ("exchange", "items")) == {"exchange": ["items"]}
    assert allowed_labels(d, "change my shipping address", ("exchange", "items")) == {
        "modify": ["address"]}  # another request: the exchange is left behind


def test_a_short_closing_is_a_greeting_and_carries_no_request() -> None:
    d = load_domain("support")
    for text, sub in (("ok thanks", "thanks"), ("great, thank you!", "thanks"), ("that's all, bye", "bye")):
        assert allowed_labels(d, text, ("cancel", "order")) == {"greeting": [sub]}, text
    assert allowed_labels(d, "thanks, but I still want to cancel it", ("cancel", "order")) == {"cancel": ["order"]}
    assert allowed_labels(d, "ok", ("cancel", "order")) == {"cancel": ["order"]}  # no closing word: goes on


def test_a_greeting_that_answers_the_identity_question_carries_the_request() -> None:
    d = load_domain("support")
    for text in ("Hi, my email is [EMAIL_1]", "Hello! yusuf rossi, 19122", "hey, it's alex@example.com"):
        assert allowed_labels(d, text, ("cancel", "order")) == {"cancel": ["order"]}, text
    assert allowed_labels(d, "Hi there!", ("cancel", "order")) == {"greeting": ["hello"]}  # no fact: a greeting


def test_a_text_with_its_own_cue_is_not_carried() -> None:
    d = load_domain("support")
    assert allowed_labels(d, "my email is [EMAIL_1]", ("cancel", "order")) == {"cancel": ["order"]}
    labels = allowed_labels(d, "Actually I want to return it instead", ("cancel", "order"))
    assert list(labels) == ["return"]


def test_a_cancellation_reason_the_user_never_gave_is_asked_for() -> None:
    h = TandemHarness()
    h.turn(EMAIL, orch=[w1("greeting", "hello", "Let me find your account.")])
    r = h.turn(f"Please cancel order {OID}", orch=[w1("cancel", "order", "Let me check that order.")])
    # the card cannot be filled from what the user said: the offer has no card, the turn asks for the reason
    steps = [f for k, f in h.sink.events if k == "tandem.step"]
    assert steps[-1]["decision"] == {"decision": "clarify", "about": "reason"}
    assert [e.question for e in r.events if e.type == "clarify"] == [
        "Why would you like to cancel: is it no longer needed, or was it ordered by mistake?"]
    assert not r.of("action_card")
    r = h.turn("I don't need it anymore.", orch=[w1("cancel", "order", "Okay."),
                                                 j(decision="action", card_id="card.cancel_order",
                                                   params={"order_id": OID, "reason": "no longer needed"})])
    assert [(c.card_id, c.params) for c in r.of("action_card")] == [
        ("card.cancel_order", {"order_id": OID, "reason": "no longer needed"})]


def test_a_card_needs_a_change_asked_in_words() -> None:
    h = TandemHarness()
    # the model reads a change into an identity answer: no change was asked, so no card
    r = h.turn(EMAIL + f" and order {OID} was ordered by mistake",
               orch=[w1("cancel", "order", "Let me look."),
                     j(decision="action", card_id="card.cancel_order",
                       params={"order_id": OID, "reason": "ordered by mistake"})])
    assert not r.of("action_card") and h.meta["path"] != "action_card"
    assert h.world.orders[OID].status == "pending"
    d = load_domain("support")
    assert change_asked(d, ["Please cancel order #W1"]) is True
    assert change_asked(d, ["my email is [EMAIL_1]", "Where is my order?"]) is False


def test_stated_fixed_keeps_only_values_said_as_whole_words() -> None:
    fixed = {"cancel_reason": ["no longer needed", "ordered by mistake"]}
    assert stated_fixed(fixed, ["It is no longer needed."]) == {"cancel_reason": ["no longer needed"]}
    assert stated_fixed(fixed, ["cancel it"]) == {}


def test_change_asked_reads_the_packs_change_intents_and_trusts_a_pack_without_change_cues() -> None:
    d = load_domain("support")
    assert d.change_intents() == {"cancel", "modify", "return", "exchange", "account"}  # the write cards' intents
    assert change_asked(d, ["Please return order #W1"]) is True
    assert change_asked(d, ["What is your return policy?", "hello"]) is change_asked(d, ["hello"]) is False

    class NoCues:  # a pack whose intent prior reads no change requests
        change_cues = False
    assert change_asked(NoCues(), ["my email is [EMAIL_1]"]) is True


def test_a_clarify_may_ask_only_for_what_a_card_lacks() -> None:
    from pipelines.core.decisions import build_offer, decision_schema
    from pipelines.domain import TurnFacts

    d = load_domain("support")
    facts = TurnFacts(session_id="s", user_text=f"cancel {OID}", user_texts=[f"cancel {OID}"],
                      user_id="alex_rivera_1001", state={"authenticated_user_id": "alex_rivera_1001"})
    facts.candidates.add_all({"order_id": [OID], "user_id": ["alex_rivera_1001"]}, "user")
    offer = build_offer(d, facts, intent="cancel", sub_intent="order")
    assert offer.cards == {} and offer.clarify == ["reason"]  # not "details": the reason is what is missing
    about = [b["properties"]["about"]["enum"] for b in decision_schema(offer)["anyOf"] if "about" in b["properties"]]
    assert about == [["reason"]]
    facts.candidates.add_all({"cancel_reason": ["no longer needed"]}, "user")
    offer = build_offer(d, facts, intent="cancel", sub_intent="order")
    assert list(offer.cards) == ["card.cancel_order"] and offer.clarify == ["details"]  # nothing lacking


def test_select_asks_which_one_only_among_several() -> None:
    from pipelines.core.decisions import DecisionError, Offer, decision_schema, parse_decision

    def select_branch(offer: Offer) -> list:
        return [b["properties"]["entity_id"] for b in decision_schema(offer)["anyOf"]
                if b["properties"]["decision"] == {"const": "select"}]

    assert select_branch(Offer()) == []  # nothing on record: no select at all (a product question)
    assert select_branch(Offer(select_ids=[OID])) == [{"enum": [OID]}]  # one: it can be named, not asked
    assert select_branch(Offer(select_ids=[OID, "#W1000002"])) == [
        {"anyOf": [{"enum": [OID, "#W1000002"]}, {"type": "null"}]}]
    import pytest

    with pytest.raises(DecisionError, match="nothing to choose among"):
        parse_decision('{"decision": "select", "entity_id": null}', Offer(select_ids=[OID]))
    assert parse_decision('{"decision": "select", "entity_id": null}', Offer(select_ids=[OID, "#W2"])) == {
        "decision": "select", "entity_id": None}


def test_what_a_change_is_about_narrows_its_sub_intent_when_the_words_say_it() -> None:
    d = load_domain("support")
    assert allowed_labels(d, f"I'd like to change items in order {OID}") == {"exchange": ["items"],
                                                                          "modify": ["items"]}
    assert allowed_labels(d, "I want to change the shipping address of my order") == {"modify": ["address"]}
    assert allowed_labels(d, f"change the payment method of order {OID}")["modify"] == ["payment"]
    assert allowed_labels(d, "I need to update my order") == {"modify": ["items", "address", "payment"]}
    assert allowed_labels(d, "update my default address")["account"] == ["address"]


def test_a_cards_lists_name_each_record_once() -> None:
    from pipelines.tandem.orchestrate import once_each

    assert once_each({"order_id": OID, "item_ids": ["a", "a"], "new_item_ids": ["x", "x"]}) == {
        "order_id": OID, "item_ids": ["a"], "new_item_ids": ["x"]}
    assert once_each({"item_ids": ["a", "b", "a", "a"]}) == {"item_ids": ["a", "b"]}
    # pairs: a repeated item with two different replacements is two changes (two identical items)
    assert once_each({"item_ids": ["a", "a"], "new_item_ids": ["x", "y"]}) == {"item_ids": ["a", "a"],
                                                                             "new_item_ids": ["x", "y"]}
    assert once_each({"item_ids": ["a", "a", "b"], "new_item_ids": ["x"]}) == {"item_ids": ["a", "b"],
                                                                             "new_item_ids": ["x"]}
    assert once_each({"order_id": OID, "reason": "no longer needed"}) == {"order_id": OID,
                                                                          "reason": "no longer needed"}


def test_a_card_proposed_with_a_repeated_item_shows_it_once() -> None:
    h = TandemHarness()
    h.turn(EMAIL, orch=[w1("greeting", "hello", "Let me find your account.")])
    order = h.world.orders["#W1000002"]
    item = order.items[0].item_id
    r = h.turn("I want to return the wireless earbuds from order #W1000002, refund to my gift card please.",
               orch=[w1("return", "items", "Let me check that order."),
                     j(decision="action", card_id="card.return_items",
                       params={"order_id": "#W1000002", "item_ids": [item, item, item],
                               "payment_method_id": "gift_card_1000002"})])
    assert [(c.card_id, c.params["item_ids"]) for c in r.of("action_card")] == [("card.return_items", [item])]


def test_the_pack_arranges_a_cards_arguments_before_the_checks() -> None:
    h = TandemHarness()
    seen = []
    h.domain.arrange = lambda tool, args, facts: seen.append((tool, dict(args))) or {**args, "item_ids": []}
    h.turn(EMAIL, orch=[w1("greeting", "hello", "Let me find your account.")])
    item = h.world.orders["#W1000002"].items[0].item_id
    r = h.turn("I want to return the wireless earbuds from order #W1000002, refund to my gift card please.",
               orch=[w1("return", "items", "Let me check that order."),
                     j(decision="action", card_id="card.return_items",
                       params={"order_id": "#W1000002", "item_ids": [item, item],
                               "payment_method_id": "gift_card_1000002"})])
    assert seen == [("return_delivered_order_items", {"order_id": "#W1000002", "item_ids": [item],
                                                      "payment_method_id": "gift_card_1000002"})]
    assert not r.of("action_card")  # what the pack arranged is what is checked (an empty list is refused)


def test_a_choice_the_users_words_leave_open_is_asked_with_its_options_not_shown_as_a_card() -> None:
    h = TandemHarness()
    seen = []
    h.domain.undecided = lambda tool, args, facts: seen.append(tool) or ("new_item_choose", ["blue / M", "blue / L"])
    h.turn(EMAIL, orch=[w1("greeting", "hello", "Let me find your account.")])
    item = h.world.orders["#W1000002"].items[0].item_id
    r = h.turn("I want to return the wireless earbuds from order #W1000002, refund to my gift card please.",
               orch=[w1("return", "items", "Let me check that order."),
                     j(decision="action", card_id="card.return_items",
                       params={"order_id": "#W1000002", "item_ids": [item],
                               "payment_method_id": "gift_card_1000002"})])
    assert seen == ["return_delivered_order_items"]
    assert not r.of("action_card")
    [c] = r.of("clarify")
    assert c.question == "Which one would you like instead: blue / M, blue / L?"
    assert c.options == ["blue / M", "blue / L"]
    guards = [f for k, f in h.sink.events if k == "tandem.guard" and f.get("violation") == "undecided_parameter"]
    assert guards and guards[-1]["decision"] == "clarify"


def test_a_question_phi_interrupted_goes_on_only_after_a_clarify_the_pack_lists() -> None:
    from types import SimpleNamespace

    from pipelines.tandem.decide import carried_request
    from pipelines.tandem.state import META_KEY

    class Pack:
        labels = {"ask": ("forecast",), "alert": ("set",)}
        carried_clarifies = frozenset({"identity"})

        def change_intents(self):
            return {"alert"}

    def turn(then, tools=()):
        return SimpleNamespace(meta={META_KEY: {"path": "clarify", "c1": {"intent": "ask", "sub_intent": "forecast"},
                                                "phi": {"then": then, "tools": list(tools)}}})

    assert carried_request(Pack(), [turn("clarify:identity")]) == ("ask", "forecast")
    assert carried_request(Pack(), [turn("clarify:city")]) is None  # not listed: a question carries nothing
    assert carried_request(Pack(), [turn("clarify:identity", ["lookup"])]) is None  # Φ read something: no interrupt
    assert carried_request(Pack(), [turn(None)]) is None  # the model's own clarify
    Pack.carried_clarifies = frozenset()
    assert carried_request(Pack(), [turn("clarify:identity")]) is None


def test_an_answer_that_echoes_the_words_of_the_question_goes_on_with_the_request() -> None:
    d = load_domain("support")
    question = "Which of your payment methods should I use?"
    answer = "the payment method I paid with, please"
    assert allowed_labels(d, answer, ("exchange", "items"), question) == {"exchange": ["items"]}
    # without the question, "payment method" cues a question about the account: the request would be left
    assert "exchange" not in allowed_labels(d, answer, ("exchange", "items"))
    # a cue of another change that the question did not ask still leaves the request behind
    assert "cancel" in allowed_labels(d, "actually, just cancel it all", ("exchange", "items"), question)


def test_the_turn_records_the_question_it_asked_and_the_next_turn_reads_it() -> None:
    h = TandemHarness()
    h.turn(f"Cancel order {OID} now.", orch=[w1("cancel", "order", "Let me check that.")])
    from pipelines.tandem.decide import last_question

    assert h.meta["question"].startswith("To get started, could you share the email address")
    assert last_question(h.store.records("s1")) == h.meta["question"]


def test_a_product_two_orders_hold_is_told_apart_by_the_options_its_items_do_not_share() -> None:
    from pipelines.domains.support.pack import _told_apart

    kinds = {"Laptop": {"#W1": [{"screen": "15-inch", "ram": "16GB", "storage": "512GB SSD"}],
                        "#W2": [{"screen": "15-inch", "ram": "32GB", "storage": "256GB SSD"}]},
             "Mug": {"#W1": [{"color": "red"}]},
             "Lamp": {"#W1": [{"color": "white"}], "#W2": [{"color": "white"}]},
             "Kettle": {"#W1": [{"size": "1L"}, {"size": "2L"}], "#W2": [{"size": "2L"}]}}
    assert _told_apart("Laptop", "#W1", kinds) == "Laptop (16GB, 512GB SSD)"  # the shared 15-inch tells nothing
    assert _told_apart("Laptop", "#W2", kinds) == "Laptop (32GB, 256GB SSD)"
    assert _told_apart("Mug", "#W1", kinds) == "Mug"  # one order holds it: the name is enough
    assert _told_apart("Lamp", "#W2", kinds) == "Lamp"  # nothing differs: nothing to add
    assert _told_apart("Kettle", "#W1", kinds) == "Kettle (1L)"  # its 2L one is like the other order's
    assert _told_apart("Kettle", "#W2", kinds) == "Kettle"
    assert _told_apart("Laptop", "#W3", kinds) == "Laptop"  # an order not among them


def test_a_field_of_a_list_of_objects_is_offered_as_an_enum_of_its_kind() -> None:
    """The decision schema grounds ``flights[].flight_number`` as a plain argument is grounded: an enum of its
    kind's candidates; none → the card is not offered, and its kind is what the clarify asks."""
    from pipelines.core.decisions import build_offer
    from pipelines.domain import TurnFacts

    pack = load_domain("airline")
    facts = TurnFacts(session_id="s", user_text="move it", user_texts=["move it"], user_id=None,
                      state={"user_id": "olivia_moore_2080"})
    facts.candidates.add_all({"reservation_id": ["SF5VA1"], "flight_cabin": ["economy"], "date": ["2024-05-29"],
                              "change_payment": ["gift_card_7002574"]}, "record")
    offer = build_offer(pack, facts, intent="change", sub_intent="flights")
    assert offer.cards == {} and offer.clarify == ["new_flight"]
    facts.candidates.add_all({"new_flight": ["HAT158", "HAT080"]}, "record")
    offer = build_offer(pack, facts, intent="change", sub_intent="flights")
    item = offer.cards["card.change_flights"][1]["properties"]["flights"]["items"]
    assert item["properties"]["flight_number"] == {"enum": ["HAT158", "HAT080"]}
    assert item["properties"]["date"] == {"enum": ["2024-05-29"]}
