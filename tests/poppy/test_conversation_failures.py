"""A Poppy message whose handling fails after its id was claimed (PAP-7.3-01: the id is the
User's, one conversation holds it) was never received, so its id is free again: the agent's
next attempt with the same id is a new message wherever it sends it, never `409
message_id_conflict`. Over real TLS on sqlite and PostgreSQL, driven by the SDK's own
personal agent: a bot that fails once, for a new conversation's first message and for an
existing conversation's, a turn abandoned past the turn timeout, and a retry refused after
its claim (a signed-out Session on the account's conversation)."""

from __future__ import annotations

import json
import secrets
import threading
from typing import Any

import attrs
import pytest
from personal_agent_protocol.errors import PersonalAgentProtocolError
from personal_agent_protocol.models import Message

from pactmw.core.http import Request
from pactmw.provider import Reply, Turn
from tests.poppy.support import run
from tests.provider import BodyReader
from tests.support.logs import pactmw_records
from tests.support.poppy_world import (
    BASE_URL,
    PoppyWorld,
    RunCounter,
    poppy_brand,
    world_fixture,
)

#: A message whose text starts so fails its first bot run only.
FAIL_ONCE = "fail once: "


class FailingOnceBot(RunCounter):
    """Counts its runs per message id; raises on the first run of a `FAIL_ONCE` message."""

    def __call__(self, turn: Turn) -> Reply:
        first = self.count(turn) == 1
        if first and turn.text.startswith(FAIL_ONCE):
            raise RuntimeError("the bot failed")
        return Reply(text=f"You said: {turn.text} ({len(turn.history)} before)")


BOT = FailingOnceBot()


world = world_fixture(attrs.evolve(poppy_brand(), handler=BOT))


def _message(text: str) -> Message:
    return Message(id="msg_" + secrets.token_hex(12), sender="agent", text=text)


async def _outcome(attempt: Any) -> Any:
    """The conversation a message went to, or the refusal's (status, code)."""
    try:
        return (await attempt).conversation_id
    except PersonalAgentProtocolError as refused:
        return (refused.status_code, refused.code)


def _company_texts(page: Any) -> list[str | None]:
    return [e.message.text for e in page.events if e.message and e.message.role == "company"]


FAILED = (503, "temporarily_unavailable")


def test_a_first_message_the_bot_failed_is_a_new_message_when_sent_again(
    world: PoppyWorld,
) -> None:
    """The bot fails a new conversation's first message: sent again to start a
    conversation, or to another conversation of the User, the message is received there."""

    async def scenario() -> tuple[list[Any], str, list[str | None], Message, Message]:
        async with world.conversing() as c:
            b = (await c.start(_message("Hi"))).conversation_id
            again, elsewhere = _message(FAIL_ONCE + "Hello"), _message(FAIL_ONCE + "Parcel?")
            outcomes = [
                await _outcome(c.start(again)),
                await _outcome(c.start(again)),
                await _outcome(c.start(elsewhere)),
                await _outcome(c.send(b, elsewhere)),
            ]
            page = await c.read_events(b)
            return outcomes, b, _company_texts(page), again, elsewhere

    outcomes, b, texts, again, elsewhere = run(scenario())
    assert outcomes[0] == FAILED
    assert isinstance(outcomes[1], str)  # its own conversation, started by the retry
    assert outcomes[1] != b
    assert outcomes[2:] == [FAILED, b]
    assert texts == ["You said: Hi (0 before)", f"You said: {elsewhere.text} (1 before)"]
    assert (BOT.runs[again.id], BOT.runs[elsewhere.id]) == (2, 2)


def test_a_later_message_the_bot_failed_may_go_to_another_conversation(
    world: PoppyWorld,
) -> None:
    """The same for an existing conversation's message: failed, it was never received, so
    another conversation of the User may receive it; received there, it is that one's."""

    async def scenario() -> tuple[list[Any], str, list[str | None], Message]:
        async with world.conversing() as c:
            a = (await c.start(_message("A"))).conversation_id
            b = (await c.start(_message("B"))).conversation_id
            moved = _message(FAIL_ONCE + "Where is it?")
            outcomes = [
                await _outcome(c.send(a, moved)),
                await _outcome(c.send(b, moved)),
                await _outcome(c.send(a, moved)),
            ]
            page = await c.read_events(b)
            return outcomes, b, _company_texts(page), moved

    outcomes, b, texts, moved = run(scenario())
    assert outcomes == [FAILED, b, (409, "message_id_conflict")]
    assert texts == ["You said: B (0 before)", f"You said: {moved.text} (1 before)"]
    assert BOT.runs[moved.id] == 2


def test_a_first_message_past_the_turn_timeout_is_a_new_message_elsewhere(
    world: PoppyWorld, caplog: pytest.LogCaptureFixture
) -> None:
    """A turn abandoned past `turn_timeout` (`503`, "send it again") leaves its message
    unreceived too: another worker, a Provider on the same store with a turn timeout, starts
    a conversation with it while its bot hangs; the message then goes to another
    conversation. The hung bot is let go only once that is answered."""
    hung = threading.Event()

    def hanging(turn: Turn) -> Reply:
        hung.wait()
        return Reply(text="too late")

    worker = world.other_provider(attrs.evolve(poppy_brand(), handler=hanging), turn_timeout=0.05)

    async def scenario() -> tuple[int, Any, str, Message]:
        async with world.conversing() as c:
            b = (await c.start(_message("Hi"))).conversation_id
            message = _message("Are you there?")
            dpop = await c.dpop("POST", c.endpoint)
            headers = (
                ("authorization", dpop["Authorization"]),
                ("dpop", dpop["DPoP"]),
                ("content-type", "application/json"),
            )
            path = c.endpoint.removeprefix(BASE_URL)
            body = json.dumps({"message": message.model_dump(exclude_none=True)}).encode()
            abandoned = worker.handle(Request("POST", path, headers=headers), BodyReader(body))
            sent = await _outcome(c.send(b, message))
            return abandoned.status, sent, b, message

    try:
        status, sent, b, message = run(scenario())
    finally:
        hung.set()
        worker.store.close()
    assert status == 503
    abandoned = [
        r.getMessage() for r in pactmw_records(caplog.records) if "abandoned" in r.getMessage()
    ]
    assert len(abandoned) == 1, abandoned  # the turn timed out, nothing else failed
    assert sent == b
    assert BOT.runs[message.id] == 1
