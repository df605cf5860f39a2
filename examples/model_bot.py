"""A support bot driven by a language model: the model picks the tools, pactmw gates them.

`model_bot(model)` is a turn handler that runs a model/tool loop over `turn.tools`. `model`
is any function `(messages, tools) -> assistant message` in the OpenAI Chat Completions
shape (plain dicts); docs/tools.md shows it wired to a real model SDK, and the tests drive it
with a scripted stand-in, so nothing here depends on one.

The model is offered every tool a personal agent may reach; calling an account tool whose
scope was not delegated (or `request_permission`) stops the loop with a step-up, which
pactmw answers with the consent task. What the write tools did is reported next to the
model's text as `{"action": ...}` data parts and listed in the signed receipt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any

from pactmw.protocols.identity import PersonalAgent
from pactmw.provider import ToolRegistry, Turn
from pactmw.provider.tools import Summary, ToolError

#: `(messages, tools) -> the assistant's message`, all in the Chat Completions JSON shape.
ChatModel = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Mapping[str, Any]]

SYSTEM_PROMPT = (
    "You are Acme's support assistant, answering a personal agent that acts for one of "
    "Acme's customers. Use the tools to look things up and to act; never guess an order's "
    "state. If a tool needs a permission the customer has not given, call it anyway: the "
    "customer is then asked to approve it."
)

#: Acme's orders: number -> (account, item, status).
ORDERS = {
    "A-1001": ("acct-alice", "walnut desk lamp", "processing"),
    "A-1002": ("acct-alice", "linen throw", "shipped"),
    "A-2001": ("acct-bob", "ceramic mug set", "processing"),
}

shop_tools = ToolRegistry()


@shop_tools.tool(identity=True)
def order_status(caller: PersonalAgent, order: Annotated[str, "Like A-1001"]) -> str:
    """Tell where an order is. Anyone's agent may ask: it reveals no account data."""
    found = ORDERS.get(order.upper())
    if found is None:
        raise ToolError(f"There is no order {order}.", code="unknown_order")
    return f"Order {order.upper()} is {found[2]}."


@shop_tools.tool(scope="orders:read")
def list_orders(account: str) -> list[dict[str, str]]:
    """List the customer's orders with their items and status."""
    return [
        {"order": number, "item": item, "status": status}
        for number, (owner, item, status) in ORDERS.items()
        if owner == account
    ]


def _cancel_summary(arguments: Mapping[str, Any], result: Any) -> Summary:
    return Summary("Cancel order", f"Order {arguments['order']} is cancelled; refund in 3-5 days.")


@shop_tools.tool(scope="orders:cancel", write=True, summary=_cancel_summary)
def cancel_order(account: str, order: Annotated[str, "Like A-1001"]) -> dict[str, str]:
    """Cancel one of the customer's orders that has not shipped."""
    found = ORDERS.get(order.upper())
    if found is None or found[0] != account:
        raise ToolError(f"Order {order} is not on this account.", code="unknown_order")
    if found[2] != "processing":
        raise ToolError(f"Order {order} has already {found[2]}.", code="too_late")
    return {"order": order.upper(), "status": "cancelled"}


def conversation(turn: Turn) -> list[dict[str, Any]]:
    """The system prompt, the conversation so far (pactmw keeps it) and the new message."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
    for earlier in turn.history:
        messages.append({"role": "user", "content": earlier.text})
        messages.append({"role": "assistant", "content": earlier.reply_text})
    messages.append({"role": "user", "content": turn.text})
    return messages


def model_bot(model: ChatModel, *, max_steps: int = 8) -> Callable[[Turn], str]:
    """A turn handler: ask `model`, run the tools it calls, until it answers in text."""

    def handle(turn: Turn) -> str:
        messages = conversation(turn)
        tools = turn.tools.definitions("openai")
        for _ in range(max_steps):
            reply = dict(model(messages, tools))
            messages.append(reply)
            calls = reply.get("tool_calls") or []
            if not calls:
                return str(reply.get("content") or "")
            for call in calls:
                function = call["function"]
                # A refused scope raises StepUpRequired here: pactmw answers with the task.
                outcome = turn.tools.run(function["name"], function["arguments"])
                messages.append(outcome.tool_message("openai", call["id"]))
        return "Sorry, I could not finish that. Could you put it another way?"

    return handle


__all__ = [
    "ORDERS",
    "SYSTEM_PROMPT",
    "ChatModel",
    "cancel_order",
    "conversation",
    "list_orders",
    "model_bot",
    "order_status",
    "shop_tools",
]
