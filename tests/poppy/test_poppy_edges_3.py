"""Poppy edges, over the TLS world with the SDK's personal agent signing every request:

1. a blocked agent may still revoke its own sign-in (revoking only removes access), while
   everything that gives access stays refused;
2. a failed turn whose claim is being renewed waits for that renewal off the event loop:
   the company goes on serving other requests meanwhile;
3. a failed turn whose release the store refuses (it is down) tells the agent when to send
   the message again (once its claim lapses), and logs that once, naming the message;
4. a new conversation whose first message fails is not left behind, empty.

The world's store is a real sqlite store with `Faults` mixed in: a renewal the test holds,
a release that fails as a store that is down does."""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import attrs
import httpx
import pytest

from pactmw.provider import Reply, Turn
from pactmw.provider.agent_admin import set_enabled
from pactmw.provider.poppy import PoppyConfig
from pactmw.provider.poppy._brands import BLOCKED, NOT_ADMITTED, agent_refusal
from pactmw.provider.poppy._conversation_records import derived_context_id, public_id
from pactmw.provider.poppy._credentials import token_hash
from pactmw.provider.poppy._session_check import PoppyCaller
from pactmw.store.base import StoreUnavailable
from tests.support.clock import OffsetClock
from tests.support.logs import assert_logs_tame
from tests.support.poppy_accounts import Agent, signed_in
from tests.support.poppy_world import (
    SHOP,
    Conversing,
    PoppyWorld,
    RunCounter,
    poppy_brand,
    world_on,
)

if TYPE_CHECKING:
    from pactmw.store.base import Store

    _StoreBase = Store
else:
    _StoreBase = object

#: How long a test waits for something that is meant to happen at once (a hang check).
WAIT = 10.0
#: The world's claim lease: its turns renew their claims every second.
LEASE = 3.0


class FaultPlan:
    """What `Faults` does, by message id: renewals held until `renewal_may_finish`, and
    releases that fail as a store that is down fails."""

    def __init__(self) -> None:
        self.held: set[str] = set()
        self.renewal_started = threading.Event()
        self.renewal_may_finish = threading.Event()
        self.down: set[str] = set()


FAULTS = FaultPlan()


class Faults(_StoreBase):
    """Mixed into the world's sqlite store: the real store, but for `FAULTS`."""

    def renew_claim(
        self, *, context_id: str, message_id: str, claimed_at: float, now: float
    ) -> bool:
        if message_id in FAULTS.held:
            FAULTS.renewal_started.set()
            FAULTS.renewal_may_finish.wait(WAIT)
        return super().renew_claim(
            context_id=context_id, message_id=message_id, claimed_at=claimed_at, now=now
        )

    def release_claim(self, *, context_id: str, message_id: str, claimed_at: float) -> None:
        if message_id in FAULTS.down:
            raise StoreUnavailable("the database is down")
        super().release_claim(context_id=context_id, message_id=message_id, claimed_at=claimed_at)

    def release_message_id(
        self, *, brand_id: str, issuer: str, sub: str, message_id: str, context_id: str
    ) -> None:
        if message_id in FAULTS.down:
            raise StoreUnavailable("the database is down")
        super().release_message_id(
            brand_id=brand_id, issuer=issuer, sub=sub, message_id=message_id, context_id=context_id
        )


#: A message the bot fails on its first run (the next run answers it).
FAIL_ONCE = "fail once: "
#: A message the bot fails once its claim's renewal is under way.
FAIL_WHILE_RENEWING = "fail while renewing: "


class Bot(RunCounter):
    """An async bot: its turn resumes on the event loop, where a failure path must not wait
    for anything that blocks."""

    async def answer(self, turn: Turn) -> Reply:
        first = self.count(turn) == 1
        if first and turn.text.startswith(FAIL_WHILE_RENEWING):
            assert await asyncio.to_thread(FAULTS.renewal_started.wait, WAIT)
            raise RuntimeError("the bot failed while its claim was being renewed")
        if first and turn.text.startswith(FAIL_ONCE):
            raise RuntimeError("the bot failed")
        return Reply(text=f"You said: {turn.text}")


BOT = Bot()


async def bot(turn: Turn) -> Reply:
    return await BOT.answer(turn)


CLOCK = OffsetClock()


@pytest.fixture(scope="module", params=["sqlite"])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PoppyWorld]:
    yield from world_on(
        request,
        tmp_path_factory,
        brands=(attrs.evolve(poppy_brand(), handler=bot),),
        store_mixin=Faults,
        claim_lease_seconds=LEASE,
        clock=CLOCK,
    )


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def _message(text: str) -> dict[str, str]:
    return {"id": "msg_" + secrets.token_hex(12), "sender": "agent", "text": text}


