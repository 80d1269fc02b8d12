"""Argument and result models of the retail tools.

Tool and argument names match tau2-retail's tool calls exactly, so a tau2
task's expected actions validate against these models verbatim.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .help import HelpHit, QuestionKind
from .world import Address, CancelReason

__all__ = [
    "TransferReason",
    "EmailArgs",
    "NameZipArgs",
    "UserIdArgs",
    "OrderIdArgs",
    "ProductIdArgs",
    "ItemIdArgs",
    "NoArgs",
    "CancelArgs",
    "ItemSwapArgs",
    "OrderAddressArgs",
    "OrderPaymentArgs",
    "ReturnArgs",
    "UserAddressArgs",
    "HelpSearchArgs",
    "TransferArgs",
    "CalculateArgs",
    "UserIdResult",
    "ProductTypesResult",
    "HelpSearchResult",
    "TransferResult",
    "CalculateResult",
]

TransferReason = Literal["user_request", "out_of_scope", "policy_exception", "technical_issue", "other"]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmailArgs(_Args):
    email: str = Field(min_length=1)


class NameZipArgs(_Args):
    first_name: str = Field(min_length=1)
    last_name: str = Field(min_length=1)
    zip: str = Field(min_length=1)


class UserIdArgs(_Args):
    user_id: str


class OrderIdArgs(_Args):
    order_id: str = Field(description="Order id such as '#W0000000' (with the leading '#').")


class ProductIdArgs(_Args):
    product_id: str = Field(description="Product id; not an item id.")


class ItemIdArgs(_Args):
    item_id: str = Field(description="Item (variant) id; not a product id.")


class NoArgs(_Args):
    pass


class CancelArgs(OrderIdArgs):
    reason: CancelReason


class ItemSwapArgs(OrderIdArgs):
    item_ids: list[str]
    new_item_ids: list[str]
    payment_method_id: str


class _AddressFields(_Args):
    address1: str
    address2: str
    city: str
    state: str
    country: str
    zip: str

    def to_address(self) -> Address:
        return Address(
            address1=self.address1, address2=self.address2, city=self.city,
            country=self.country, state=self.state, zip=self.zip,
        )


class OrderAddressArgs(_AddressFields):
    order_id: str


class UserAddressArgs(_AddressFields):
    user_id: str


class OrderPaymentArgs(OrderIdArgs):
    payment_method_id: str


class ReturnArgs(OrderIdArgs):
    item_ids: list[str]
    payment_method_id: str


class HelpSearchArgs(_Args):
    query: str = Field(min_length=1, max_length=500)
    limit: int = Field(3, ge=1, le=10)


class TransferArgs(_Args):
    summary: str = Field(min_length=1)
    reason_code: TransferReason = "out_of_scope"


class CalculateArgs(_Args):
    expression: str = Field(min_length=1, max_length=200)


class UserIdResult(_Args):
    user_id: str


class ProductTypesResult(_Args):
    products: dict[str, str] = Field(description="Product name -> product id, sorted by name.")


class HelpSearchResult(_Args):
    query: str
    question_kind: QuestionKind
    articles: list[HelpHit]


class TransferResult(_Args):
    transferred: bool
    summary: str
    reason_code: TransferReason
    message: str = "Transfer successful"


class CalculateResult(_Args):
    value: float
    text: str


