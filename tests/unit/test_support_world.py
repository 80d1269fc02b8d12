"""World models, the real tau2 db.json, and the seeded generator."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from pipelines.domains.support.generator import FIXTURES, PRODUCT_TEMPLATES, generate_world
from pipelines.domains.support.replay import default_tau2_dir
from pipelines.domains.support.world import ORDER_STATUSES, GiftCard, RetailWorld, load_tau2_world

DB_PATH = default_tau2_dir() / "db.json"


@pytest.fixture(scope="module")
def tau2_db() -> dict:
    if not DB_PATH.is_file():
        pytest.skip(f"tau2-retail db.json not found at {DB_PATH} (set TANDEM_TAU2_DIR)")
    return json.loads(DB_PATH.read_text(encoding="utf-8"))


def test_real_db_loads_and_roundtrips_exactly(tau2_db: dict) -> None:
    world = RetailWorld.from_tau2_json(tau2_db)
    assert len(world.users) == 500 and len(world.orders) == 1000 and len(world.products) == 50
    assert world.to_json() == tau2_db
    assert world.reference_errors() == []
    assert load_tau2_world(DB_PATH).to_json() == tau2_db


def test_real_db_payment_methods_are_typed(tau2_db: dict) -> None:
    world = RetailWorld.from_tau2_json(tau2_db)
    sources = {pm.source for u in world.users.values() for pm in u.payment_methods.values()}
    assert sources == {"credit_card", "paypal", "gift_card"}
    assert all(isinstance(pm.balance, float) for u in world.users.values()
               for pm in u.payment_methods.values() if isinstance(pm, GiftCard))


def test_models_forbid_unknown_fields_and_statuses() -> None:
    world = generate_world(1)
    doc = world.to_json()
    oid = next(iter(doc["orders"]))
    doc["orders"][oid]["surprise"] = 1
    with pytest.raises(ValidationError):
        RetailWorld.from_tau2_json(doc)
    doc["orders"][oid].pop("surprise")
    doc["orders"][oid]["status"] = "lost in space"
    with pytest.raises(ValidationError):
        RetailWorld.from_tau2_json(doc)


def test_generator_is_deterministic_per_seed() -> None:
    a = json.dumps(generate_world(42).to_json(), sort_keys=True)
    b = json.dumps(generate_world(42).to_json(), sort_keys=True)
    c = json.dumps(generate_world(43).to_json(), sort_keys=True)
    assert a == b
    assert a != c


def test_generator_covers_every_status_and_is_consistent() -> None:
    world = generate_world(5, n_users=10, n_orders=len(ORDER_STATUSES), n_products=4)
    assert {o.status for o in world.orders.values()} == set(ORDER_STATUSES)
    assert world.reference_errors() == []
    assert len(world.products) == 4
    for product in world.products.values():
        assert any(not v.available for v in product.variants.values())
        assert sum(v.available for v in product.variants.values()) >= 2
    roundtrip = RetailWorld.from_tau2_json(json.loads(json.dumps(world.to_json())))
    assert roundtrip == world


def test_generator_fixture_users_are_documented() -> None:
    world = generate_world(11)
    for fx in FIXTURES.values():
        user = world.users[fx.user_id]
        assert user.email == fx.email and user.address.zip == fx.zip
        assert (user.name.first_name, user.name.last_name) == (fx.first_name, fx.last_name)
        assert world.orders[fx.pending_order_id].status == "pending"
        assert world.orders[fx.delivered_order_id].status == "delivered"
        assert world.orders[fx.processed_order_id].status == "processed"
        gift = user.payment_methods[fx.gift_card_id]
        assert isinstance(gift, GiftCard) and gift.balance == fx.gift_card_balance


def test_generator_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError):
        generate_world(1, n_products=len(PRODUCT_TEMPLATES) + 1)
    with pytest.raises(ValueError):
        generate_world(1, n_orders=2)