def _conversation_of(world: PoppyWorld, c: Conversing, message_id: str) -> str:
    """The store id of the conversation `message_id` starts for `c`'s User."""
    caller = PoppyCaller(
        brand_id="shop",
        client_id=world.atlas.client_id,
        user_id=c.who["pairwise_user_id"],
        session_id="",
        account=None,
        scopes=(),
    )
    return derived_context_id(caller, message_id)


# -- 1. a blocked agent revokes its own sign-in ---------------------------------------------


def test_a_blocked_agent_may_still_revoke_its_own_sign_in(world: PoppyWorld) -> None:
    client_id = world.atlas.client_id

    async def body(agent: Agent) -> dict[str, Any]:
        user = agent.ctx.new_user()
        token = signed_in(world, user)
        session = await agent.ctx.session(user)
        signing_in = await agent.refresh(user, token, session.session_id)
        assert signing_in.status_code == 200, signing_in.text
        access, token = signing_in.json()["access_token"], signing_in.json()["refresh_token"]
        set_enabled(world.provider, client_id, False)
        try:
            revoked = await agent.revoke(token)
            # Everything that gives access is still refused: no rotation, no new Session.
            refreshed = await agent.refresh(user, token, session.session_id)
        finally:
            set_enabled(world.provider, client_id, True)
        # Allowed again, the sign-in stays ended: the block kept nothing of it alive.
        after = await agent.refresh(user, token, session.session_id)
        return {"access": access, "revoked": revoked, "refreshed": refreshed, "after": after}

    async def go() -> dict[str, Any]:
        async with world.http() as http:
            return await body(Agent(world.context(http)))

    got = run(go())
    assert (got["revoked"].status_code, got["revoked"].json()) == (200, {})
    assert (got["refreshed"].status_code, got["refreshed"].json()) == (
        401,
        {"error": "invalid_client"},
    )
    assert (got["after"].status_code, got["after"].json()) == (400, {"error": "invalid_grant"})
    session = world.provider.store.session_for_token(
        token_hash=token_hash(got["access"]), now=time.time()
    )
    assert session is not None
    assert not session.signed_in  # signed out by the revocation (§4.9)


def test_revoking_is_let_through_a_block_but_not_past_the_brands_agents() -> None:
    # The rule both cases go through (`agent_refusal`): a block is lifted for revocation
    # only; an agent the Brand does not admit is an unknown client, revoking or not.
    narrow = PoppyConfig(domain=SHOP, agents=["https://atlas.example"])
    atlas, other = "https://atlas.example", "https://other.example"
    assert agent_refusal(narrow, atlas, False) == BLOCKED
    assert agent_refusal(narrow, atlas, False, revoking=True) is None
    assert agent_refusal(narrow, other, None, revoking=True) == NOT_ADMITTED
    assert agent_refusal(narrow, other, False, revoking=True) == NOT_ADMITTED


# -- 2. a release waiting for a renewal leaves the event loop serving ------------------------


class _Seen(logging.Handler):
    """Sets `event` when a record whose message starts with `start` is logged."""

    def __init__(self, start: str) -> None:
        super().__init__()
        self.start = start
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(self.start):
            self.event.set()


def test_a_failed_turn_waits_for_its_claims_renewal_off_the_event_loop(
    world: PoppyWorld,
) -> None:
    held = _message(FAIL_WHILE_RENEWING + "hello")
    FAULTS.held.add(held["id"])
    # Logged by the failure path just before it gives the claim up, which first waits for
    # the renewal under way (held by the store until the test lets it finish).
    failure = _Seen("conversation turn of brand 'shop' failed")
    logger = logging.getLogger("pactmw.poppy")
    logger.addHandler(failure)

    async def scenario() -> tuple[httpx.Response, httpx.Response]:
        async with world.conversing() as c:
            failing = asyncio.ensure_future(c.call("POST", c.endpoint, {"message": held}))
            try:
                assert await asyncio.to_thread(failure.event.wait, WAIT)
                # The release now waits for the renewal: the company still answers others.
                other = await asyncio.wait_for(
                    c.call("POST", c.endpoint, {"message": _message("meanwhile")}), WAIT
                )
            finally:
                FAULTS.renewal_may_finish.set()
            return other, await failing

    try:
        other, failed = run(scenario())
    finally:
        logger.removeHandler(failure)
        FAULTS.held.discard(held["id"])
    # The bot failed only once the renewal was under way, and the renewal finished only
    # after the other request was answered: that answer came while the release waited.
    assert FAULTS.renewal_started.is_set()
    assert other.status_code == 201, other.text
    assert (failed.status_code, failed.json()) == (503, {"error": "temporarily_unavailable"})
    assert BOT.runs[held["id"]] == 1


