"""A small order-support bot, the kind a shop already has behind its chat widget.

It knows nothing of PACT: it takes a turn (text plus the conversation so far) and answers.
pactmw calls it for each `message:send`; see `examples/flask_app` and `examples/django_app`.
"""

from __future__ import annotations

import re

from pactmw.provider import Reply, Turn

#: The shop's orders (a real bot would ask its database).
ORDERS = {
    "A-1001": {"status": "shipped", "eta": "Thursday", "item": "walnut desk lamp"},
    "A-1002": {"status": "processing", "eta": "next Monday", "item": "linen throw"},
    "A-1003": {"status": "delivered", "eta": "", "item": "ceramic mug set"},
}
_ORDER_NUMBER = re.compile(r"\b([A-Z]-\d{4})\b", re.IGNORECASE)
ASK_FOR_NUMBER = "I can help with that. What's your order number? It looks like A-1001."


def describe_order(number: str) -> str:
    """One sentence about an order, or that it is unknown."""
    order = ORDERS.get(number.upper())
    if order is None:
        return f"I can't find order {number.upper()}. Could you check the number?"
    if order["status"] == "delivered":
        return f"Order {number.upper()} ({order['item']}) was delivered."
    return (
        f"Order {number.upper()} ({order['item']}) is {order['status']}; "
        f"it should arrive {order['eta']}."
    )


def answer(text: str, wants_return: bool) -> str:
    """The shop's answer to one message, given whether the conversation is about a return."""
    match = _ORDER_NUMBER.search(text)
    if match is None:
        if "bye" in text.lower() or "thank" in text.lower():
            return "You're welcome. Have a good day!"
        return ASK_FOR_NUMBER
    number = match.group(1).upper()
    if wants_return:
        if number not in ORDERS:
            return describe_order(number)
        return (
            f"I've started a return for order {number}. "
            "You'll get a prepaid label by email within the hour."
        )
    return describe_order(number)


def order_bot(turn: Turn) -> str | Reply:
    """The turn handler pactmw calls: order status and returns, over several turns."""
    earlier = " ".join(t.text for t in turn.history)
    wants_return = "return" in f"{earlier} {turn.text}".lower()
    text = answer(turn.text, wants_return)
    if text.startswith("You're welcome"):
        return Reply(text=text, close=True)
    return text
