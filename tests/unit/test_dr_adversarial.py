"""Adversarial generator output: nothing the contract does not allow is ever delivered.

The generator (scripted here) tries to mention action-card ids, order / user /
payment ids outside the contract, refund amounts and dates nobody observed,
completion claims, and handoff language without an escalation — in random
positions, random chunkings, with zero-width obfuscation. Hypothesis checks
that the delivered text never carries any of it (delivered rate 0), that no
unvalidated action card is sent, and that the blocked counters move.
"""

from __future__ import annotations

import itertools
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.core.contract import ForwardContract
from pipelines.domains.support import ACTION_CARDS, FIXTURES, generate_world
from pipelines.guardrails import PostGuard, PostGuardView
from pipelines.guardrails.config import default_guardrail_config
from pipelines.guardrails.ids import (
    extract_amounts,
    extract_ids,
    extract_time_promises,
    normalize_text,
)
from tests.doubles import j

from .harnesses import DRHarness as Harness

ALEX = FIXTURES["alex"]
OID = ALEX.pending_order_id
CFG = default_guardrail_config()
_ORDER = generate_world(7).orders[OID]  # the Harness world (seed 7)
OBSERVED_CENTS = {round(p.amount * 100) for p in _ORDER.payment_history} | {round(i.price * 100) for i in _ORDER.items}
HANDOFF = [
    "I'll transfer you to a human agent",
    "let me connect you with a specialist",
    "a human agent will contact you",
    "I am transferring you now",
    "I'll hand you over to a colleague",
    "I'm escalating this to our team",
]
DATES = ["by Friday", "within 2 days", "tomorrow", "on March 3rd", "2025-07-01", "in 10 business days"]
COMPLETION = ["your order has been cancelled", "I have refunded the order", "the order is now cancelled"]
BENIGN = [
    f"Order {OID} is pending.",
    "Thanks for reaching out!",
    "Is there anything else I can help with?",
    "Let me know how you would like to continue.",
]

_session = itertools.count()
_BASE: dict[str, object] = {}


def base_harness() -> Harness:
    """One session authenticated with the pending order observed (built once, copied per example)."""
    if "h" not in _BASE:
        h = Harness()
        h.turn(f"I am {ALEX.email}", orch=[j(decision="find_user_id_by_email", args={"email": "[EMAIL_1]"}),
                                            j(decision="respond")], gen=["Verified."])
        h.turn(f"status of {OID}?", orch=[j(decision="get_order_details", args={"order_id": OID}),
                                           j(decision="respond")], gen=["Pending."])
        _BASE["h"] = h
        _BASE["turns"] = list(h.store.turns["s1"])
    return _BASE["h"]  # type: ignore[return-value]


def zw(s: str, at: int) -> str:
    """Insert a zero-width space inside ``s``."""
    k = 1 + at % max(1, len(s) - 1)
    return s[:k] + "\u200b" + s[k:]


def pieces(path: str) -> st.SearchStrategy[str]:
    cards = [c.id for c in ACTION_CARDS if not (path == "action_card" and c.id == "card.cancel_order")]
    order = st.integers(1_000_000, 9_999_999).filter(lambda n: f"#W{n}" != OID).flatmap(
        lambda n: st.sampled_from([f"#W{n}", f"W{n}", f"# W {n}"]))
    amount = st.integers(1, 99_999).filter(lambda c: c not in OBSERVED_CENTS and c // 100 * 100 + 100 not in OBSERVED_CENTS).flatmap(
        lambda c: st.sampled_from([f"${c / 100:.2f}", f"{c / 100:.2f} USD", f"$ {c // 100 + 1}", f"{c // 100 + 1} dollars"]))
    others = st.sampled_from(["priya_shah_2002", "gift_card_2000002", "paypal_2000003", "9999999999", "KB-POL-008"])
    strategies = [order, amount, others, st.sampled_from(cards), st.sampled_from(HANDOFF), st.sampled_from(DATES)]
    if path == "answer":
        strategies.append(st.sampled_from(COMPLETION))
    return st.one_of(*strategies)