# -- 3. a release the store refuses ----------------------------------------------------------


def test_a_release_the_store_refused_says_when_to_send_again_and_is_logged_once(
    world: PoppyWorld, caplog: pytest.LogCaptureFixture
) -> None:
    message = _message(FAIL_ONCE + "where is my parcel?")
    FAULTS.down.add(message["id"])
    CLOCK.frozen = time.time()  # the claim's lease runs out when the test says so

    async def scenario() -> list[httpx.Response]:
        async with world.conversing() as c:
            failed = await c.call("POST", c.endpoint, {"message": message})
            FAULTS.down.discard(message["id"])  # the store is back
            working = await c.call("POST", f"{c.endpoint}?cursor=cur_0", {"message": message})
            assert CLOCK.frozen is not None
            CLOCK.frozen += LEASE + 1  # the failed turn's claim has lapsed
            answered = await c.call("POST", f"{c.endpoint}?cursor=cur_0", {"message": message})
            return [failed, working, answered]

    try:
        with caplog.at_level(logging.INFO, logger="pactmw"):
            failed, working, answered = run(scenario())
    finally:
        CLOCK.frozen = None
        FAULTS.down.discard(message["id"])
    # Send it again, but not before its claim lapses: until then it is in progress.
    assert (failed.status_code, failed.json()) == (503, {"error": "temporarily_unavailable"})
    assert failed.headers.get("retry-after") == str(math.ceil(LEASE))
    assert (working.status_code, working.json()["status"]) == (201, "working")
    assert answered.status_code == 201, answered.text
    assert [e["message"]["text"] for e in answered.json()["events"]] == [
        message["text"],
        f"You said: {message['text']}",
    ]
    assert BOT.runs[message["id"]] == 2
    messages = assert_logs_tame(caplog.records)
    naming = [m for m in messages if message["id"] in m]
    assert len(naming) == 1, messages
    assert "releasing" in naming[0]
    assert not any("store unavailable" in m for m in messages), messages


# -- 4. a failed first message leaves no conversation ----------------------------------------


def test_a_failed_first_message_leaves_no_empty_conversation(world: PoppyWorld) -> None:
    failing, answered = _message(FAIL_ONCE + "hello"), _message("hello")

    async def scenario() -> dict[str, Any]:
        async with world.conversing() as c:
            failed = await c.call("POST", c.endpoint, {"message": failing})
            failed_id = _conversation_of(world, c, failing["id"])
            events = await c.call("GET", f"{c.endpoint}/{public_id(failed_id)}/events")
            started = await c.call("POST", c.endpoint, {"message": answered})
            return {
                "failed": failed,
                "failed_id": failed_id,
                "events": events,
                "started": started,
                # The derivation this test uses names the conversations the company makes.
                "derived": public_id(_conversation_of(world, c, answered["id"])),
            }

    got = run(scenario())
    assert got["failed"].status_code == 503
    assert got["started"].json()["conversation_id"] == got["derived"]
    assert world.provider.store.get_conversation(got["failed_id"]) is None
    assert (got["events"].status_code, got["events"].json()) == (
        404,
        {"error": "conversation_not_found"},
    )


def test_a_signed_in_first_message_that_failed_leaves_no_account_conversation(
    world: PoppyWorld,
) -> None:
    """The conversation a signed-in Session's failed first message started is not kept bound
    to the account: nothing was received there, so the same User's signed-out Session sending
    the message again starts it afresh, bound to no account, and no account data is in it."""

    async def body(agent: Agent) -> dict[str, Any]:
        c = await Conversing.begin(agent.ctx)
        signing_in = await agent.refresh(c.user, signed_in(world, c.user), c.session.session_id)
        account_token = signing_in.json()["access_token"]
        signed_out = (await c.ctx.session(c.user)).access_token.get_secret_value()
        message = _message(FAIL_ONCE + "My orders")
        failed = await c.call("POST", c.endpoint, {"message": message}, token=account_token)
        again = await c.call("POST", c.endpoint, {"message": message}, token=signed_out)
        return {
            "failed": failed,
            "again": again,
            "context_id": _conversation_of(world, c, message["id"]),
        }

    async def go() -> dict[str, Any]:
        async with world.http() as http:
            return await body(Agent(world.context(http)))

    got = run(go())
    assert (got["failed"].status_code, got["failed"].json()) == (
        503,
        {"error": "temporarily_unavailable"},
    )
    assert got["again"].status_code == 201, got["again"].text
    assert got["again"].json()["conversation_id"] == public_id(got["context_id"])
    conversation = world.provider.store.get_conversation(got["context_id"])
    assert conversation is not None
    assert conversation.account is None
