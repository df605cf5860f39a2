"""`turn.tools` for a model: definitions in each API's shape, and one call run by name + JSON."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pytest

from pactmw.protocols.delegation import Action, Delegation
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider import Brand, DelegationConfig, StepUpRequired, ToolRegistry, Turn
from pactmw.provider._send import bound_tools
from pactmw.provider.tools import ToolError
from pactmw.provider.turn_tools import BoundTools, ToolOutcome
from tests.delegated.support import independent_hash
from tests.support.parties import ISSUER

SCOPES = {"orders:read": "See your orders", "orders:cancel": "Cancel an order"}


def caller(*scopes: str, delegated: bool = True) -> PersonalAgent:
    delegation = (
        Delegation(
            account="acct-1",
            scopes=frozenset(scopes),
            grant_id="g-1",
            client_id=ISSUER,
            claims={},
        )
        if delegated
        else None
    )
    return PersonalAgent(
        issuer=ISSUER, sub="u1", name="PA", claims={}, audience="aud", delegation=delegation
    )


def registry(calls: list[tuple[str, Any, dict[str, Any]]]) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(identity=True)
    def order_status(who: PersonalAgent, order: str) -> str:
        """Where an order is (anyone may ask)."""
        calls.append(("order_status", who, {"order": order}))
        return f"{order} is shipped"

    @tools.tool(scope="orders:read")
    def list_orders(account: str) -> list[str]:
        """The person's orders."""
        calls.append(("list_orders", account, {}))
        return ["A-1001", "A-1002"]

    @tools.tool(scope="orders:cancel", write=True)
    def cancel_order(
        account: str,
        order: Annotated[str, "Order number"],
        reason: Literal["changed_mind", "other"] = "other",
    ) -> dict[str, str]:
        """Cancel an order that has not shipped."""
        calls.append(("cancel_order", account, {"order": order, "reason": reason}))
        if order == "A-1002":
            raise ToolError("A-1002 has already shipped.", code="already_shipped")
        return {"order": order, "status": "cancelled"}

    return tools


CANCEL_SCHEMA = {
    "type": "object",
    "properties": {
        "order": {"type": "string", "description": "Order number"},
        "reason": {"type": "string", "enum": ["changed_mind", "other"], "default": "other"},
    },
    "required": ["order"],
    "additionalProperties": False,
}


def bound(*scopes: str, delegated: bool = True, brand_scopes: Any = SCOPES) -> BoundTools:
    return BoundTools(registry([]), caller(*scopes, delegated=delegated), scopes=brand_scopes)


def test_every_tool_a_personal_agent_may_reach_is_offered_even_without_its_scope() -> None:
    tools = bound(delegated=False)
    assert [tool.name for tool in tools.offered] == [
        "order_status",
        "list_orders",
        "cancel_order",
        "request_permission",
    ]
    # A Brand without delegation offers no request_permission.
    assert [t.name for t in bound(delegated=False, brand_scopes=None).offered][-1] == "cancel_order"


def _hello(turn: Turn) -> str:
    return "hello"


def test_a_turns_tools_offer_request_permission_with_the_brands_scope_descriptions() -> None:
    # What every protocol's turn (A2A message:send, a Poppy conversation) gives the bot.
    calls: list[tuple[str, Any, dict[str, Any]]] = []
    delegation = DelegationConfig(scopes=SCOPES, login_url="/login", tools=registry(calls))
    delegated = Brand(id="acme", name="Acme", handler=_hello, delegation=delegation)
    tools = bound_tools(delegated, caller("orders:cancel"))
    assert [tool.name for tool in tools.offered][-1] == "request_permission"
    ask = tools.definitions("anthropic")[-1]
    assert ask["input_schema"]["properties"]["scopes"]["items"]["enum"] == list(SCOPES)
    # A Poppy agent that negotiated Operations: the write is proposed, not run.
    proposing = bound_tools(delegated, caller("orders:cancel"), propose_writes=True)
    proposing.run("cancel_order", {"order": "A-1"})
    assert [(tool.name, arguments) for tool, arguments in proposing.proposed] == [
        ("cancel_order", {"order": "A-1"})
    ]
    assert calls == []
    identity_only = ToolRegistry()
    identity_only.add("hours", lambda who: "9-5", identity=True)
    plain = Brand(id="acme", name="Acme", handler=_hello, tools=identity_only)
    assert [tool.name for tool in bound_tools(plain, caller(delegated=False)).offered] == ["hours"]


