"""Brands and the support-bot hook: what a turn handler receives and may return."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from attrs import field, frozen

from pactmw.protocols.identity import PersonalAgent
from pactmw.store.base import Turn as StoredTurn


@frozen
class Skill:
    """An Agent Card skill (informational)."""

    id: str
    name: str
    description: str
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()

    def to_card(self) -> dict[str, Any]:
        card: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "tags": list(self.tags),
        }
        if self.examples:
            card["examples"] = list(self.examples)
        return card


@frozen
class Reply:
    """What a handler may return instead of plain text.

    `data` become A2A data parts after the text part; `close` ends the conversation after
    this reply (later messages to it get UNSUPPORTED_OPERATION).
    """

    text: str
    data: tuple[Mapping[str, Any], ...] = ()
    close: bool = False


@frozen
class Turn:
    """One user message, as the Brand's bot sees it.

    `history` holds the earlier answered turns of this conversation, oldest first.
    `caller` is the verified personal agent; key the user by `caller.actor_id`.
    """

    text: str
    parts: tuple[Mapping[str, Any], ...] = field(repr=False)
    context_id: str
    message_id: str
    caller: PersonalAgent
    brand: Brand
    history: tuple[StoredTurn, ...] = field(repr=False)


HandlerResult = str | Reply
TurnHandler = Callable[[Turn], HandlerResult | Awaitable[HandlerResult]]


@frozen
class Brand:
    """A Brand served by the Provider at `{base_url}/a2a/{id}`."""

    id: str
    name: str
    handler: TurnHandler = field(repr=False)
    description: str = ""
    skills: tuple[Skill, ...] = ()
    version: str = "0.1.0"
