"""Poppy conversations with the company's agent (§7, plan step 6), driven by the SDK's own
personal agent over real TLS, on sqlite and PostgreSQL: the SDK's `conversations.*`
conformance cases by id, one bot run per message however often it is retried, owner scoping,
the `authorization` event of a missing scope, and refused forged or replayed DPoP proofs."""

from __future__ import annotations

import asyncio
import base64
import secrets
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from personal_agent_protocol.conformance import run_conformance, select_cases
from personal_agent_protocol.models import Message

from pactmw.provider import Brand, Reply, Turn
from pactmw.provider.poppy import PoppyConfig
from tests.support.poppy_world import SHOP, PoppyWorld, world_on

#: The SDK's conversation cases pactmw's company runs; each must pass, never skip.
CONVERSATION_CASES = (
    "conversations.start-and-reply",
    "conversations.retry-replays",
    "conversations.message-id-conflict",
    "conversations.invalid-cursor",
    "conversations.has-more-drained",
    "conversations.empty-read",
    "conversations.read-fields",
    "conversations.attribution",
    "conversations.closed",
    "conversations.not-found-indistinguishable",
    "lifecycle.parallel-sessions",
)


class CountingBot:
    """Answers every message, counting its runs per message id; "orders" needs a scope."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, turn: Turn) -> Reply:
        with self._lock:
            self.runs[turn.message_id] += 1
        if "orders" in turn.text:
            turn.require_scopes("orders:read", message="Sign in so I can read your orders.")
        return Reply(text=f"You said: {turn.text} ({len(turn.history)} before)")


BOT = CountingBot()


def counting_brand() -> Brand:
    from pactmw.protocols.poppy import ApiDescriptor

    return Brand(
        id="shop",
        name="Shop",
        handler=BOT,
        poppy=PoppyConfig(
            domain=SHOP,
            agents="any",
            custom_scopes={"orders:read": "Read your orders"},
            apis=(ApiDescriptor("openapi", f"https://{SHOP}/openapi.json", "Orders"),),
        ),
    )


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PoppyWorld]:
    yield from world_on(request, tmp_path_factory, brands=(counting_brand(),))


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def _named(case_id: str) -> Any:
    (case,) = select_cases(ids=[case_id])
    return pytest.param(case_id, id=f"{case_id}[{'+'.join(case.requirements)}]")


@pytest.mark.parametrize("case_id", [_named(case_id) for case_id in CONVERSATION_CASES])
def test_sdk_conversation_case(world: PoppyWorld, case_id: str) -> None:
    async def one() -> Any:
        async with world.http() as http:
            report = await run_conformance(world.context(http), cases=select_cases(ids=[case_id]))
        return report.results

    (result,) = run(one())
    assert (result.id, result.outcome, result.message) == (case_id, "passed", None)


def _message(text: str) -> Message:
    raw = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
    return Message(id="msg_" + raw, sender="agent", text=text)


def test_signed_out_session_converses_and_a_retry_runs_the_bot_once(world: PoppyWorld) -> None:
    async def scenario() -> tuple[Any, Any, Any, Message, Message]:
        async with world.http() as http:
            ctx = world.context(http)
            user = ctx.new_user()
            session = await ctx.session(user)
            endpoint = await ctx.conversations_endpoint()
            who = await ctx.who(user)
            first, second = _message("Hello"), _message("Where is my parcel?")
            conversations = ctx.agent.conversations
            started = await conversations.start(endpoint, first, token=session, **who)
            again = await conversations.start(endpoint, first, token=session, **who)
            cid = started.conversation_id
            sent = await conversations.send(endpoint, cid, second, token=session, **who)
            await conversations.send(endpoint, cid, second, token=session, **who)
            page = await conversations.read_events(endpoint, cid, token=session, **who)
            return started, again, (sent, page), first, second

    started, again, (sent, page), first, second = run(scenario())
    assert again.conversation_id == started.conversation_id
    assert sent.conversation_id == started.conversation_id
    assert (started.status, started.responder) == ("idle", "agent")
    assert (BOT.runs[first.id], BOT.runs[second.id]) == (1, 1)
    texts = [(e.message.role, e.message.text) for e in page.events if e.message is not None]
    assert texts == [
        ("user", "Hello"),
        ("company", "You said: Hello (0 before)"),
        ("user", "Where is my parcel?"),
        ("company", "You said: Where is my parcel? (1 before)"),
    ]
    assert (page.status, page.responder, page.has_more) == ("idle", "agent", False)


def test_a_missing_scope_is_an_authorization_event_with_a_message(world: PoppyWorld) -> None:
    async def scenario() -> tuple[Any, Message]:
        async with world.http() as http:
            ctx = world.context(http)
            user = ctx.new_user()
            session = await ctx.session(user)
            endpoint = await ctx.conversations_endpoint()
            who = await ctx.who(user)
            asking = _message("Show my orders")
            conversations = ctx.agent.conversations
            started = await conversations.start(endpoint, asking, token=session, **who)
            await conversations.start(endpoint, asking, token=session, **who)
            page = await conversations.read_events(
                endpoint, started.conversation_id, token=session, **who
            )
            return page, asking

    page, asking = run(scenario())
    assert BOT.runs[asking.id] == 1
    kinds = [event.type for event in page.events]
    assert kinds == ["message", "authorization", "message"]
    ask = page.events[1]
    assert (ask.error, ask.scope) == ("sign_in_required", "orders:read")
    said = page.events[2].message
    assert said is not None
    assert (said.role, said.sender, said.text) == (
        "company",
        "agent",
        "Sign in so I can read your orders.",
    )


def test_another_owners_conversation_is_unknown(world: PoppyWorld) -> None:
    async def scenario() -> list[tuple[int, Any]]:
        async with world.http() as http:
            ctx = world.context(http)
            owner = ctx.new_user()
            owner_session = await ctx.session(owner)
            endpoint = await ctx.conversations_endpoint()
            started = await ctx.agent.conversations.start(
                endpoint, _message("Mine"), token=owner_session, **(await ctx.who(owner))
            )
            other = ctx.new_user()
            session = await ctx.session(other)
            token = session.access_token.get_secret_value()
            answers = []
            for conversation in (started.conversation_id, "cnv_" + "0" * 32):
                for method, suffix, body in (
                    ("GET", "events", None),
                    (
                        "POST",
                        "messages",
                        b'{"message": {"id": "msg_x", "sender": "agent", "text": "Hi"}}',
                    ),
                    ("POST", "close", None),
                ):
                    url = f"{endpoint}/{conversation}/{suffix}"
                    headers = {
                        "Authorization": f"DPoP {token}",
                        "DPoP": await ctx.proof(other, method, url, token=session),
                    }
                    if body is not None:
                        headers["Content-Type"] = "application/json"
                    response = await ctx.send(method, url, headers=headers, content=body)
                    answers.append((response.status_code, response.json()))
            return answers

    answers = run(scenario())
    assert answers == [(404, {"error": "conversation_not_found"})] * 6


def test_forged_and_replayed_proofs_are_refused(world: PoppyWorld) -> None:
    async def scenario() -> tuple[int, Any, int, Any, int]:
        async with world.http() as http:
            ctx = world.context(http)
            user = ctx.new_user()
            session = await ctx.session(user)
            endpoint = await ctx.conversations_endpoint()
            started = await ctx.agent.conversations.start(
                endpoint, _message("Hi"), token=session, **(await ctx.who(user))
            )
            url = f"{endpoint}/{started.conversation_id}/events"
            token = session.access_token.get_secret_value()
            proof = await ctx.proof(user, "GET", url, token=session)
            headers = {"Authorization": f"DPoP {token}", "DPoP": proof}
            fresh = await ctx.send("GET", url, headers=headers)
            replayed = await ctx.send("GET", url, headers=headers)
            # A proof for another URL (the create endpoint) is not one for this request.
            other = await ctx.proof(user, "GET", endpoint, token=session)
            forged = await ctx.send(
                "GET", url, headers={"Authorization": f"DPoP {token}", "DPoP": other}
            )
            return (
                fresh.status_code,
                replayed.json(),
                replayed.status_code,
                forged.json(),
                forged.status_code,
            )

    fresh, replayed, replayed_status, forged, forged_status = run(scenario())
    assert fresh == 200
    assert (replayed_status, replayed["error"]) == (401, "invalid_dpop_proof")
    assert (forged_status, forged["error"]) == (401, "invalid_dpop_proof")
