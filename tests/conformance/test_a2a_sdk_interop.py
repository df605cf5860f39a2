"""Interop with the official A2A Python SDK (a2a-sdk 1.3.0) over the HTTP+JSON binding.

The SDK's client discovers each target's Agent Card with `A2ACardResolver`, picks the
HTTP+JSON interface with `ClientFactory`, and talks to it with the personal-agent JWT in an
`Authorization` header on its `httpx.AsyncClient`. Its parsers are lenient (unknown fields are
dropped), so the card and the reply are also parsed strictly here: every field we send must
be one the SDK's protobuf schema knows.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import (
    A2ACardResolver,
    A2AClientError,
    Client,
    ClientConfig,
    ClientFactory,
    create_client,
)
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InvalidParamsError,
    ListTasksRequest,
    Message,
    Part,
    PushNotificationNotSupportedError,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    TaskNotFoundError,
)
from a2a.utils.constants import TransportProtocol
from google.protobuf.json_format import ParseDict

from tests.conformance.helpers import Target, TestPA, new_id
from tests.support.net import loopback_async_client

T = TypeVar("T")


def run(factory: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(factory(), timeout=60))


def _config(http: httpx.AsyncClient) -> ClientConfig:
    return ClientConfig(
        supported_protocol_bindings=[TransportProtocol.HTTP_JSON],
        httpx_client=http,
    )


def _request(text: str, *, context_id: str = "", message_id: str | None = None) -> Any:
    return SendMessageRequest(
        message=Message(
            message_id=message_id or new_id(),
            context_id=context_id,
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
        )
    )


async def _send(client: Client, request: Any) -> Message:
    events: list[StreamResponse] = [event async for event in client.send_message(request)]
    assert len(events) == 1
    assert events[0].HasField("message"), events
    return events[0].message


def test_sdk_resolves_the_card(target: Target) -> None:
    async def scenario() -> AgentCard:
        async with loopback_async_client() as http:  # the card needs no token
            return await A2ACardResolver(http, target.interface()).get_agent_card()

    card = run(scenario)
    assert card.name == "Acme Support"
    interface = card.supported_interfaces[0]
    assert interface.url == target.interface()
    assert interface.protocol_binding == TransportProtocol.HTTP_JSON
    assert interface.protocol_version == "1.0"
    assert not card.capabilities.streaming
    assert not card.capabilities.push_notifications
    assert not card.capabilities.extended_agent_card
    scheme = card.security_schemes["platformJwt"]
    assert scheme.WhichOneof("scheme") == "http_auth_security_scheme"
    assert scheme.http_auth_security_scheme.scheme == "Bearer"
    assert scheme.http_auth_security_scheme.bearer_format == "JWT"
    assert list(card.security_requirements[0].schemes) == ["platformJwt"]
    assert [skill.id for skill in card.skills] == ["orders"]
    assert list(card.default_input_modes) == ["text/plain"]
    assert card.provider.url == target.base_url


def test_card_parses_strictly_as_the_sdk_agent_card(http: httpx.Client, target: Target) -> None:
    """No field of our card is unknown to the SDK's AgentCard (lenient parsing drops those)."""
    for brand in ("acme", "globex"):
        data = http.get(target.card_url(brand)).json()
        ParseDict(data, AgentCard())  # raises ParseError on an unknown or mistyped field


def test_sdk_sends_messages_over_http_json(target: Target, pa: TestPA) -> None:
    first_id = new_id()

    async def scenario() -> tuple[Message, Message, Message]:
        headers = {"Authorization": f"Bearer {pa.token('sdk-user')}"}
        async with loopback_async_client(headers=headers, timeout=30) as http:
            client = await create_client(target.interface(), client_config=_config(http))
            first = await _send(client, _request("hello from the SDK", message_id=first_id))
            second = await _send(client, _request("and again", context_id=first.context_id))
            retry = await _send(
                client,
                _request("hello from the SDK", context_id=first.context_id, message_id=first_id),
            )
            await client.close()
            return first, second, retry

    first, second, retry = run(scenario)
    assert first.role == Role.ROLE_AGENT
    assert [part.text for part in first.parts] == ["acme #1: hello from the SDK"]
    assert first.context_id
    assert not first.task_id
    assert second.context_id == first.context_id
    assert [part.text for part in second.parts] == ["acme #2: and again"]
    assert retry == first  # the stored reply, same messageId
    assert target.runs(first_id, first.context_id) == 1


