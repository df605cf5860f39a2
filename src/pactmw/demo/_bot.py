"""Acme's support bot, `pactmw.demo:demo_bot`, and its account actions, `demo_tools`.

The server process imports these by path from the demo's configuration; nothing here knows
about the personal agent's side of the demo.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
from types import MappingProxyType

from pactmw.demo._common import BOT_LOG_ENV, DEMO_USER
from pactmw.provider.brand import Turn
from pactmw.provider.tools import ToolRegistry

ORDERS: Mapping[str, tuple[str, str, str]] = MappingProxyType(
    {
        "A-1001": ("walnut desk lamp", "shipped", "Thursday"),
        "A-1002": ("linen throw", "being packed", "next Monday"),
    }
)
_ORDER_NUMBER = re.compile(r"\b([A-Z]-\d{4})\b", re.IGNORECASE)


#: Which orders each Acme account has (what the account tools see).
ACCOUNT_ORDERS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {DEMO_USER.account: ("A-1001", "A-1002")}
)


def _order_in(text: str) -> str | None:
    found = _ORDER_NUMBER.search(text)
    return found.group(1).upper() if found else None


#: Acme's account actions (PACT Delegated): each needs a scope the user approved, and every
#: call that runs is recorded in the signed receipt of the reply.
demo_tools = ToolRegistry()


@demo_tools.tool(scope="orders:read")
def list_orders(account: str) -> list[str]:
    """The order numbers of an Acme account."""
    return list(ACCOUNT_ORDERS.get(account, ()))


@demo_tools.tool(scope="orders:cancel", write=True)
def cancel_order(account: str, order: str) -> str:
    """Cancel an order of the account (a write action: its arguments are hashed in receipts)."""
    if order not in ACCOUNT_ORDERS.get(account, ()):
        return f"I can't find order {order} on your account."
    return f"Order {order} is cancelled; the refund posts in 3-5 days."


def _describe(number: str) -> str:
    item, status, _ = ORDERS.get(number, ("an item", "unknown", ""))
    return f"{number} ({item}, {status})"


def demo_bot(turn: Turn) -> str:
    """Acme's support bot: asks for an order number, then answers about that order.

    It remembers the order of the conversation through `turn.history`, which pactmw keeps.
    Questions about "my orders" and cancellations act on the user's Acme account through
    `turn.tools` (PACT Delegated): without the needed scope pactmw turns them into a step-up.
    """
    log = os.environ.get(BOT_LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{turn.context_id} {turn.message_id}\n")
    lowered = turn.text.lower()
    if turn.parafe.enabled and "reorder" in lowered:
        return _reorder(turn)
    if "cancel" in lowered:
        target = _order_in(turn.text)
        if target is None:
            return "Which order should I cancel?"
        return str(turn.tools.cancel_order(order=target))
    if "my orders" in lowered:
        orders = turn.tools.list_orders()
        if not orders:
            return "I don't see any orders on your account."
        return "Your orders: " + "; ".join(_describe(number) for number in orders) + "."
    number = _order_in(turn.text)
    mentioned = number is not None
    for earlier in reversed(turn.history):
        if number is not None:
            break
        number = _order_in(earlier.text)
    if number is None:
        return "Happy to help! What's your order number? It looks like A-1001."
    order = ORDERS.get(number)
    if order is None:
        return f"I can't find order {number}. Could you check the number?"
    item, status, eta = order
    if mentioned:
        return f"Order {number} ({item}) is {status}."
    if "arriv" in turn.text.lower() or "when" in turn.text.lower():
        return f"Order {number} should arrive {eta}."
    return f"Anything else about order {number}? It is {status}."


def _reorder(turn: Turn) -> str:
    """A Parafé-scoped action: only with broker-issued consent for `create_order` (raises
    `ParafeRefused` otherwise, which pactmw answers with the Parafé error and a receipt)."""
    original = _order_in(turn.text) or "A-1001"
    turn.parafe.require("create_order", details={"reorder_of": original})
    number = f"R-{uuid.uuid4().int % 9000 + 1000}"
    turn.parafe.complete("create_order", business_ref=number)
    item = ORDERS.get(original, ("the same item", "", ""))[0]
    return f"Done: order {number} is a copy of {original} ({item}); it ships tomorrow."


__all__ = [
    "ACCOUNT_ORDERS",
    "ORDERS",
    "cancel_order",
    "demo_bot",
    "demo_tools",
    "list_orders",
]
