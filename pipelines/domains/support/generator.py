"""A seeded synthetic retail world with the shape of tau2-retail's ``db.json``.

``generate_world(seed)`` is deterministic: the same seed gives byte-identical
JSON. Every order status appears at least once, and two documented fixture
users (see :data:`FIXTURES`) exist in every generated world with fixed ids,
emails, names, zips and orders, so tests and demos can rely on them.
"""

from __future__ import annotations

import itertools
import random

from pydantic import BaseModel, ConfigDict

from .world import (
    ORDER_STATUSES,
    Address,
    CreditCard,
    Fulfillment,
    GiftCard,
    Order,
    OrderItem,
    PaymentRecord,
    PayPal,
    Product,
    RetailWorld,
    User,
    UserName,
    Variant,
)

__all__ = ["FixtureUser", "FIXTURES", "PRODUCT_TEMPLATES", "generate_world"]

PRODUCT_TEMPLATES: dict[str, dict[str, tuple[str, ...]]] = {
    "T-Shirt": {"color": ("blue", "red", "black"), "size": ("S", "M", "L", "XL")},
    "Running Shoes": {"size": ("8", "9", "10", "11"), "color": ("white", "black")},
    "Water Bottle": {"capacity": ("500ml", "750ml", "1000ml"), "material": ("glass", "steel")},
    "Desk Lamp": {"color": ("black", "white"), "brightness": ("low", "medium", "high")},
    "Backpack": {"color": ("green", "grey", "navy"), "size": ("small", "large")},
    "Mechanical Keyboard": {"switch type": ("linear", "tactile", "clicky"), "backlight": ("none", "RGB")},
    "Wireless Earbuds": {"color": ("black", "white", "blue"), "battery life": ("6 hours", "8 hours")},
    "Coffee Maker": {"capacity": ("4 cups", "8 cups", "12 cups"), "type": ("drip", "espresso")},
    "Yoga Mat": {"thickness": ("4mm", "6mm"), "color": ("purple", "teal", "pink")},
    "Office Chair": {"material": ("mesh", "leather", "fabric"), "armrest": ("fixed", "adjustable")},
    "Smart Thermostat": {"compatibility": ("Apple HomeKit", "Google Assistant", "Amazon Alexa"), "color": ("white", "black")},
    "Electric Kettle": {"capacity": ("1L", "1.5L", "2L"), "material": ("glass", "plastic")},
    "Hiking Boots": {"size": ("8", "9", "10"), "waterproof": ("yes", "no")},
    "Bookshelf": {"material": ("wood", "metal"), "height": ("3 ft", "5 ft", "6 ft")},
    "Action Camera": {"resolution": ("1080p", "4K"), "waterproof": ("yes", "no")},
    "Tablet": {"screen size": ("8-inch", "10-inch"), "storage": ("64GB", "128GB")},
}

_FIRST = ("Maya", "Omar", "Lena", "Ravi", "Chen", "Sofia", "Diego", "Amara", "Lucas", "Ingrid", "Kofi", "Hana")
_LAST = ("Okafor", "Lindqvist", "Tanaka", "Moreau", "Patel", "Garcia", "Novak", "Haddad", "Kim", "Silva")
_CITIES = (("Austin", "TX", "787"), ("Denver", "CO", "802"), ("Seattle", "WA", "981"), ("Boston", "MA", "021"),
           ("Chicago", "IL", "606"), ("Phoenix", "AZ", "850"), ("Portland", "OR", "972"))
_STREETS = ("Oak Street", "Maple Avenue", "Cedar Lane", "Elm Street", "Pine Road", "Lakeview Drive")
_BRANDS = ("visa", "mastercard", "amex")
_WEIGHTS = (35, 4, 12, 30, 10, 4, 5)  # roughly the mix of statuses in the tau2 data