def test_sdk_factory_with_a_resolved_card(target: Target, pa: TestPA) -> None:
    """`ClientFactory(config).create(card)` with a card fetched through the same client."""

    async def scenario() -> Message:
        headers = {"Authorization": f"Bearer {pa.token('sdk-user')}"}
        async with loopback_async_client(headers=headers, timeout=30) as http:
            card = await A2ACardResolver(http, target.interface("globex")).get_agent_card()
            client = ClientFactory(_config(http)).create(card)
            reply = await _send(client, _request("hi globex"))
            await client.close()
            return reply

    assert [part.text for part in run(scenario).parts] == ["globex #1: hi globex"]


def test_reply_parses_strictly_as_send_message_response(
    http: httpx.Client, target: Target, pa: TestPA
) -> None:
    body = {
        "message": {
            "messageId": new_id(),
            "role": "ROLE_USER",
            "parts": [{"text": "strict"}],
        }
    }
    response = http.post(
        f"{target.interface()}/message:send",
        content=json.dumps(body),
        headers={"Authorization": f"Bearer {pa.token()}", "A2A-Version": "1.0"},
    )
    assert response.status_code == 200
    parsed = ParseDict(response.json(), SendMessageResponse())
    assert parsed.HasField("message")
    assert parsed.message.role == Role.ROLE_AGENT


def test_sdk_maps_our_errors(target: Target, pa: TestPA) -> None:
    """Our A2A errors reach SDK users as the SDK's typed errors, with our messages."""

    async def scenario() -> dict[str, BaseException | Any]:
        headers = {"Authorization": f"Bearer {pa.token('sdk-user')}"}
        outcomes: dict[str, BaseException | Any] = {}
        async with loopback_async_client(headers=headers, timeout=30) as http:
            client = await create_client(target.interface(), client_config=_config(http))
            calls: dict[str, Callable[[], Awaitable[Any]]] = {
                "get_task": lambda: client.get_task(GetTaskRequest(id="t-1")),
                "cancel_task": lambda: client.cancel_task(CancelTaskRequest(id="t-1")),
                "list_tasks": lambda: client.list_tasks(ListTasksRequest(page_size=7)),
                "push": lambda: client.get_task_push_notification_config(
                    GetTaskPushNotificationConfigRequest(task_id="t-1", id="c1")
                ),
                "unknown_context": lambda: _send(client, _request("x", context_id=new_id())),
                "boom": lambda: _send(client, _request("boom")),
            }
            for name, call in calls.items():
                try:
                    outcomes[name] = await call()
                except Exception as exc:
                    outcomes[name] = exc
            await client.close()
        return outcomes

    outcomes = run(scenario)
    assert isinstance(outcomes["get_task"], TaskNotFoundError), outcomes
    assert outcomes["get_task"].message == "Task not found: t-1"
    assert isinstance(outcomes["cancel_task"], TaskNotFoundError), outcomes
    assert outcomes["cancel_task"].message == "Task not found: t-1"
    listed = outcomes["list_tasks"]
    assert not isinstance(listed, BaseException), outcomes
    assert list(listed.tasks) == []
    assert listed.page_size == 7
    assert listed.total_size == 0
    assert listed.next_page_token == ""
    assert isinstance(outcomes["push"], PushNotificationNotSupportedError), outcomes
    assert isinstance(outcomes["unknown_context"], InvalidParamsError), outcomes
    assert outcomes["unknown_context"].message == "Unknown contextId"
    # Interop note: the SDK's InternalError reason is INTERNAL_ERROR, the PACT reference's is
    # INTERNAL, so the SDK cannot type our 500 and raises its generic client error.
    assert isinstance(outcomes["boom"], A2AClientError), outcomes
    assert "500" in str(outcomes["boom"])


def test_sdk_without_a_token_gets_the_401(target: Target) -> None:
    async def scenario() -> BaseException | None:
        async with loopback_async_client(timeout=30) as http:
            client = await create_client(target.interface(), client_config=_config(http))
            try:
                await _send(client, _request("no token"))
            except Exception as exc:
                return exc
            finally:
                await client.close()
        return None

    error = run(scenario)
    assert isinstance(error, A2AClientError), error
    assert "401" in str(error)


@pytest.mark.parametrize("version", ["1.0", "0.3"])
def test_sdk_version_header_is_ignored(target: Target, pa: TestPA, version: str) -> None:
    """The SDK sends `A2A-Version: 1.0`; whatever a client sends, the Provider answers."""

    async def scenario() -> Message:
        headers = {"Authorization": f"Bearer {pa.token()}", "A2A-Version": version}
        async with loopback_async_client(headers=headers, timeout=30) as http:
            client = await create_client(target.interface(), client_config=_config(http))
            reply = await _send(client, _request("versioned"))
            await client.close()
            return reply

    assert run(scenario).role == Role.ROLE_AGENT
