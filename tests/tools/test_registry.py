"""Registering tools: who may run them, their descriptions and argument schemas from hints."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, TypedDict

import pytest
from typing_extensions import NotRequired

from pactmw.config import ConfigError
from pactmw.provider import Brand, DelegationConfig, ProviderSettings, ToolRegistry, Turn
from pactmw.provider.tools import REQUEST_PERMISSION, Summary, Tool

SCOPES = {"orders:read": "See your orders", "orders:cancel": "Cancel an order"}


class Address(TypedDict):
    street: str
    city: Annotated[str, "The city, as on an envelope"]
    floor: NotRequired[int]


def test_schema_from_plain_type_hints() -> None:
    tools = ToolRegistry()

    @tools.tool(scope="orders:cancel", write=True)
    def cancel_order(  # type: ignore[no-untyped-def]
        account: str,
        order: Annotated[str, "The order number, like A-1001"],
        reason: Literal["changed_mind", "too_late"],
        quantity: int = 1,
        refund: float | None = None,
        notify: bool = True,
        lines: list[int] | None = None,
        note: Optional[str] = None,  # noqa: UP045 - Optional spelled the old way on purpose
        ship_to: Address | None = None,
        labels: dict[str, str] | None = None,
        anything: Any = None,
        untyped=None,  # a parameter without a hint
    ) -> str:
        """Cancel an order that has not shipped.

        Longer notes for developers, not for the model.
        """
        return "ok"

    tool = tools["cancel_order"]
    assert tool.description == "Cancel an order that has not shipped."
    assert tool.title == "Cancel order"
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "order": {"type": "string", "description": "The order number, like A-1001"},
            "reason": {"type": "string", "enum": ["changed_mind", "too_late"]},
            "quantity": {"type": "integer", "default": 1},
            "refund": {"type": ["number", "null"], "default": None},
            "notify": {"type": "boolean", "default": True},
            "lines": {
                "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}],
                "default": None,
            },
            "note": {"type": ["string", "null"], "default": None},
            "ship_to": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {
                            "street": {"type": "string"},
                            "city": {
                                "type": "string",
                                "description": "The city, as on an envelope",
                            },
                            "floor": {"type": "integer"},
                        },
                        "required": ["street", "city"],
                        "additionalProperties": False,
                    },
                    {"type": "null"},
                ],
                "default": None,
            },
            "labels": {
                "anyOf": [
                    {"type": "object", "additionalProperties": {"type": "string"}},
                    {"type": "null"},
                ],
                "default": None,
            },
            "anything": {"default": None},
            "untyped": {"default": None},
        },
        "required": ["order", "reason"],
        "additionalProperties": False,
    }


def test_keyword_arguments_open_the_schema_and_mixed_literals_have_no_type() -> None:
    tools = ToolRegistry()

    @tools.tool(identity=True)
    def search(caller: Any, level: Literal[1, "max"], **filters: Any) -> list[str]:
        return []

    assert tools["search"].parameters == {
        "type": "object",
        "properties": {"level": {"enum": [1, "max"]}},
        "required": ["level"],
        "additionalProperties": True,
    }
    assert tools["search"].description == ""


@pytest.mark.parametrize(
    ("define", "message"),
    [
        (lambda: lambda: None, "first parameter must take the account"),
        (lambda: lambda *args: None, "first parameter must take the account"),
        (lambda: _positional_only, "'order' cannot be passed by name"),
        (lambda: _star_args, "'more' cannot be passed by name"),
        (lambda: _set_hint, "tool 'x', parameter 'tags': no JSON Schema for set"),
        (lambda: _int_keys, "JSON objects have string keys only"),
        (lambda: _object_literal, "Literal values must be strings"),
    ],
)
def test_hints_that_have_no_schema_are_refused_with_the_tool_and_parameter(
    define: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ToolRegistry().add("x", define(), scope="orders:read")


def _positional_only(account: str, order: str, /) -> None: ...
def _star_args(account: str, *more: str) -> None: ...
def _set_hint(account: str, tags: set[str]) -> None: ...
def _int_keys(account: str, table: dict[int, str]) -> None: ...
def _object_literal(account: str, level: Literal[b"x"]) -> None: ...


def test_explicit_schema_and_description_replace_the_derived_ones() -> None:
    tools = ToolRegistry()
    schema: dict[str, Any] = {"type": "object", "properties": {"order": {"type": "string"}}}
    tool = tools.add(
        "cancel",
        lambda account, **arguments: None,
        scope="orders:cancel",
        description="Cancel it.",
        parameters=schema,
        title="Cancel an order",
    )
    assert (tool.description, tool.parameters, tool.title) == (
        "Cancel it.",
        schema,
        "Cancel an order",
    )
    schema["properties"]["order"]["type"] = "integer"  # the registered copy does not change
    assert tool.parameters["properties"]["order"] == {"type": "string"}
    with pytest.raises(ValueError, match="uses 'oneOf'"):
        tools.add("bad", print, scope="orders:read", parameters={"type": "object", "oneOf": []})
    with pytest.raises(ValueError, match="parameters must be a schema of type object"):
        tools.add("bad", print, scope="orders:read", parameters={"type": "string"})


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("x", {}, "needs a scope, or identity=True"),
        ("x", {"scope": "orders:read", "identity": True}, "not both"),
        ("x", {"scope": ""}, "scope must be a non-empty string"),
        ("orders.list", {"scope": "orders:read"}, "must be 1-64 letters"),
        ("", {"scope": "orders:read"}, "must be 1-64 letters"),
        ("x" * 65, {"scope": "orders:read"}, "must be 1-64 letters"),
        (REQUEST_PERMISSION, {"identity": True}, "built-in step-up request"),
    ],
)
def test_a_tool_is_never_open_to_outside_callers_by_accident(
    name: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ToolRegistry().add(name, lambda account: None, **options)


def test_a_name_is_registered_once_and_the_registry_lists_its_tools() -> None:
    tools = ToolRegistry()
    tools.add("a", lambda account: None, scope="orders:read")
    tools.add("b", lambda caller: None, identity=True)
    with pytest.raises(ValueError, match="already registered"):
        tools.add("a", lambda account: None, scope="orders:read")
    assert [tool.name for tool in tools] == ["a", "b"]
    assert len(tools) == 2
    assert "b" in tools
    assert tools["b"].identity
    assert tools.scopes == frozenset({"orders:read"})


def test_summaries_default_to_the_title_and_the_text_result() -> None:
    plain = Tool(name="cancel_order", scope="orders:cancel", function=print, write=True)
    assert plain.summarize({}, "Done.") == Summary("Cancel order", "Done.")
    assert plain.summarize({}, {"id": 1}) == Summary("Cancel order", "")
    worded = Tool(
        name="cancel_order",
        scope="orders:cancel",
        function=print,
        summary=lambda arguments, result: f"Order {arguments['order']} cancelled",
    )
    assert worded.summarize({"order": "A-1"}, None) == Summary(
        "Cancel order", "Order A-1 cancelled"
    )
    full = Tool(
        name="x", scope=None, function=print, summary=lambda arguments, result: Summary("T", "D")
    )
    assert full.summarize({}, None).to_dict() == {"title": "T", "detail": "D"}


def _delegation(tools: ToolRegistry | None = None) -> DelegationConfig:
    if tools is None:
        return DelegationConfig(scopes=SCOPES, login_url="/login")
    return DelegationConfig(scopes=SCOPES, login_url="/login", tools=tools)


def hello(turn: Turn) -> str:
    return "hello"


def test_a_brand_takes_its_tools_once_and_account_tools_need_its_delegation() -> None:
    identity_only = ToolRegistry()
    identity_only.add("hours", lambda caller: "9-5", identity=True)
    brand = Brand(id="acme", name="Acme", handler=hello, tools=identity_only)
    assert brand.tools is identity_only
    assert brand.delegation is None

    account = ToolRegistry()
    account.add("list_orders", lambda account: [], scope="orders:read")
    with pytest.raises(ValueError, match="account tools need the Brand's delegation"):
        Brand(id="acme", name="Acme", handler=hello, tools=account)
    # The tools of the delegation are the Brand's tools unless given at the Brand.
    assert Brand(id="a", name="A", handler=hello, delegation=_delegation(account)).tools is account
    assert (
        Brand(id="a", name="A", handler=hello, delegation=_delegation(), tools=account).tools
        is account
    )
    with pytest.raises(ValueError, match="give the Brand's tools once"):
        Brand(id="a", name="A", handler=hello, delegation=_delegation(account), tools=identity_only)
    stranger = ToolRegistry()
    stranger.add("refund", lambda account: None, scope="refunds:issue")
    with pytest.raises(ValueError, match="not in the Brand's scopes"):
        Brand(id="a", name="A", handler=hello, delegation=_delegation(), tools=stranger)


def test_settings_read_brand_tools_by_import_path_and_name_the_key() -> None:
    base = {
        "base_url": "https://p.example",
        "audience": "https://p.example/a2a",
        "store": "memory://",
    }
    settings = ProviderSettings.from_mapping(
        {
            **base,
            "brands": {
                "acme": {
                    "handler": "examples.bots:order_bot",
                    "tools": "tests.tools.test_registry:HOURS",
                }
            },
        }
    )
    assert settings.brands[0].tools is HOURS
    with pytest.raises(ConfigError, match=r"brands\.acme\.tools must be a ToolRegistry"):
        ProviderSettings.from_mapping(
            {
                **base,
                "brands": {
                    "acme": {"handler": "examples.bots:order_bot", "tools": "examples.bots:ORDERS"}
                },
            }
        )
    with pytest.raises(ConfigError, match=r"brands\.acme: account tools need"):
        ProviderSettings.from_mapping(
            {
                **base,
                "brands": {
                    "acme": {
                        "handler": "examples.bots:order_bot",
                        "tools": "tests.tools.test_registry:ACCOUNT",
                    }
                },
            }
        )


HOURS = ToolRegistry()
HOURS.add("opening_hours", lambda caller: "9-17", identity=True)
ACCOUNT = ToolRegistry()
ACCOUNT.add("list_orders", lambda account: [], scope="orders:read")
