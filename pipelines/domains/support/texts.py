"""The support pack's texts (locale ``en``): prompts, safe wordings, clarify questions, path templates.

Templates are data, filled only from the forward contract. They are what the
user reads when a path needs no wording (a clarify question, a handoff, a card's
read-back, a greeting) and what is delivered when the generator's reply fails
the sentence gate.
"""

from __future__ import annotations

from pipelines.domain import DomainTexts

__all__ = ["SUPPORT_TEXTS", "IDENTITY_QUESTION", "ORCHESTRATOR_POLICY", "GENERATOR_PERSONA", "GUIDANCE", "REFUSALS"]

ORCHESTRATOR_POLICY = (
    "You are the orchestrator of a retail customer-support assistant.\n"
    "Policy: verify the user first (the email on the account, or first name, last name and zip). "
    "Help one verified user only. Read before you act. Changes to orders happen only through an "
    "action card, and only after the user's explicit yes. Never invent ids or values: every "
    "argument must be something the user said or something observed in their own records."
)

GENERATOR_PERSONA = (
    "You are a friendly retail customer-support assistant. Write the reply from the facts below only: "
    "never invent ids, amounts, dates or promises, and never mention actions that are not listed."
)

GUIDANCE: dict[str, str] = {
    "tip:order_status_history": "You can ask me for an order's status and payment history at any time.",
    "tip:one_change_per_order": "Item options on an order can be changed only once, so list every change together.",
    "tip:refund_timing": "Gift card refunds are immediate; card and PayPal refunds take five to seven business days.",
    "tip:return_instructions": "After a return or exchange request you receive an email with instructions.",
    "tip:confirm_before_change": "I always read a change back and wait for your yes before making it.",
    "tip:default_address_orders": "Changing your default address does not change orders already placed.",
    "tip:verify_identity": "For your security I verify your identity before discussing an account.",
    "tip:ask_for_steps": "Ask me how to do something and I will list the steps.",
}

REFUSALS: dict[str, str] = {
    "order_not_pending": "only a pending order can be changed or cancelled, and this one is {status}",
    "order_not_delivered": "only a delivered order can be returned or exchanged, and this one is {status}",
    "order_not_owned": "that order is not on your account",
    "order_not_found": "I couldn't find that order",
    "item_not_in_order": "that item is not part of the order",
    "same_item": "the new option is the same as the current one",
    "variant_unavailable": "that option is not available right now",
    "variant_not_in_product": "an item can only be swapped for an option of the same product",
    "same_payment_method": "the order is already paid with that method: which other one should I use?",
    "payment_method_not_found": "that payment method is not on your account: which of yours should I use?",
    "insufficient_gift_card_balance": "the gift card balance does not cover the amount: which other payment method "
                                      "should I use?",
    "same_address": "that is already the address on record",
    "payment_history_not_single": "the payment of this order cannot be moved",
    "refund_method_not_allowed": "the refund can only go to the original payment method or a gift card: which "
                                 "should it go to?",
    "not_authenticated": "I need to verify your identity first",
    "other_user": "another account is already verified in this conversation",
    "not_confirmed": "I need your explicit yes before I make a change",
    "user_not_found": "I couldn't find an account with those details",
    "empty_item_list": "no item was named for the change",
    "item_count_mismatch": "each item needs exactly one replacement option",
    "product_not_found": "I couldn't find that product",
    "item_not_found": "I couldn't find that item",
    "invalid_expression": "that calculation is not something I can work out",
    "ungrounded_argument": "the details have to be ones you gave me or ones on your account",
}

IDENTITY_QUESTION = ("To get started, could you share the email address on your account, or your first "
                     "and last name and your zip code?")

SUPPORT_TEXTS = DomainTexts(
    safe_ack="Let me look into that for you.",
    narration_completion="look into that for you.",
    fallback=(
        "I'm sorry, I can't complete that right now. I can help with your orders, returns, "
        "exchanges and account questions."
    ),
    handoff="YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.",
    declined="Okay, I won't make that change.",
    clarify={
        "identity": IDENTITY_QUESTION,
        "order": "Which order do you mean? Please share the order number; it starts with #W.",
        "choose": "Which order do you mean: {options}?",
        "item": "Which item of the order do you mean?",
        "new_item": "Which option would you like instead?",
        "new_item_choose": "Which one would you like instead: {options}?",
        "item_choose": "Which one do you mean: {options}?",
        "new_item_for": "Which option of the {options} would you like instead?",
        "payment_method": "Which of your payment methods should I use?",
        "address": "What is the full new address: street, city, state, zip code and country?",
        "reason": "Why would you like to cancel: is it no longer needed, or was it ordered by mistake?",
        "details": "Could you tell me a little more about what you need?",
        "change": "What should I change about it?",
        "change_card": "What should I change on the card to {options}?",
        "identity_retry": ("I couldn't find an account with those details. Could you check them, or give me another "
                           "email address, or your first and last name and your zip code?"),
        "already_done": "I've already made that change. What else can I do for you?",
        "choices": "Which of these do you mean: {options}?",
        "payment_method_choices": "Which payment method should I use: {options}?",
        "item_choices": "Which item do you mean: {options}?",
        "new_item_choices": "Which option would you like instead: {options}?",
    },
    templates={
        "greeting/hello": ("Hi! I can help with your orders, returns, exchanges and account details. "
                           "What can I do for you?"),
        "greeting/thanks": "You're welcome! Is there anything else I can help with?",
        "greeting/bye": "Thanks for reaching out. Have a great day!",
        "action_card": "I can {phrase}. Please reply yes to confirm, or no to keep it as it is.",
        "product_options": "{name}: {available} of its {total} options are available right now.",
        "executed": "Done.",
        "write_unknown": ("I couldn't confirm whether that change went through. Please reply yes again and "
                          "I'll check; it will never be made twice."),
        "executed_account": "Done. Your profile is updated.",
        "verified": "Thanks, I found your account. How can I help you today?",
        "card:card.cancel_order": "cancel order {order_id} (reason: {reason})",
        "card:card.modify_items": "change the item options of order {order_id}",
        "card:card.modify_address": "ship order {order_id} to the new address",
        "card:card.modify_payment": "move order {order_id} to the other payment method",
        "card:card.return_items": "return the selected items of order {order_id}",
        "card:card.exchange_items": "exchange the selected items of order {order_id}",
        "card:card.modify_user_address": "change the default address on your profile",
        "order_state": "Order {order_id} is {status}.",
        "answer": "Here is what I found.",
        "not_found": "I couldn't find an account with those details. Could you check them?",
        "conflict:identity_not_found": "I couldn't find an account with those details. Could you check them?",
        "conflict:identity_unverified": IDENTITY_QUESTION,
    },
    guidance=GUIDANCE,
    refusals=REFUSALS,
)
