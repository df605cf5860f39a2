"""Talking to a Brand's agent: `message:send` and the task operations (PACT §2.2, §4, §5.5).

The pure part builds `HttpRequest`s and reads `HttpResponse`s into `MessageReply`/`StepUp` or
a typed exception; `send_flow` adds the retry rules; `A2AClient` and `AsyncA2AClient` only
choose the driver.

Retries (PACT §4.3): the `messageId` is fixed before the first attempt and every resend uses
it, so a Provider answers a resend with the reply it stored, without running its agent again.
That guarantee is keyed on `(contextId, messageId)`: a message without `contextId` opens a new
conversation each time it arrives, so after a failure that may have reached the Provider it is
not resent unless `RetryPolicy.retry_new_conversations` says so.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeGuard, TypeVar
from urllib.parse import quote, urlencode

from attrs import field, frozen

from pactmw.client.card import AgentCard, afetch_card, card_interface_url, fetch_card
from pactmw.client.errors import ResponseInvalid
from pactmw.client.flow import (
    AsyncDriver,
    BlockingDriver,
    Flow,
    RetryPolicy,
    TokenSource,
    check_token_source,
    exchange,
)
from pactmw.client.http import HttpRequest, HttpResponse, check_url, is_absolute_http_url
from pactmw.client.responses import raise_for_status
from pactmw.client.transport import AsyncioTransport, AsyncTransport, SyncTransport, Transport
from pactmw.core.encoding import json_dumps
from pactmw.core.http import DELEGATION_HEADER

A2A_VERSION = "1.0"
#: A2A 1.0: the extensions a request activates, as a comma-separated list of URIs.
EXTENSIONS_HEADER = "A2A-Extensions"
AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"
MISSING_SCOPES = "pact.missingScopes"
VERIFICATION_URI_COMPLETE = "pact.verificationUriComplete"
RECEIPT = "pact.receipt"
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


@frozen
class Receipt:
    """A reply's receipt as received: the compact JWS and the claims. Not yet verified: pass it
    to `verify_receipt`."""

    jws: str = field(repr=False)
    claims: Mapping[str, Any]


@frozen
class MessageReply:
    """The agent's answer. `text` joins its text parts; `message_id` is the reply's own id;
    `receipt` is there when the turn ran under a delegation token."""

    message: Mapping[str, Any] = field(repr=False)
    text: str
    context_id: str
    message_id: str
    receipt: Receipt | None = None


@frozen
class StepUp:
    """The turn needs scopes the delegation token lacks (or no token was sent): PACT §5.5.

    Show `verification_uri_complete` to the user (or run the device flow for
    `missing_scopes`), then resend: same `context_id`, same `sent_message_id` (the Provider
    kept the message unanswered) and the new delegation token.
    """

    missing_scopes: tuple[str, ...]
    verification_uri_complete: str
    context_id: str
    task_id: str
    text: str
    sent_message_id: str
    task: Mapping[str, Any] = field(repr=False)


SendResult = MessageReply | StepUp


# -- building requests --------------------------------------------------------------------------


def user_message(
    text: str,
    *,
    message_id: str,
    context_id: str | None = None,
    extra_parts: Sequence[Mapping[str, Any]] = (),
    metadata: Mapping[str, Any] | None = None,
    extensions: Sequence[str] = (),
) -> dict[str, Any]:
    """An A2A user message: text parts are `{text, mediaType: "text/plain"}`; `extensions`
    (URIs) and `metadata` only when given."""
    message: dict[str, Any] = {
        "messageId": message_id,
        "role": "ROLE_USER",
        "parts": [{"text": text, "mediaType": "text/plain"}, *(dict(p) for p in extra_parts)],
    }
    if context_id is not None:
        message["contextId"] = context_id
    if extensions:
        message["extensions"] = list(extensions)
    if metadata is not None:
        message["metadata"] = dict(metadata)
    return message


def a2a_headers(
    bearer: str, delegation_token: str | None = None, extensions: Sequence[str] = ()
) -> tuple[tuple[str, str], ...]:
    """The headers of every A2A call: PA JWT, `A2A-Version: 1.0`, JSON in and out; the
    delegation token and `A2A-Extensions` when given."""
    headers = [
        ("Authorization", f"Bearer {bearer}"),
        ("A2A-Version", A2A_VERSION),
        ("Content-Type", "application/json"),
        ("Accept", "application/a2a+json, application/json"),
    ]
    if delegation_token is not None:
        headers.append((DELEGATION_HEADER, f"Bearer {delegation_token}"))
    if extensions:
        headers.append((EXTENSIONS_HEADER, ", ".join(extensions)))
    return tuple(headers)


def send_request(
    url: str,
    message: Mapping[str, Any],
    *,
    bearer: str,
    delegation_token: str | None = None,
    extensions: Sequence[str] = (),
) -> HttpRequest:
    """POST `{interface URL}/message:send` with `{"message": ...}`; `extensions` are
    activated through the `A2A-Extensions` header."""
    return HttpRequest(
        "POST",
        f"{url.rstrip('/')}/message:send",
        headers=a2a_headers(bearer, delegation_token, extensions),
        body=json_dumps({"message": dict(message)}),
    )


# -- reading responses --------------------------------------------------------------------------


def _invalid(response: HttpResponse, what: str) -> ResponseInvalid:
    return ResponseInvalid(f"{response.url}: {what}")


def _text_of(message: Mapping[str, Any]) -> str:
    """The message's text parts joined; a step-up's status message is not validated (it only
    carries text to show), so parts that are not a list of objects give none."""
    parts = message.get("parts")
    if not isinstance(parts, list):
        return ""
    return "\n".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def parse_receipt(value: Any) -> Receipt:
    """A `pact.receipt` value: `{jws: <compact JWS>, claims: {...}}` (shape only)."""
    if (
        not isinstance(value, Mapping)
        or not isinstance(value.get("jws"), str)
        or not _COMPACT_JWS.fullmatch(value["jws"])
        or not isinstance(value.get("claims"), Mapping)
    ):
        raise ResponseInvalid("pact.receipt must be {jws: compact JWS, claims: object}")
    return Receipt(jws=value["jws"], claims=MappingProxyType(dict(value["claims"])))


def identifies_agent_message(message: Any) -> TypeGuard[dict[str, Any]]:
    """Whether `message` is an object that names itself (a non-empty `messageId`), its
    conversation (a non-empty `contextId`) and its sender (`ROLE_AGENT`), as every agent
    reply must. Its parts are the caller's to check: a client takes any, a conformance check
    wants exactly one text part."""
    return (
        isinstance(message, dict)
        and isinstance(message.get("messageId"), str)
        and bool(message["messageId"])
        and isinstance(message.get("contextId"), str)
        and bool(message["contextId"])
        and message.get("role") == "ROLE_AGENT"
    )


def _agent_message(response: HttpResponse, message: Any) -> Mapping[str, Any]:
    if (
        not identifies_agent_message(message)
        or not isinstance(message.get("parts"), list)
        or not message["parts"]
        or not all(isinstance(part, dict) for part in message["parts"])
    ):
        raise _invalid(response, "not an agent message (messageId, contextId, role, parts)")
    if "metadata" in message and not isinstance(message["metadata"], dict):
        raise _invalid(response, "message metadata must be an object")
    return message


def _step_up(response: HttpResponse, task: Any, sent_message_id: str) -> StepUp:
    if not isinstance(task, dict) or not isinstance(task.get("status"), dict):
        raise _invalid(response, "task must be an object with a status")
    state = task["status"].get("state")
    if state != AUTH_REQUIRED:
        raise _invalid(response, f"unexpected task state {state!r} (only step-up tasks)")
    metadata = task.get("metadata")
    missing = metadata.get(MISSING_SCOPES) if isinstance(metadata, dict) else None
    link = metadata.get(VERIFICATION_URI_COMPLETE) if isinstance(metadata, dict) else None
    if (
        not isinstance(missing, list)
        or not missing
        or not all(isinstance(s, str) and s for s in missing)
        or not is_absolute_http_url(link)
    ):
        raise _invalid(response, "step-up task without missing scopes and a verification link")
    check_url(str(link))  # shown to the user: https (or loopback http) only
    if not isinstance(task.get("id"), str) or not isinstance(task.get("contextId"), str):
        raise _invalid(response, "task needs id and contextId")
    status_message = task["status"].get("message")
    text = _text_of(status_message) if isinstance(status_message, dict) else ""
    return StepUp(
        missing_scopes=tuple(missing),
        verification_uri_complete=str(link),
        context_id=task["contextId"],
        task_id=task["id"],
        text=text,
        sent_message_id=sent_message_id,
        task=MappingProxyType(task),
    )


def parse_send_response(
    response: HttpResponse, *, sent_message_id: str, context_id: str | None = None
) -> SendResult:
    """Read a `message:send` answer: strictly `{"message"}` or `{"task"}` (a step-up).

    Non-2xx answers raise their typed error. With `context_id`, the reply must belong to it.
    """
    raise_for_status(response)
    body = response.json_object()
    if set(body) == {"task"}:
        result: SendResult = _step_up(response, body["task"], sent_message_id)
    elif set(body) == {"message"}:
        message = _agent_message(response, body["message"])
        metadata = message.get("metadata") or {}
        receipt = parse_receipt(metadata[RECEIPT]) if RECEIPT in metadata else None
        result = MessageReply(
            message=MappingProxyType(message),
            text=_text_of(message),
            context_id=message["contextId"],
            message_id=message["messageId"],
            receipt=receipt,
        )
    else:
        raise _invalid(response, f"expected exactly 'message' or 'task', got {sorted(body)}")
    if context_id is not None and result.context_id != context_id:
        raise _invalid(response, "the reply belongs to another contextId")
    return result


# -- flows --------------------------------------------------------------------------------------


def send_flow(
    url: str,
    token: TokenSource,
    text: str,
    *,
    context_id: str | None,
    message_id: str | None,
    delegation_token: str | None,
    extra_parts: Sequence[Mapping[str, Any]],
    policy: RetryPolicy,
    metadata: Mapping[str, Any] | None = None,
    extensions: Sequence[str] = (),
) -> Flow[SendResult]:
    """Send one message; resend with the same `messageId` within `policy`."""
    fixed_id = message_id or str(uuid.uuid4())
    message = user_message(
        text,
        message_id=fixed_id,
        context_id=context_id,
        extra_parts=extra_parts,
        metadata=metadata,
        extensions=extensions,
    )
    response = yield from exchange(
        lambda: send_request(
            url,
            message,
            bearer=token(),
            delegation_token=delegation_token,
            extensions=extensions,
        ),
        policy,
        idempotent=context_id is not None or policy.retry_new_conversations,
    )
    return parse_send_response(response, sent_message_id=fixed_id, context_id=context_id)


def _json_call(
    method: str,
    url: str,
    token: TokenSource,
    policy: RetryPolicy,
    body: Mapping[str, Any] | None = None,
) -> Flow[Mapping[str, Any]]:
    response = yield from exchange(
        lambda: HttpRequest(
            method,
            url,
            headers=a2a_headers(token()),
            body=json_dumps(dict(body)) if body is not None else b"",
        ),
        policy,
        idempotent=True,
    )
    raise_for_status(response)
    return response.json_object()


def task_url(url: str, task_id: str, suffix: str = "") -> str:
    return f"{url.rstrip('/')}/tasks/{quote(task_id, safe='')}{suffix}"


def list_tasks_url(url: str, page_size: int | None) -> str:
    query = "" if page_size is None else "?" + urlencode({"pageSize": page_size})
    return f"{url.rstrip('/')}/tasks{query}"


# -- the clients --------------------------------------------------------------------------------


_Client = TypeVar("_Client", bound="_Interface")


class _Interface:
    """What both clients share: the interface URL, the token, the retry policy, and the flow
    of each call; `A2AClient` and `AsyncA2AClient` only drive them."""

    def __init__(self, url: str, token: TokenSource, retry: RetryPolicy | None) -> None:
        check_url(url)
        check_token_source(token)
        self.url = url.rstrip("/")
        self.token = token
        self.retry = retry or RetryPolicy()

    @classmethod
    def from_card(
        cls: type[_Client], card: AgentCard, token: TokenSource, **options: Any
    ) -> _Client:
        """For the card's HTTP+JSON 1.0 interface."""
        return cls(card_interface_url(card), token, **options)

    def _get_task(self, task_id: str) -> Flow[Mapping[str, Any]]:
        return _json_call("GET", task_url(self.url, task_id), self.token, self.retry)

    def _cancel_task(self, task_id: str) -> Flow[Mapping[str, Any]]:
        url = task_url(self.url, task_id, ":cancel")
        return _json_call("POST", url, self.token, self.retry, {})

    def _list_tasks(self, page_size: int | None) -> Flow[Mapping[str, Any]]:
        return _json_call("GET", list_tasks_url(self.url, page_size), self.token, self.retry)


