"""Grounded candidates: normalisation, the decode-time enums, and the backend's re-check."""

from __future__ import annotations

from pipelines.grounding import (
    CandidateSet,
    appears_in,
    constrain_args,
    normalize_value,
    ungrounded,
)

SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "item_ids": {"type": "array", "items": {"type": "string"}},
                   "address2": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["order_id", "item_ids", "address2"],
}
KINDS = {"order_id": "order_id", "item_ids": "item_id", "address2": "address2"}


def _cands(**kinds: list[str]) -> CandidateSet:
    c = CandidateSet()
    for kind, values in kinds.items():
        for v in values:
            c.add(kind, v, "user")
    return c


def test_normalize_value_folds_case_width_space_and_edge_punctuation():
    assert normalize_value("  Ｙusuf\tRossi. ") == "yusuf rossi"
    assert normalize_value('"#W123",') == "#w123"


def test_appears_in_matches_whole_words_only():
    assert appears_in("Okafor", ["Nadia Okafor here, zip 60614"])
    assert not appears_in("Okaf", ["Nadia Okafor here"])
    assert not appears_in("", ["anything"])


def test_a_contractions_tail_is_no_value_but_a_possessive_still_names():
    assert not appears_in("M", ["I'm Yusuf Rossi"]) and not appears_in("S", ["It's order #W1"])
    assert not appears_in("S", ["it’s the blue one"])  # a typographic apostrophe too
    assert not appears_in("ll", ["we'll see"]) and not appears_in("d", ["I'd like"])
    assert appears_in("M", ["size M please"]) and appears_in("S", ["in S, not M"])
    assert appears_in("Rossi", ["Rossi's order"])  # only the word after an apostrophe is refused
    assert appears_in("blue", ["the 'blue' one"]) and appears_in("S", ["size ‘S’ please"])  # quoted: names


def test_candidate_set_keeps_first_source_and_dedupes_normalised():
    c = CandidateSet()
    c.add("first_name", "Yusuf", "user")
    c.add("first_name", "yusuf ", "record")
    assert c.of("first_name") == ["Yusuf"] and c.source_of("first_name", "YUSUF") == "user"
    assert c.contains("first_name", "yusuf") and not c.contains("first_name", "Yusu")


def test_constrain_args_turns_grounded_arguments_into_enums():
    c = _cands(order_id=["#W1"], item_id=["111", "222"], address2=[])
    out = constrain_args(SCHEMA, KINDS, c, optional_empty=["address2"])
    assert out["properties"]["order_id"] == {"enum": ["#W1"]}
    assert out["properties"]["item_ids"] == {"type": "array", "items": {"enum": ["111", "222"]}, "minItems": 1,
                                             "maxItems": 2}
    assert out["properties"]["address2"] == {"enum": [""]}  # only the empty optional line
    assert out["properties"]["limit"] == {"type": "integer"}  # not grounded: kept
    assert out["additionalProperties"] is False and out["required"] == ["order_id", "item_ids", "address2"]


def test_a_required_argument_without_candidates_withdraws_the_tool():
    assert constrain_args(SCHEMA, KINDS, _cands(order_id=["#W1"]), optional_empty=["address2"]) is None
    assert constrain_args(SCHEMA, KINDS, _cands(item_id=["1"]), optional_empty=["address2"]) is None


def test_an_optional_argument_without_candidates_is_dropped():
    schema = {"type": "object", "properties": {"user_id": {"type": "string"}}, "required": []}
    out = constrain_args(schema, {"user_id": "user_id"}, CandidateSet())
    assert out["properties"] == {} and out["required"] == []


def test_ungrounded_names_each_value_that_is_not_a_candidate():
    c = _cands(order_id=["#W1"], item_id=["111"])
    args = {"order_id": "#w1", "item_ids": ["111", "999"], "address2": "", "limit": 5}
    assert ungrounded(args, KINDS, c, optional_empty=["address2"]) == [("item_ids", "999")]
    assert ungrounded({"address2": "Apt 4"}, KINDS, c, optional_empty=["address2"]) == [("address2", "Apt 4")]
    assert ungrounded({}, KINDS, c) == []


def test_a_list_of_objects_is_grounded_field_by_field():
    from pipelines.grounding import nested_path, split_path

    kinds = {nested_path("passengers", "first_name"): "first_name", nested_path("passengers", "dob"): "dob"}
    assert split_path("passengers[].dob") == ("passengers", "dob") and split_path("x") == ("x", None)
    cands = CandidateSet()
    cands.add("first_name", "Mia", "user")
    cands.add("dob", "1990-04-05", "user")
    good = {"passengers": [{"first_name": "mia", "dob": "1990-04-05"}]}
    assert ungrounded(good, kinds, cands) == []
    bad = {"passengers": [{"first_name": "Mia", "dob": "1990-04-05"}, {"first_name": "Eve", "dob": "1990-04-05"}]}
    assert ungrounded(bad, kinds, cands) == [("passengers[].first_name", "Eve")]
    schema = {"type": "object", "required": ["passengers"],
              "properties": {"passengers": {"type": "array", "items": {"$ref": "#/$defs/P"}}},
              "$defs": {"P": {"type": "object", "properties": {"first_name": {"type": "string"},
                                                                "dob": {"type": "string"}}}}}
    out = constrain_args(schema, kinds, cands)
    item = out["properties"]["passengers"]["items"]
    assert item["properties"]["first_name"] == {"enum": ["Mia"]} and item["properties"]["dob"] == {"enum": ["1990-04-05"]}
    assert constrain_args(schema, kinds, CandidateSet()) is None