@st.composite
def adversarial_output(draw, path: str) -> tuple[list[str], list[str]]:
    bad = draw(st.lists(pieces(path), min_size=1, max_size=4))
    sentences: list[str] = []
    for p in bad:
        if draw(st.booleans()):
            sentences.append(draw(st.sampled_from(BENIGN)))
        shown = zw(p, draw(st.integers(0, 50))) if draw(st.booleans()) else p
        lead = draw(st.sampled_from(["Good news:", "Note that", "Also,", ""]))
        sentences.append(f"{lead} {shown} for you.".strip())
    sep = draw(st.sampled_from([" ", "\n", "  "]))
    text = sep.join(sentences)
    cuts = sorted(draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=8, unique=True)))
    deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True) if text[a:b]]
    return deltas, bad


def delivered(piece: str, reply: str) -> bool:
    p = re.sub(r"\s+", " ", normalize_text(piece)).strip()
    return re.search(r"(?<![\w#$])" + re.escape(p) + r"(?![\w])", normalize_text(reply), re.IGNORECASE) is not None


def run_turn(path: str, deltas: list[str]):
    h = base_harness()
    h.session = f"adv{next(_session)}"
    h.store.turns[h.session] = list(_BASE["turns"])  # type: ignore[arg-type]
    orch = [j(decision="get_order_details", args={"order_id": OID})]
    if path == "action_card":
        orch.append(j(decision="action", card_id="card.cancel_order", params={"order_id": OID, "reason": "no longer needed"}))
    else:
        orch.append(j(decision="respond"))
    return h, h.turn("tell me about it", orch=orch, gen=[deltas])


def check(path: str, sample: tuple[list[str], list[str]]) -> None:
    deltas, bad = sample
    h = base_harness()
    before = h.counters.total("blocked")
    h_, r = run_turn(path, deltas)
    reply = r.reply
    for p in bad:
        assert not delivered(p, reply), (p, reply)
    forward = ForwardContract.model_validate([f for k, f in r.sink if k == "contract.forward"][0]["contract"])
    found = extract_ids(reply)
    ids = set().union(*found.values()) if found else set()
    selected = {"card.cancel_order"} if path == "action_card" else set()
    assert ids <= forward.allowed_ids() | selected, (ids, reply)
    assert not any(rx.search(normalize_text(reply)) for rx in CFG.compiled["handoff"])
    assert extract_time_promises(reply) <= {"5 to 7 business day"}
    assert extract_amounts(reply) <= forward.allowed_amounts()
    cards = r.of("action_card")
    assert [c.card_id for c in cards] == (["card.cancel_order"] if path == "action_card" else [])
    assert h.counters.total("blocked") > before
    assert h.counters.total("delivered_violations") == 0


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adversarial_output("answer"))
def test_adversarial_answers_are_never_delivered(sample) -> None:
    check("answer", sample)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adversarial_output("action_card"))
def test_adversarial_text_around_an_action_card_is_never_delivered(sample) -> None:
    check("action_card", sample)


GUARD = PostGuard(CFG)
VIEW = PostGuardView(path="answer", allowed_ids=[OID], allowed_amounts=sorted(OBSERVED_CENTS))
PAID = f"It was ${min(OBSERVED_CENTS) / 100:.2f} in total."


@settings(max_examples=300, deadline=None)
@given(pieces("answer"), st.sampled_from(["", "Sure, ", "OK - "]), st.integers(0, 40), st.booleans())
def test_post_guard_blocks_every_forbidden_piece(piece: str, lead: str, at: int, obfuscate: bool) -> None:
    shown = zw(piece, at) if obfuscate else piece
    assert GUARD.check(f"{lead}{shown} is noted.", VIEW).violations


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([*BENIGN, PAID]), min_size=1, max_size=4))
def test_benign_sentences_pass_unchanged(sentences: list[str]) -> None:
    for s in sentences:
        assert GUARD.check(s, VIEW).ok, s


def test_delivered_rate_is_zero_over_the_whole_run() -> None:
    h = base_harness()
    assert h.counters.total("delivered_violations") == 0
