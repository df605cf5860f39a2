"""`message:send` turns that fail, on a store that fails too: a claim the store could not give
up, and the conversation a failed first message started. Through both drivers and both
embedded stores; the store is the real one but for the faults a test plans.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pactmw.core.http import Response
from pactmw.provider import Brand, Provider
from pactmw.store.base import StoreUnavailable
from pactmw.store.memory import MemoryStore
from pactmw.store.sqlite import SqliteStore
from tests.provider import Drive, Kit, assert_a2a, assert_bare, assert_error, header, message_body
from tests.support.a2a import PENDING
from tests.support.logs import assert_logs_tame

if TYPE_CHECKING:
    from pactmw.store.base import Store

    _StoreBase = Store
else:
    _StoreBase = object

#: A lease that is not whole seconds: `Retry-After` rounds it up.
LEASE = 30.5


class Faults(_StoreBase):
    """Mixed into a real store: releasing a claim of a message in `down` fails as a store
    that is down fails."""

    down: set[str]

    def release_claim(self, *, context_id: str, message_id: str, claimed_at: float) -> None:
        if message_id in self.down:
            raise StoreUnavailable("the database is down")
        super().release_claim(context_id=context_id, message_id=message_id, claimed_at=claimed_at)


class FaultyMemory(Faults, MemoryStore):
    pass


class FaultySqlite(Faults, SqliteStore):
    pass


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Faults:
    faulty: Faults
    faulty = FaultyMemory() if request.param == "memory" else FaultySqlite(tmp_path / "s.db")
    faulty.down = set()
    return faulty


class FailingOnce:
    """A bot that fails the first time it sees a message id, and records the contexts."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}
        self.contexts: list[str] = []

    def __call__(self, turn: Any) -> str:
        self.contexts.append(turn.context_id)
        self.runs[turn.message_id] = self.runs.get(turn.message_id, 0) + 1
        if self.runs[turn.message_id] == 1 and turn.text.startswith("fail"):
            raise RuntimeError("the bot failed")
        return "fine"


def provider_on(kit: Kit, store: Faults, bot: FailingOnce) -> Provider:
    brand = Brand(id="acme", name="Acme", handler=bot)
    return kit.provider(brand, store=store, claim_lease_seconds=LEASE)


def send(
    kit: Kit,
    provider: Provider,
    drive: Drive,
    text: str,
    message_id: str,
    context_id: str | None = None,
) -> Response:
    request = kit.request("POST", "/a2a/acme/message:send", token=kit.token())
    return drive(
        provider, request, message_body(text, message_id=message_id, context_id=context_id)
    )


def test_a_release_the_store_refused_says_when_to_send_again_and_is_logged_once(
    memory_kit: Kit, drive: Drive, store: Faults, caplog: pytest.LogCaptureFixture
) -> None:
    kit, bot = memory_kit, FailingOnce()
    provider = provider_on(kit, store, bot)
    context_id = assert_a2a(send(kit, provider, drive, "hello", "m-1"), 200)["message"]["contextId"]
    store.down.add("m-kept")
    with caplog.at_level(logging.INFO, logger="pactmw"):
        failed = send(kit, provider, drive, "fail: where is my parcel?", "m-kept", context_id)
    store.down.clear()  # the store is back
    # A bare 503, as any store outage in A2A, but with when the claim's lease lapses: until
    # then the message is in progress, and a retry is told so.
    assert_bare(failed, 503)
    assert header(failed, "Retry-After") == [str(math.ceil(LEASE))]
    working = send(kit, provider, drive, "fail: where is my parcel?", "m-kept", context_id)
    assert_error(working, "INVALID_PARAMS", PENDING)
    kit.clock.advance(math.ceil(LEASE))
    answered = send(kit, provider, drive, "fail: where is my parcel?", "m-kept", context_id)
    assert assert_a2a(answered, 200)["message"]["parts"] == [{"text": "fine"}]
    assert bot.runs["m-kept"] == 2
    messages = assert_logs_tame(caplog.records)
    naming = [r for r in caplog.records if "m-kept" in r.getMessage()]
    assert len(naming) == 1, messages
    assert naming[0].levelno == logging.ERROR
    assert "releasing" in naming[0].getMessage()
    assert not any("store unavailable" in m for m in messages), messages


def test_a_failed_first_message_leaves_no_conversation(
    memory_kit: Kit, drive: Drive, store: Faults
) -> None:
    kit, bot = memory_kit, FailingOnce()
    provider = provider_on(kit, store, bot)
    failed = send(kit, provider, drive, "fail: hello", "m-1")
    assert_error(failed, "INTERNAL", "Internal error")
    [started] = bot.contexts
    # The agent never learnt the context, and nothing was received there: it is gone.
    assert store.get_conversation(started) is None
    assert_error(
        send(kit, provider, drive, "hi", "m-2", started), "INVALID_PARAMS", "Unknown contextId"
    )
    # Sent again, the message starts a new conversation (as any message without contextId).
    again = assert_a2a(send(kit, provider, drive, "fail: hello", "m-1"), 200)["message"]
    assert again["contextId"] != started
    assert store.get_conversation(again["contextId"]) is not None


def test_a_first_message_whose_claim_the_store_kept_keeps_its_conversation(
    memory_kit: Kit, drive: Drive, store: Faults
) -> None:
    """The conversation holds the claim the store could not give up: it is not empty, so it
    stays (the retention cleanup deletes it in time), and the agent is told when to retry."""
    kit, bot = memory_kit, FailingOnce()
    provider = provider_on(kit, store, bot)
    store.down.add("m-1")
    failed = send(kit, provider, drive, "fail: hello", "m-1")
    store.down.clear()
    assert_bare(failed, 503)
    assert header(failed, "Retry-After") == [str(math.ceil(LEASE))]
    [started] = bot.contexts
    assert store.get_conversation(started) is not None
