"""The shop's account actions, as pactmw tools (PACT §5: scopes, step-up, receipts).

pactmw runs them for the Brand account of the delegation token (a `django.contrib.auth`
user's pk, as the consent page recorded it) and only within the scopes the customer granted.
Settings (and TOML configs) name this registry `tools = "shop.tools:shop_tools"`.
"""

from __future__ import annotations

from typing import Any

from pactmw.provider.tools import ToolRegistry
from shop.models import Order

shop_tools = ToolRegistry()


@shop_tools.tool(scope="orders:read")
def list_orders(account: str) -> list[dict[str, Any]]:
    """The account's orders, by number."""
    return [order.as_dict() for order in Order.objects.filter(owner_id=int(account))]


@shop_tools.tool(scope="orders:return", write=True)
def start_return(account: str, order: str) -> str:
    """Start a return for one of the account's orders; the outcome, in a sentence."""
    number = order.upper()
    found = Order.objects.filter(owner_id=int(account), number=number).first()
    if found is None:
        return f"I can't find order {number} on your account."
    if found.status == Order.Status.PROCESSING:
        return f"Order {number} has not shipped yet, so there is nothing to return."
    Order.objects.filter(pk=found.pk).update(return_requested=True)
    return (
        f"I've started a return for order {number} ({found.item}). "
        "You'll get a prepaid label by email within the hour."
    )