def test_definitions_in_the_openai_anthropic_and_mcp_shapes() -> None:
    tools = bound("orders:read")
    openai = tools.definitions("openai")
    assert openai[2] == {
        "type": "function",
        "function": {
            "name": "cancel_order",
            "description": "Cancel an order that has not shipped.",
            "parameters": CANCEL_SCHEMA,
        },
    }
    assert tools.definitions("openai-responses")[2] == {
        "type": "function",
        "name": "cancel_order",
        "description": "Cancel an order that has not shipped.",
        "parameters": CANCEL_SCHEMA,
    }
    assert tools.definitions("anthropic")[2] == {
        "name": "cancel_order",
        "description": "Cancel an order that has not shipped.",
        "input_schema": CANCEL_SCHEMA,
    }
    mcp = tools.definitions("mcp")
    assert mcp[2] == {
        "name": "cancel_order",
        "title": "Cancel order",
        "description": "Cancel an order that has not shipped.",
        "inputSchema": CANCEL_SCHEMA,
        "annotations": {"title": "Cancel order", "readOnlyHint": False},
    }
    assert mcp[1]["annotations"]["readOnlyHint"] is True
    ask = openai[3]["function"]
    assert ask["name"] == "request_permission"
    assert "orders:cancel: Cancel an order" in ask["description"]
    assert ask["parameters"]["properties"]["scopes"]["items"]["enum"] == list(SCOPES)
    # Pure JSON, and a fresh copy: changing it changes nothing registered.
    assert json.loads(json.dumps(openai)) == openai
    openai[2]["function"]["parameters"]["properties"].clear()
    assert tools.definitions("openai")[2]["function"]["parameters"] == CANCEL_SCHEMA
    with pytest.raises(ValueError, match="unknown tool format 'gemini'"):
        tools.definitions("gemini")  # type: ignore[arg-type]


def test_a_model_call_runs_with_json_arguments_and_is_recorded_for_the_receipt() -> None:
    calls: list[tuple[str, Any, dict[str, Any]]] = []
    tools = BoundTools(registry(calls), caller("orders:read", "orders:cancel"), scopes=SCOPES)
    listed = tools.run("list_orders", "{}")
    assert listed == ToolOutcome(tool="list_orders", ok=True, result=["A-1001", "A-1002"])
    assert listed.content == '["A-1001","A-1002"]'
    arguments = '{"reason": "changed_mind", "order": "A-1001"}'
    cancelled = tools.run("cancel_order", arguments)
    assert cancelled.ok
    assert cancelled.result == {"order": "A-1001", "status": "cancelled"}
    assert calls[-1] == ("cancel_order", "acct-1", {"order": "A-1001", "reason": "changed_mind"})
    # argsHash over the arguments as the model ordered them; reads carry no hash.
    assert tools.actions == [
        Action(tool="list_orders"),
        Action(tool="cancel_order", args_hash=independent_hash(json.loads(arguments))),
    ]
    assert tools.scopes_used == ["orders:read", "orders:cancel"]
    assert tools.reports == [
        {
            "action": {
                "tool": "cancel_order",
                "status": "completed",
                "summary": {"title": "Cancel order", "detail": ""},
                "result": {"order": "A-1001", "status": "cancelled"},
            }
        }
    ]
    # Arguments an API already parsed (Anthropic's `input`) are taken as they are.
    assert tools.run("cancel_order", {"order": "A-1003"}).ok


def test_identity_tools_run_for_any_personal_agent_and_stay_out_of_receipts() -> None:
    calls: list[tuple[str, Any, dict[str, Any]]] = []
    agent = caller(delegated=False)
    tools = BoundTools(registry(calls), agent, scopes=SCOPES)
    outcome = tools.run("order_status", '{"order":"A-1001"}')
    assert outcome.content == "A-1001 is shipped"
    assert calls == [("order_status", agent, {"order": "A-1001"})]
    assert tools.actions == []
    assert tools.scopes_used == []
    assert tools.reports == []
    assert tools.order_status(order="A-9") == "A-9 is shipped"  # from Python too


