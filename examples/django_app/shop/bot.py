"""The shop's support bot: it answers from the `Order` table and knows nothing of PACT.

pactmw calls `support_bot(turn)` for each `message:send` (settings `PACTMW["brands"]`,
`handler = "shop.bot:support_bot"`). `turn.history` holds the conversation's earlier turns.
When the Brand offers delegation, account actions go through `turn.tools` (`shop/tools.py`).
"""

from __future__ import annotations

import re

from pactmw.provider import Reply, Turn
from shop.models import Order

_ORDER_NUMBER = re.compile(r"\b([A-Z]-\d{4})\b", re.IGNORECASE)
_MY_ORDERS = re.compile(r"\bmy orders\b|\border history\b")
ASK_FOR_NUMBER = "I can help with that. What's your order number? It looks like A-1001."


def _mentioned_order(turn: Turn) -> str | None:
    """The order number in this message, else the latest one earlier in the conversation."""
    for text in (turn.text, *(earlier.text for earlier in reversed(turn.history))):
        found = _ORDER_NUMBER.search(text)
        if found is not None:
            return found.group(1).upper()
    return None


def support_bot(turn: Turn) -> str | Reply:
    """Answer one chat message about an order's status or a return.

    When the Brand offers delegation, "show my orders" and returns act on the customer's
    account through `turn.tools`: without a delegation token granting their scope, pactmw
    answers with a step-up task asking the customer's permission. Order status by number
    needs no account and keeps working for any personal agent.
    """
    lowered = turn.text.lower()
    if "thank" in lowered or "bye" in lowered:
        return Reply(text="You're welcome. Have a good day!", close=True)
    delegated = turn.brand.delegation is not None
    if delegated and _MY_ORDERS.search(lowered):
        turn.require_scopes("orders:read", message="I need your permission to see your orders.")
        orders = turn.tools.list_orders()
        if not orders:
            return "You have no orders with us yet."
        listed = "; ".join(f"{o['number']} ({o['item']}, {o['status']})" for o in orders)
        return Reply(text=f"Your orders: {listed}.", data=({"orders": orders},))
    number = _mentioned_order(turn)
    if number is None:
        return ASK_FOR_NUMBER
    order = Order.objects.filter(number=number).first()
    if order is None:
        return f"I can't find order {number}. Could you check the number?"
    if "return" in lowered:
        if delegated:
            turn.require_scopes(
                "orders:return", message="I need your permission to start a return for you."
            )
            text: str = turn.tools.start_return(order=number)
            return text
        # Without delegation the shop does what its chat widget always did.
        if order.status == Order.Status.PROCESSING:
            return f"Order {number} has not shipped yet, so there is nothing to return."
        Order.objects.filter(pk=order.pk).update(return_requested=True)
        return (
            f"I've started a return for order {number} ({order.item}). "
            "You'll get a prepaid label by email within the hour."
        )
    return Reply(text=order.describe(), data=({"order": order.as_dict()},))
