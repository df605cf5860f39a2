"""What a Poppy conversation keeps and shows (§7): who converses, the ids, the turn's record
in the store, and the wire shapes of the company's messages, the state and the receipt.

Pure values and functions: the conversation endpoints (`_conversations`) and the turn runner
(`_conversation_turns`) build on them, so both render the same shapes.

Ids: a conversation's public id is `cnv_` and the hex of its store id (a UUID); the first
message's conversation id is derived from its owner and the message id, so a retried
`POST E` finds the conversation it made. Event and company message ids are digests of the
conversation, the message and the position, so a turn always numbers its events the same.
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from attrs import frozen

from pactmw.core.encoding import json_dumps, json_loads
from pactmw.core.errors import MalformedInput
from pactmw.core.http import Response
from pactmw.protocols.poppy import InboundMessage
from pactmw.provider.delegated._responses import NO_STORE, json_response
from pactmw.provider.poppy._session_check import PoppyCaller
from pactmw.provider.turn_tools import BoundTools

CONVERSATION_PREFIX = "cnv_"
_UUID_HEX = re.compile(r"[0-9a-f]{32}")
#: Fixed: conversation ids derived from (Brand, agent, User ID, first message id).
_ID_NAMESPACE = uuid.UUID("5b0a8a57-7c2e-4c11-9a55-1f8f0f6b3e21")
_RECORD_VERSION = 1

__all__ = [
    "CONVERSATION_PREFIX",
    "Receipt",
    "TurnRecord",
    "company_message",
    "conversation_state",
    "derived_context_id",
    "message_parts",
    "public_id",
    "store_context_id",
]


def _now_text(now: float) -> str:
    return (
        datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def _event_id(context_id: str, message_id: str, index: int) -> str:
    """A stable event id: the same turn always numbers its events the same."""
    digest = hashlib.sha256(f"{context_id}\n{message_id}\n{index}".encode()).digest()
    return "evt_" + base64.urlsafe_b64encode(digest[:18]).decode("ascii")


def public_id(context_id: str) -> str:
    """The Poppy conversation id of the store's conversation `context_id`."""
    return CONVERSATION_PREFIX + uuid.UUID(context_id).hex


def store_context_id(conversation_id: str) -> str | None:
    """The store's id of a Poppy conversation id, None when it cannot be one of ours."""
    if not conversation_id.startswith(CONVERSATION_PREFIX):
        return None
    rest = conversation_id[len(CONVERSATION_PREFIX) :]
    return str(uuid.UUID(rest)) if _UUID_HEX.fullmatch(rest) else None


def derived_context_id(agent: PoppyCaller, message_id: str) -> str:
    """The store id of the conversation `message_id` starts: the same for a retry."""
    owner = f"{agent.brand_id}\n{agent.client_id}\n{agent.user_id}\n{message_id}"
    return str(uuid.uuid5(_ID_NAMESPACE, owner))


@frozen
class TurnRecord:
    """What the store keeps as a Poppy turn's reply: the agent's message as received (to
    tell a replay from a conflict) and the turn's events, the agent's message first."""

    message: Mapping[str, Any]
    events: tuple[dict[str, Any], ...]

    @classmethod
    def make(
        cls,
        context_id: str,
        message: InboundMessage,
        company_events: list[dict[str, Any]],
        now: float,
    ) -> TurnRecord:
        created_at = _now_text(now)
        received = {**message.content(), "role": "user"}
        events = [{"type": "message", "message": received}, *company_events]
        numbered = tuple(
            {"id": _event_id(context_id, message.id, index), "created_at": created_at, **event}
            for index, event in enumerate(events)
        )
        return cls(message=message.content(), events=numbered)

    def dump(self) -> bytes:
        return json_dumps(
            {"poppy": _RECORD_VERSION, "message": self.message, "events": self.events}
        )

    @classmethod
    def load(cls, stored: bytes) -> TurnRecord | None:
        """The record, or None for a reply this module did not write (a PACT turn)."""
        try:
            document = json_loads(stored)
        except MalformedInput:
            return None
        if not isinstance(document, dict) or document.get("poppy") != _RECORD_VERSION:
            return None
        return cls(message=document["message"], events=tuple(document["events"]))


def company_message(
    context_id: str,
    message_id: str,
    text: str,
    data: tuple[Mapping[str, Any], ...] | list[Any],
    tools: BoundTools | None,
) -> dict[str, Any]:
    """The company's message (PAP-7.7-02: `sender` agent, the bot speaks)."""
    digest = hashlib.sha256(f"{context_id}\n{message_id}\nreply".encode()).digest()
    company: dict[str, Any] = {
        "id": "msg_" + base64.urlsafe_b64encode(digest[:18]).decode("ascii"),
        "role": "company",
        "sender": "agent",
        "text": text,
    }
    members = [dict(item) for item in data]
    if tools is not None:
        # What the bot's write tools did, next to its text (as in PACT's reply).
        members.extend(dict(report) for report in tools.reports)
    if members:
        company["data"] = members[0] if len(members) == 1 else {"items": members}
    return company


def message_parts(message: InboundMessage) -> list[Mapping[str, Any]]:
    """The message as A2A-style parts, the shape `turn.parts` has for PACT."""
    parts: list[Mapping[str, Any]] = []
    if message.text is not None:
        parts.append({"text": message.text})
    if message.data is not None:
        parts.append({"data": dict(message.data)})
    if message.context is not None:
        parts.append({"data": {"context": dict(message.context)}})
    return parts


def conversation_state(closed: bool, working: bool = False) -> dict[str, str]:
    """The conversation's `status` and `responder` members of a receipt or a page."""
    status = "closed" if closed else "working" if working else "idle"
    return {"status": status, "responder": "agent"}


@frozen
class Receipt:
    """What a POST did to a conversation, answered as a receipt or, asked, as a page."""

    context_id: str
    closed: bool
    status: int
    working: bool = False

    def response(self) -> Response:
        body = {
            "conversation_id": public_id(self.context_id),
            **conversation_state(self.closed, self.working),
        }
        return json_response(body, status=self.status, extra=NO_STORE)