@pytest.mark.parametrize(
    ("name", "arguments", "error", "message"),
    [
        ("delete_account", "{}", "unknown_tool", "No tool 'delete_account'; the tools are: "),
        ("_invoke", "{}", "unknown_tool", "No tool '_invoke'"),
        ("cancel_order", "{order: 1}", "invalid_arguments", "The arguments are not valid JSON"),
        ("cancel_order", '{"order":"A","order":"B"}', "invalid_arguments", "not valid JSON"),
        ("cancel_order", "[1]", "invalid_arguments", "The arguments must be a JSON object."),
        ("cancel_order", "{}", "invalid_arguments", "Order is required."),
        ("cancel_order", '{"order": 7}', "invalid_arguments", "Order must be a string."),
        (
            "cancel_order",
            '{"order":"A-1","reason":"bored"}',
            "invalid_arguments",
            "Reason must be one of",
        ),
        (
            "cancel_order",
            '{"order":"A-1","force":true}',
            "invalid_arguments",
            "Force is not expected.",
        ),
        ("cancel_order", b'{"order":"\xff"}', "invalid_arguments", "not valid JSON"),
        ("cancel_order", '{"order":"A-1002"}', "already_shipped", "A-1002 has already shipped."),
    ],
)
def test_a_bad_call_is_a_tool_error_the_model_can_read(
    name: str, arguments: Any, error: str, message: str
) -> None:
    calls: list[tuple[str, Any, dict[str, Any]]] = []
    tools = BoundTools(registry(calls), caller("orders:cancel"), scopes=SCOPES)
    outcome = tools.run(name, arguments)
    assert not outcome.ok
    assert outcome.error == error
    assert message in outcome.message
    assert outcome.content == f"Error ({error}): {outcome.message}"
    assert tools.actions == []
    if error != "already_shipped":
        assert calls == []  # nothing ran
    else:
        # A write tool that refused is reported as failed, and nothing goes into the receipt.
        assert tools.reports == [
            {
                "action": {
                    "tool": "cancel_order",
                    "status": "failed",
                    "summary": {"title": "Cancel order", "detail": "A-1002 has already shipped."},
                    "result": None,
                }
            }
        ]


def test_a_call_behind_a_scope_not_granted_is_the_step_up() -> None:
    calls: list[tuple[str, Any, dict[str, Any]]] = []
    tools = BoundTools(registry(calls), caller("orders:read"), scopes=SCOPES)
    with pytest.raises(StepUpRequired) as raised:
        tools.run("cancel_order", '{"order":"A-1001"}')
    assert raised.value.missing_scopes == ("orders:cancel",)
    anonymous = BoundTools(registry(calls), caller(delegated=False), scopes=SCOPES)
    with pytest.raises(StepUpRequired) as raised:
        anonymous.run("list_orders")
    assert raised.value.missing_scopes == ("orders:read",)
    assert calls == []
    assert tools.actions == []
    assert tools.reports == []
    # Bad arguments are reported before any consent is asked for.
    assert tools.run("cancel_order", "{}").error == "invalid_arguments"


def test_request_permission_asks_up_front_and_reports_what_is_already_granted() -> None:
    tools = bound("orders:read")
    with pytest.raises(StepUpRequired) as raised:
        tools.run(
            "request_permission",
            '{"scopes":["orders:read","orders:cancel"],"reason":"To cancel A-1001."}',
        )
    assert raised.value.missing_scopes == ("orders:cancel",)
    assert raised.value.message == "To cancel A-1001."
    granted = tools.run("request_permission", '{"scopes":["orders:read"]}')
    assert granted.result == {"granted": ["orders:read"]}
    assert tools.actions == []
    assert tools.reports == []
    assert tools.run("request_permission", '{"scopes":["admin"]}').error == "invalid_arguments"
    assert tools.run("request_permission", '{"scopes":[]}').error == "invalid_arguments"


def test_tool_results_in_each_api_shape() -> None:
    ok = ToolOutcome(tool="list_orders", ok=True, result={"orders": ["A-1"]})
    failed = ToolOutcome(tool="x", ok=False, error="unknown_tool", message="No tool 'x'.")
    assert ok.tool_message("openai", "call_1") == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": '{"orders":["A-1"]}',
    }
    assert ok.tool_message("openai-responses", "fc_1") == {
        "type": "function_call_output",
        "call_id": "fc_1",
        "output": '{"orders":["A-1"]}',
    }
    assert failed.tool_message("anthropic", "toolu_1") == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "Error (unknown_tool): No tool 'x'.",
        "is_error": True,
    }
    assert ok.tool_message("mcp") == {
        "content": [{"type": "text", "text": '{"orders":["A-1"]}'}],
        "isError": False,
        "structuredContent": {"orders": ["A-1"]},
    }
    assert failed.tool_message("mcp") == {
        "content": [{"type": "text", "text": "Error (unknown_tool): No tool 'x'."}],
        "isError": True,
    }
    with pytest.raises(ValueError, match="needs the call's id"):
        ok.tool_message("openai")


def test_a_tool_that_returns_something_not_json_is_the_bots_bug() -> None:
    tools = ToolRegistry()
    tools.add("odd", lambda caller: object(), identity=True)
    with pytest.raises(TypeError, match="tool 'odd' returned a value that is not JSON"):
        BoundTools(tools, caller(delegated=False)).run("odd")
