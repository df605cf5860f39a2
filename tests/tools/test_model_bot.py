"""The example model bot end to end: a real Provider on uvicorn, a personal agent over HTTP,
the device flow in a browser's place, and a scripted stand-in for the language model.

The stand-in plays the model's part in the OpenAI Chat Completions shape: it reads the
messages it is given (the tool results included) and answers with tool calls or text, so
every test also shows what the model saw.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from examples.model_bot import SYSTEM_PROMPT, model_bot, shop_tools

from pactmw.provider import Brand, DelegationConfig
from tests.delegated.support import (
    LOGIN_URL,
    Env,
    independent_hash,
    jws_header,
    message_of,
    new_sub,
    serve,
    task_of,
    verify_with_jwks,
)
from tests.support.parties import ISSUER

SCOPES = {"orders:read": "See your orders", "orders:cancel": "Cancel an order"}
ORDER = re.compile(r"\b[A-Z]-\d{4}\b")


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


class ScriptedModel:
    """Plays a model: decides from the last user message and the tool results so far."""

    def __init__(self) -> None:
        self.seen: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
        self._lock = threading.Lock()

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        with self._lock:
            self.seen.append((copy.deepcopy(messages), copy.deepcopy(tools)))
        user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        results = [
            m["content"]
            for m in messages[messages.index({"role": "user", "content": user}) :]
            if m["role"] == "tool"
        ]
        order = ORDER.search(user)
        number = order.group(0) if order else ""
        if "ask first" in user:
            reason = "So that I can cancel orders for you."
            return call("p1", "request_permission", {"scopes": ["orders:cancel"], "reason": reason})
        if "cancel" in user:
            if not results:  # a first try with the wrong argument name
                return call("c1", "cancel_order", {"order_id": number})
            if results[-1].startswith("Error (invalid_arguments)"):
                return call("c2", "cancel_order", {"order": number})
            return say(f"Done. ({results[-1]})")
        if "where" in user:
            return (
                call("s1", "order_status", {"order": number}) if not results else say(results[-1])
            )
        if "my orders" in user:
            if not results:
                return call("l1", "list_orders", {})
            orders = json.loads(results[-1])
            return say(
                "You have " + ", ".join(f"{o['order']} ({o['status']})" for o in orders) + "."
            )
        if "delete" in user:
            return (
                call("d1", "delete_account", {}) if not results else say(f"I can't: {results[-1]}")
            )
        return say("How can I help?")

    def last_messages(self) -> list[dict[str, Any]]:
        return self.seen[-1][0]


@pytest.fixture(scope="module")
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture(scope="module")
def env(model: ScriptedModel) -> Iterator[Env]:
    brand = Brand(
        id="acme",
        name="Acme Support",
        handler=model_bot(model),
        delegation=DelegationConfig(
            scopes=SCOPES, login_url=LOGIN_URL, tools=shop_tools, interval=1
        ),
    )
    with serve("memory://", [brand]) as running:
        yield running


def receipt_claims(env: Env, message: dict[str, Any]) -> dict[str, Any]:
    """The receipt, verified with PyJWT against the JWKS the metadata names."""
    metadata = env.get(env.oauth("acme", ".well-known/oauth-authorization-server")).json()
    jwks = env.http.get(metadata["jwks_uri"]).json()
    receipt = message["metadata"]["pact.receipt"]
    assert jws_header(receipt["jws"])["typ"] == "pact-receipt+jws"
    claims: dict[str, Any] = json.loads(verify_with_jwks(receipt["jws"], jwks))
    assert claims == receipt["claims"]
    return claims


def test_the_model_is_offered_every_reachable_tool_and_answers_with_an_identity_tool(
    env: Env, model: ScriptedModel
) -> None:
    reply = message_of(env.send("acme", "where is A-1002?", sub=new_sub()))
    assert reply["parts"] == [{"text": "Order A-1002 is shipped."}]
    assert "metadata" not in reply  # no delegation, no receipt
    messages, tools = model.seen[-1]
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    # Offered, though this caller has no delegation: account tools and request_permission too.
    assert [tool["function"]["name"] for tool in tools] == [
        "order_status",
        "list_orders",
        "cancel_order",
        "request_permission",
    ]
    assert messages[-1] == {
        "role": "tool",
        "tool_call_id": "s1",
        "content": "Order A-1002 is shipped.",
    }


def test_a_call_behind_an_undelegated_scope_is_the_step_up_then_runs_once_approved(
    env: Env, model: ScriptedModel
) -> None:
    sub = new_sub()
    refused = task_of(env.send("acme", "please cancel A-1001", sub=sub, message_id="m-cancel"))
    assert refused["metadata"]["pact.missingScopes"] == ["orders:cancel"]
    assert "/oauth/consent?user_code=" in refused["metadata"]["pact.verificationUriComplete"]
    # The wrong argument name came back to the model as a readable error, before any consent.
    error = model.last_messages()[-1]
    assert error == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Error (invalid_arguments): Order is required.",
    }

    tokens = env.connect("acme", "orders:read orders:cancel", user="alice", sub=sub)
    again = env.send(
        "acme",
        "please cancel A-1001",
        token=tokens["access_token"],
        context_id=refused["contextId"],
        message_id="m-cancel",
        sub=sub,
    )
    reply = message_of(again)
    assert reply["contextId"] == refused["contextId"]
    action = {
        "tool": "cancel_order",
        "status": "completed",
        "summary": {
            "title": "Cancel order",
            "detail": "Order A-1001 is cancelled; refund in 3-5 days.",
        },
        "result": {"order": "A-1001", "status": "cancelled"},
    }
    assert reply["parts"] == [
        {"text": 'Done. ({"order":"A-1001","status":"cancelled"})'},
        {"data": {"action": action}},
    ]
    claims = receipt_claims(env, reply)
    assert claims["user"] == "acct-alice"
    assert claims["pa"] == ISSUER
    assert claims["scopesUsed"] == ["orders:cancel"]
    assert claims["actions"] == [
        {"tool": "cancel_order", "argsHash": independent_hash({"order": "A-1001"})}
    ]


def test_a_read_tool_runs_under_its_scope_and_is_in_the_receipt_without_a_hash(
    env: Env,
) -> None:
    sub = new_sub()
    tokens = env.connect("acme", "orders:read", user="alice", sub=sub)
    reply = message_of(env.send("acme", "show my orders", token=tokens["access_token"], sub=sub))
    assert reply["parts"] == [{"text": "You have A-1001 (processing), A-1002 (shipped)."}]
    claims = receipt_claims(env, reply)
    assert claims["scopesUsed"] == ["orders:read"]
    assert claims["actions"] == [{"tool": "list_orders"}]
    # With orders:read only, a cancellation is the step-up for orders:cancel alone.
    refused = task_of(env.send("acme", "cancel A-1001", token=tokens["access_token"], sub=sub))
    assert refused["metadata"]["pact.missingScopes"] == ["orders:cancel"]


def test_a_tool_error_of_the_tool_itself_reaches_the_model_and_is_a_failed_action(
    env: Env, model: ScriptedModel
) -> None:
    sub = new_sub()
    tokens = env.connect("acme", "orders:cancel", user="alice", sub=sub)
    reply = message_of(env.send("acme", "cancel A-1002", token=tokens["access_token"], sub=sub))
    assert model.last_messages()[-1]["content"] == (
        "Error (too_late): Order A-1002 has already shipped."
    )
    assert reply["parts"][1] == {
        "data": {
            "action": {
                "tool": "cancel_order",
                "status": "failed",
                "summary": {"title": "Cancel order", "detail": "Order A-1002 has already shipped."},
                "result": None,
            }
        }
    }
    # Nothing was done, so the receipt lists no action.
    claims = receipt_claims(env, reply)
    assert claims["actions"] == []
    assert claims["scopesUsed"] == []


def test_request_permission_asks_up_front_with_the_models_reason(env: Env) -> None:
    task = task_of(env.send("acme", "I will want cancellations, ask first", sub=new_sub()))
    assert task["metadata"]["pact.missingScopes"] == ["orders:cancel"]
    assert task["status"]["message"]["parts"][0]["text"] == "So that I can cancel orders for you."


def test_a_tool_that_is_not_offered_is_out_of_reach(env: Env, model: ScriptedModel) -> None:
    reply = message_of(env.send("acme", "delete my account", sub=new_sub()))
    text = reply["parts"][0]["text"]
    assert text.startswith("I can't: Error (unknown_tool): No tool 'delete_account'")
    assert reply["parts"] == [{"text": text}]