def _card_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The client's options its card fetch takes too (the same transport, retries and sleep)."""
    return {name: options[name] for name in ("transport", "retry", "sleep") if name in options}


class A2AClient(_Interface):
    """A personal agent's blocking client for one Brand's interface URL.

    `token` returns a fresh personal-agent JWT per call (`AgentSigner.for_user(...)`).
    Thread-safe: it holds no connection and no conversation state.
    """

    def __init__(
        self,
        url: str,
        token: TokenSource,
        *,
        transport: Transport | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(url, token, retry)
        self.driver = BlockingDriver(transport or SyncTransport(), sleep)

    @classmethod
    def connect(cls, card_url: str, token: TokenSource, **options: Any) -> A2AClient:
        """Fetch the card at `card_url` (following redirects), then as `from_card`."""
        card = fetch_card(card_url, **_card_options(options))
        return cls.from_card(card, token, **options)

    def send(
        self,
        text: str,
        *,
        context_id: str | None = None,
        message_id: str | None = None,
        delegation_token: str | None = None,
        extra_parts: Sequence[Mapping[str, Any]] = (),
        metadata: Mapping[str, Any] | None = None,
        extensions: Sequence[str] = (),
    ) -> SendResult:
        """Send `text`; continue a conversation with the `context_id` of an earlier reply.

        `extensions` (URIs) are activated for this request, in the `A2A-Extensions` header
        and the message's `extensions`; `metadata` is the message's own (an extension's data,
        e.g. a Parafé consent: see `pactmw.protocols.parafe.ConsentPresenter.data`). A resend
        carries the same message, metadata included.

        Returns `MessageReply`, or `StepUp` when the turn needs delegated scopes. Raises an
        `A2AErrorResponse` subclass, `IdentityRejected`, `DelegationTokenRejected`, `RateLimited`,
        `HTTPError`, `NetworkError` or `ResponseInvalid`.
        """
        return self.driver.run(
            send_flow(
                self.url,
                self.token,
                text,
                policy=self.retry,
                context_id=context_id,
                message_id=message_id,
                delegation_token=delegation_token,
                extra_parts=extra_parts,
                metadata=metadata,
                extensions=extensions,
            )
        )

    def get_task(self, task_id: str) -> Mapping[str, Any]:
        """GET `tasks/{id}` (PACT Providers answer `TaskNotFound`)."""
        return dict(self.driver.run(self._get_task(task_id)))

    def cancel_task(self, task_id: str) -> Mapping[str, Any]:
        """POST `tasks/{id}:cancel`."""
        return dict(self.driver.run(self._cancel_task(task_id)))

    def list_tasks(self, page_size: int | None = None) -> Mapping[str, Any]:
        """GET `tasks` (always empty on a PACT Provider; `InvalidParams` for a bad size)."""
        return dict(self.driver.run(self._list_tasks(page_size)))


class AsyncA2AClient(_Interface):
    """`A2AClient` for asyncio: the same flows, driven by `AsyncioTransport`."""

    def __init__(
        self,
        url: str,
        token: TokenSource,
        *,
        transport: AsyncTransport | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(url, token, retry)
        self.driver = AsyncDriver(transport or AsyncioTransport(), sleep)

    @classmethod
    async def connect(cls, card_url: str, token: TokenSource, **options: Any) -> AsyncA2AClient:
        card = await afetch_card(card_url, **_card_options(options))
        return cls.from_card(card, token, **options)

    async def send(
        self,
        text: str,
        *,
        context_id: str | None = None,
        message_id: str | None = None,
        delegation_token: str | None = None,
        extra_parts: Sequence[Mapping[str, Any]] = (),
        metadata: Mapping[str, Any] | None = None,
        extensions: Sequence[str] = (),
    ) -> SendResult:
        """See `A2AClient.send`."""
        return await self.driver.run(
            send_flow(
                self.url,
                self.token,
                text,
                policy=self.retry,
                context_id=context_id,
                message_id=message_id,
                delegation_token=delegation_token,
                extra_parts=extra_parts,
                metadata=metadata,
                extensions=extensions,
            )
        )

    async def get_task(self, task_id: str) -> Mapping[str, Any]:
        return dict(await self.driver.run(self._get_task(task_id)))

    async def cancel_task(self, task_id: str) -> Mapping[str, Any]:
        return dict(await self.driver.run(self._cancel_task(task_id)))

    async def list_tasks(self, page_size: int | None = None) -> Mapping[str, Any]:
        return dict(await self.driver.run(self._list_tasks(page_size)))


__all__ = [
    "A2A_VERSION",
    "AUTH_REQUIRED",
    "DELEGATION_HEADER",
    "EXTENSIONS_HEADER",
    "MISSING_SCOPES",
    "RECEIPT",
    "VERIFICATION_URI_COMPLETE",
    "A2AClient",
    "AsyncA2AClient",
    "MessageReply",
    "Receipt",
    "SendResult",
    "StepUp",
    "a2a_headers",
    "identifies_agent_message",
    "list_tasks_url",
    "parse_receipt",
    "parse_send_response",
    "send_flow",
    "send_request",
    "task_url",
    "user_message",
]