class FixtureUser(BaseModel):
    """A documented user present in every generated world."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_id: str
    first_name: str
    last_name: str
    email: str
    zip: str
    credit_card_id: str
    gift_card_id: str
    gift_card_balance: float
    paypal_id: str | None
    pending_order_id: str
    delivered_order_id: str
    processed_order_id: str


FIXTURES: dict[str, FixtureUser] = {
    "alex": FixtureUser(
        user_id="alex_rivera_1001", first_name="Alex", last_name="Rivera", email="alex.rivera@example.com",
        zip="94107", credit_card_id="credit_card_1000001", gift_card_id="gift_card_1000002",
        gift_card_balance=15.0, paypal_id=None, pending_order_id="#W1000001",
        delivered_order_id="#W1000002", processed_order_id="#W1000003",
    ),
    "priya": FixtureUser(
        user_id="priya_shah_2002", first_name="Priya", last_name="Shah", email="priya.shah@example.com",
        zip="10001", credit_card_id="credit_card_2000001", gift_card_id="gift_card_2000002",
        gift_card_balance=900.0, paypal_id="paypal_2000003", pending_order_id="#W2000001",
        delivered_order_id="#W2000002", processed_order_id="#W2000003",
    ),
}


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def _products(rng: random.Random, n: int) -> dict[str, Product]:
    if not 1 <= n <= len(PRODUCT_TEMPLATES):
        raise ValueError(f"n_products must be in 1..{len(PRODUCT_TEMPLATES)}")
    out: dict[str, Product] = {}
    for name in list(PRODUCT_TEMPLATES)[:n]:
        dims = PRODUCT_TEMPLATES[name]
        base = rng.uniform(20, 400)
        variants: dict[str, Variant] = {}
        for k, combo in enumerate(itertools.product(*dims.values())):
            item_id = _digits(rng, 10)
            available = k % 4 != 3  # every product has unavailable variants
            price = round(base * rng.uniform(0.85, 1.15), 2)
            variants[item_id] = Variant(item_id=item_id, options=dict(zip(dims, combo, strict=True)),
                                        available=available, price=price)
        pid = _digits(rng, 10)
        out[pid] = Product(name=name, product_id=pid, variants=variants)
    return out


def _address(rng: random.Random, zip_: str | None = None) -> Address:
    city, state, prefix = rng.choice(_CITIES)
    return Address(address1=f"{rng.randint(10, 999)} {rng.choice(_STREETS)}",
                   address2=f"Suite {rng.randint(100, 999)}", city=city, country="USA", state=state,
                   zip=zip_ or prefix + _digits(rng, 2))


def _order(rng: random.Random, world: RetailWorld, order_id: str, user: User, status: str,
           pm_id: str) -> Order:
    items: list[OrderItem] = []
    for product in rng.sample(sorted(world.products.values(), key=lambda p: p.product_id),
                              k=min(len(world.products), rng.randint(1, 3))):
        variant = product.variants[rng.choice(sorted(product.variants))]
        items.append(OrderItem(name=product.name, product_id=product.product_id, item_id=variant.item_id,
                               price=variant.price, options=dict(variant.options)))
    total = round(sum(i.price for i in items), 2)
    history = [PaymentRecord(transaction_type="payment", amount=total, payment_method_id=pm_id)]
    shipped = status not in ("pending", "pending (item modified)")
    order = Order(order_id=order_id, user_id=user.user_id, address=user.address.model_copy(), items=items,
                  status=status, payment_history=history,
                  fulfillments=[Fulfillment(tracking_id=[_digits(rng, 12)], item_ids=[i.item_id for i in items])]
                  if shipped else [])
    first = items[0].item_id
    if status == "cancelled":
        order.cancel_reason = rng.choice(("no longer needed", "ordered by mistake"))
        history.append(PaymentRecord(transaction_type="refund", amount=total, payment_method_id=pm_id))
    elif status == "return requested":
        order.return_items, order.return_payment_method_id = [first], pm_id
    elif status == "exchange requested":
        others = sorted(set(world.products[items[0].product_id].variants) - {first})
        order.exchange_items, order.exchange_new_items = [first], [rng.choice(others)]
        order.exchange_payment_method_id, order.exchange_price_difference = pm_id, 0.0
    world.orders[order_id] = order
    user.orders.append(order_id)
    return order


def _fixture_user(f: FixtureUser) -> User:
    methods: dict = {f.credit_card_id: CreditCard(id=f.credit_card_id, brand="visa", last_four=f.zip[-4:]),
                     f.gift_card_id: GiftCard(id=f.gift_card_id, balance=f.gift_card_balance)}
    if f.paypal_id:
        methods[f.paypal_id] = PayPal(id=f.paypal_id)
    return User(user_id=f.user_id, name=UserName(first_name=f.first_name, last_name=f.last_name),
                address=Address(address1="1 Market Street", address2="Apt 5", city="Springfield",
                                country="USA", state="CA", zip=f.zip),
                email=f.email, payment_methods=methods, orders=[])


def generate_world(seed: int, n_users: int = 40, n_orders: int = 120, n_products: int = 12) -> RetailWorld:
    """A deterministic synthetic world: ``n_users`` random users plus the fixtures.

    Every status in :data:`ORDER_STATUSES` appears at least once among the
    random orders (``n_orders`` must be at least their number).
    """
    if n_users < 1 or n_orders < len(ORDER_STATUSES):
        raise ValueError(f"need n_users >= 1 and n_orders >= {len(ORDER_STATUSES)}")
    rng = random.Random(seed)
    world = RetailWorld(products=_products(rng, n_products))
    for f in FIXTURES.values():
        user = _fixture_user(f)
        world.users[user.user_id] = user
        _order(rng, world, f.pending_order_id, user, "pending", f.credit_card_id)
        _order(rng, world, f.delivered_order_id, user, "delivered", f.credit_card_id)
        _order(rng, world, f.processed_order_id, user, "processed", f.gift_card_id)
    random_users: list[User] = []
    while len(random_users) < n_users:
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        uid = f"{first.lower()}_{last.lower()}_{_digits(rng, 4)}"
        if uid in world.users:
            continue
        methods: dict = {}
        for source in rng.sample(("credit_card", "paypal", "gift_card"), k=rng.randint(1, 3)):
            pm_id = f"{source}_{_digits(rng, 7)}"
            methods[pm_id] = (CreditCard(id=pm_id, brand=rng.choice(_BRANDS), last_four=_digits(rng, 4))
                              if source == "credit_card" else PayPal(id=pm_id) if source == "paypal"
                              else GiftCard(id=pm_id, balance=round(rng.uniform(0, 300), 2)))
        user = User(user_id=uid, name=UserName(first_name=first, last_name=last), address=_address(rng),
                    email=f"{first.lower()}.{last.lower()}{_digits(rng, 4)}@example.com",
                    payment_methods=methods, orders=[])
        world.users[uid] = user
        random_users.append(user)
    for k in range(n_orders):
        status = ORDER_STATUSES[k] if k < len(ORDER_STATUSES) else rng.choices(ORDER_STATUSES, weights=_WEIGHTS)[0]
        user = rng.choice(random_users)
        order_id = f"#W{_digits(rng, 7)}"
        while order_id in world.orders:
            order_id = f"#W{_digits(rng, 7)}"
        _order(rng, world, order_id, user, status, rng.choice(sorted(user.payment_methods)))
    return world
