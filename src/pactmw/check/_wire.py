"""What PACT puts on the wire beyond the A2A error contract (`pactmw.protocols.a2a`): the
challenge, the card path, the scheme kinds; and reading and describing what came back."""

from __future__ import annotations

from typing import Any

from pactmw.client import HttpResponse
from pactmw.core.encoding import json_loads
from pactmw.core.errors import MalformedInput
from pactmw.protocols.a2a import A2A_CONTENT_TYPE

CHALLENGE = 'Bearer realm="a2a"'
#: The text of the identity checks' messages: a greeting, which no bot needs account data for.
GREETING = "Hello, this is pactmw check."
CARD_PATH = "/.well-known/agent-card.json"
UNKNOWN_CONTEXT = "Unknown contextId"
SCHEME_KINDS = frozenset(
    {
        "httpAuthSecurityScheme",
        "oauth2SecurityScheme",
        "openIdConnectSecurityScheme",
        "apiKeySecurityScheme",
        "mtlsSecurityScheme",
    }
)

#: How much of a body a failure shows.
BODY_SHOWN = 200


def describe(response: HttpResponse) -> str:
    """`HTTP 401, no Content-Type, empty body` and the like, short."""
    content_type = response.header("content-type")
    shown = response.body[:BODY_SHOWN].decode("utf-8", "replace")
    more = "..." if len(response.body) > BODY_SHOWN else ""
    parts = [f"HTTP {response.status}"]
    parts.append(f"Content-Type {content_type}" if content_type else "no Content-Type")
    challenge = response.header("www-authenticate")
    if challenge is not None:
        parts.append(f"WWW-Authenticate {challenge}")
    parts.append(f"body {shown}{more}" if shown else "empty body")
    return ", ".join(parts)


def header_values(response: HttpResponse, name: str) -> list[str]:
    lowered = name.lower()
    return [value for key, value in response.headers if key.lower() == lowered]


def says_a2a(response: HttpResponse) -> bool:
    """Whether the answer's Content-Type names the A2A media type (an A2A body)."""
    return A2A_CONTENT_TYPE in (response.header("content-type") or "").lower()


def loads(body: bytes) -> Any:
    """The JSON body, or None if it is not JSON."""
    try:
        return json_loads(body)
    except MalformedInput:
        return None


def reply_id(response: HttpResponse) -> str | None:
    """The messageId of a reply's body, if it is one."""
    body = loads(response.body)
    message = body.get("message") if isinstance(body, dict) else None
    message_id = message.get("messageId") if isinstance(message, dict) else None
    return message_id if isinstance(message_id, str) else None


__all__ = [
    "BODY_SHOWN",
    "CARD_PATH",
    "CHALLENGE",
    "GREETING",
    "SCHEME_KINDS",
    "UNKNOWN_CONTEXT",
    "describe",
    "header_values",
    "loads",
    "reply_id",
    "says_a2a",
]
