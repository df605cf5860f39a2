"""Poppy conversations with the company's agent (§7, plan step 6), driven by the SDK's own
personal agent over real TLS, on sqlite and PostgreSQL: the SDK's `conversations.*`
conformance cases by id, one bot run per message however often it is retried, owner scoping,
the `authorization` event of a missing scope, and refused forged or replayed DPoP proofs."""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from typing import Any

import httpx
import pytest
from personal_agent_protocol.errors import PersonalAgentProtocolError
from personal_agent_protocol.models import Message

from pactmw.core.http import Request
from pactmw.core.jwk import generate_private_jwk, public_key_set
from pactmw.protocols.identity import RegisteredAgent
from pactmw.provider import Brand, Reply, Turn
from pactmw.provider.poppy import PoppyConfig
from pactmw.provider.poppy._conversations import conversation_route
from tests.poppy.support import CONVERSATION_CASES, run
from tests.provider import BodyReader, message_body
from tests.support.agent import identity_token
from tests.support.poppy_accounts import Agent, signed_in
from tests.support.poppy_accounts import scenario as account_scenario
from tests.support.poppy_world import (
    BASE_URL,
    OUTLET,
    SHOP,
    Conversing,
    PoppyWorld,
    RunCounter,
    case_param,
    world_fixture,
)


class CountingBot(RunCounter):
    """Answers every message, counting its runs per message id; "orders" needs a scope."""

    def __call__(self, turn: Turn) -> Reply:
        self.count(turn)
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


#: A PACT personal agent the same Provider knows (keys inline: nothing to fetch).
PACT_ISSUER = "https://pact-agent.example"
PACT_KEY = generate_private_jwk()


def outlet_brand() -> Brand:
    """A second Company of the same Provider, answered by the same bot."""
    return Brand(
        id="outlet",
        name="Outlet",
        handler=BOT,
        poppy=PoppyConfig(domain=OUTLET, agents="any"),
    )


world = world_fixture(
    counting_brand(),
    outlet_brand(),
    pact_agents=(
        RegisteredAgent(issuer=PACT_ISSUER, name="PACT PA", jwks=public_key_set([PACT_KEY])),
    ),
)


@pytest.mark.parametrize("case_id", [case_param(case_id) for case_id in CONVERSATION_CASES])
def test_sdk_conversation_case(world: PoppyWorld, case_id: str) -> None:
    world.assert_case_passes(case_id)


def _message(text: str) -> Message:
    raw = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
    return Message(id="msg_" + raw, sender="agent", text=text)


def test_signed_out_session_converses_and_a_retry_runs_the_bot_once(world: PoppyWorld) -> None:
    async def scenario() -> tuple[Any, Any, Any, Message, Message]:
        async with world.conversing() as c:
            first, second = _message("Hello"), _message("Where is my parcel?")
            started = await c.start(first)
            again = await c.start(first)
            cid = started.conversation_id
            sent = await c.send(cid, second)
            await c.send(cid, second)
            page = await c.read_events(cid)
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


def test_a_message_id_is_one_message_of_the_user_across_conversations(world: PoppyWorld) -> None:
    """A message id names one message of the User (PAP-7.3-01): sent to another of the
    User's conversations, a new one included, whatever its content, it is
    `409 message_id_conflict` and the bot never runs for it again; sent again to its own
    conversation it is still a retry. A message a closed conversation refused was never
    received, so its id starts a new conversation."""

    async def scenario() -> tuple[list[Any], list[str | None], Message, Message, Message]:
        async with world.conversing() as c:
            first, later, other = _message("Hello"), _message("My parcel?"), _message("Hi")
            a = (await c.start(first)).conversation_id
            await c.send(a, later)
            b = (await c.start(other)).conversation_id
            changed = later.model_copy(update={"text": "Something else"})
            attempts = (c.send(b, later), c.send(b, changed), c.start(later), c.send(b, first))
            outcomes: list[Any] = []
            for attempt in attempts:
                try:
                    outcomes.append(await attempt)
                except PersonalAgentProtocolError as refused:
                    outcomes.append((refused.status_code, refused.code))
            retried = await c.send(a, later)
            outcomes.append(retried.conversation_id == a)
            page = await c.read_events(b)
            texts = [e.message.text for e in page.events if e.message is not None]
            # Refused by the closed conversation, so never received: its id is free again.
            await c.close(b)
            refused_by_closed = _message("Still there?")
            try:
                await c.send(b, refused_by_closed)
            except PersonalAgentProtocolError as refused:
                outcomes.append((refused.status_code, refused.code))
            fresh = await c.start(refused_by_closed)
            outcomes.append(fresh.conversation_id not in (a, b))
            return outcomes, texts, first, later, refused_by_closed

    outcomes, texts, first, later, refused_by_closed = run(scenario())
    conflict = (409, "message_id_conflict")
    assert outcomes == [conflict] * 4 + [True, (409, "conversation_closed"), True]
    assert (BOT.runs[first.id], BOT.runs[later.id], BOT.runs[refused_by_closed.id]) == (1, 1, 1)
    assert texts == ["Hi", "You said: Hi (0 before)"]


def test_a_missing_scope_is_an_authorization_event_with_a_message(world: PoppyWorld) -> None:
    async def scenario() -> tuple[Any, Message]:
        async with world.conversing() as c:
            asking = _message("Show my orders")
            started = await c.start(asking)
            await c.start(asking)
            page = await c.read_events(started.conversation_id)
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


async def _each_way(other: Conversing, conversation_id: str) -> list[tuple[int, Any]]:
    """What `other` is answered reading, sending to and closing `conversation_id`."""
    message = {"message": {"id": _message("").id, "sender": "agent", "text": "Hi"}}
    answers = []
    for method, suffix, body in (
        ("GET", "events", None),
        ("POST", "messages", message),
        ("POST", "close", None),
    ):
        response = await other.call(method, f"{other.endpoint}/{conversation_id}/{suffix}", body)
        answers.append((response.status_code, response.json()))
    return answers


def test_another_owners_conversation_is_unknown(world: PoppyWorld) -> None:
    async def scenario() -> list[tuple[int, Any]]:
        async with world.conversing() as owner:
            started = await owner.start(_message("Mine"))
            other = await Conversing.begin(owner.ctx)
            answers = []
            for conversation in (started.conversation_id, "cnv_" + "0" * 32):
                answers += await _each_way(other, conversation)
            return answers

    answers = run(scenario())
    assert answers == [(404, {"error": "conversation_not_found"})] * 6


@pytest.mark.parametrize("other", ["agent", "brand"])
def test_the_same_users_conversation_is_unknown_to_another_agent_or_brand(
    world: PoppyWorld, other: str
) -> None:
    """The owner is the Brand, the agent and the User ID together (PAP-7.2-01): the same
    User ID with another personal agent, or at another Company of the same Provider, is
    another owner, refused as an unknown conversation; the conversation stays its owner's."""

    async def scenario() -> tuple[list[tuple[int, Any]], Any]:
        async with world.http() as http:
            owner = await Conversing.begin(world.context(http))
            started = await owner.start(_message("Mine"))
            if other == "agent":
                elsewhere = world.context(http, identity=world.plain)
            else:
                elsewhere = world.context(http, company=OUTLET)
            stranger = await Conversing.begin(elsewhere, owner.user)
            answers = await _each_way(stranger, started.conversation_id)
            return answers, await owner.read_events(started.conversation_id)

    answers, page = run(scenario())
    assert answers == [(404, {"error": "conversation_not_found"})] * 3
    texts = [e.message.text for e in page.events if e.message is not None]
    assert texts == ["Mine", "You said: Mine (0 before)"]
    assert page.status == "idle"


def test_forged_and_replayed_proofs_are_refused(world: PoppyWorld) -> None:
    async def scenario() -> tuple[int, Any, int, Any, int]:
        async with world.conversing() as c:
            started = await c.start(_message("Hi"))
            url = f"{c.endpoint}/{started.conversation_id}/events"
            headers = await c.dpop("GET", url)
            fresh = await c.ctx.send("GET", url, headers=headers)
            replayed = await c.ctx.send("GET", url, headers=headers)
            # A proof for another URL (the create endpoint) is not one for this request.
            forged = await c.ctx.send("GET", url, headers=await c.dpop("GET", c.endpoint))
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


def test_head_reads_the_events_as_get_with_a_proof_for_head(world: PoppyWorld) -> None:
    """HEAD is routed as GET (RFC 9110 §9.3.2): the GET's status and headers, no body. The
    request is still a HEAD, so its DPoP proof must say so (`htm`, RFC 9449 §4.3)."""

    async def scenario() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        async with world.conversing() as c:
            started = await c.start(_message("Hi"))
            url = f"{c.endpoint}/{started.conversation_id}/events"

            async def read(method: str, proved: str) -> httpx.Response:
                return await c.ctx.send(method, url, headers=await c.dpop(proved, url))

            return await read("GET", "GET"), await read("HEAD", "HEAD"), await read("HEAD", "GET")

    get, head, misproved = run(scenario())
    assert get.status_code == head.status_code == 200, (get.text, head.status_code)
    assert head.content == b""
    assert head.headers["content-length"] == str(len(get.content))
    assert head.headers["content-type"] == get.headers["content-type"]
    assert misproved.status_code == 401


# --- signed in (the first Account Token seeded as device sign-in will issue it) --------------


def test_signed_in_scopes_gate_the_bot_and_the_conversation_stays_with_the_account(
    world: PoppyWorld,
) -> None:
    async def body(agent: Agent) -> Any:
        c = await Conversing.begin(agent.ctx)
        session_id = c.session.session_id
        # Signed in with orders:write only: reading orders needs orders:read.
        narrow = await agent.refresh(c.user, signed_in(world, c.user), session_id, "orders:write")
        token = narrow.json()["access_token"]
        asking = {"id": "msg_" + secrets.token_hex(8), "sender": "agent", "text": "my orders"}
        started = await c.call("POST", c.endpoint, {"message": asking}, token=token)
        cid = started.json()["conversation_id"]
        events_url = f"{c.endpoint}/{cid}/events"
        narrow_page = (await c.call("GET", events_url, token=token)).json()
        # The same Session signed in again with every scope (a second sign-in's Account
        # Token): the bot reads the orders in the same conversation.
        wide = await agent.refresh(c.user, signed_in(world, c.user), session_id)
        token = wide.json()["access_token"]
        again = {"id": "msg_" + secrets.token_hex(8), "sender": "agent", "text": "my orders"}
        sent = await c.call("POST", f"{c.endpoint}/{cid}/messages", {"message": again}, token=token)
        wide_url = f"{events_url}?cursor={narrow_page['cursor']}"
        wide_page = (await c.call("GET", wide_url, token=token)).json()
        # A signed-out Session of the same user: the account's conversation needs sign-in.
        signed_out = (await c.ctx.session(c.user)).access_token.get_secret_value()
        refused = await c.call("GET", events_url, token=signed_out)
        return started, narrow_page, sent, wide_page, refused, again

    started, narrow_page, sent, wide_page, refused, again = account_scenario(world, body)
    assert started.status_code == 201
    ask = [event for event in narrow_page["events"] if event["type"] == "authorization"]
    assert [(e["error"], e["scope"]) for e in ask] == [("insufficient_scope", "orders:read")]
    assert sent.status_code == 202
    assert BOT.runs[again["id"]] == 1
    assert [e["type"] for e in wide_page["events"]] == ["message", "message"]
    assert wide_page["events"][1]["message"]["text"] == "You said: my orders (1 before)"
    assert refused.status_code == 403
    assert refused.json() == {"error": "sign_in_required"}


def test_one_brand_answers_a_pact_agent_and_a_poppy_agent_with_the_same_bot(
    world: PoppyWorld,
) -> None:
    # PACT: message:send on the very Provider the TLS world serves, then its retry.
    pact_id = str(uuid.uuid4())
    token = identity_token(PACT_KEY, PACT_ISSUER, BASE_URL, sub="pact-user", fresh_jti=True)
    pact_answers: list[Any] = []
    context_id: str | None = None
    for _ in range(2):
        request = Request(
            method="POST",
            path="/a2a/shop/message:send",
            headers=(("authorization", "Bearer " + token), ("content-type", "application/json")),
        )
        body = message_body("Hello from PACT", message_id=pact_id, context_id=context_id)
        pact_answers.append(world.provider.handle(request, BodyReader(body)))
        # The retry names the conversation the first send started (PACT §4.3).
        context_id = json.loads(pact_answers[-1].body)["message"]["contextId"]
    # Poppy: the SDK's personal agent over TLS, the same bot answering.
    poppy = _message("Hello from Poppy")

    async def scenario() -> Any:
        async with world.conversing() as c:
            started = await c.start(poppy)
            return await c.read_events(started.conversation_id)

    page = run(scenario())
    assert [answer.status for answer in pact_answers] == [200, 200]
    assert pact_answers[0].body == pact_answers[1].body  # the retry: the stored reply
    pact_reply = json.loads(pact_answers[0].body)["message"]
    assert pact_reply["parts"] == [{"text": "You said: Hello from PACT (0 before)"}]
    poppy_said = [e.message.text for e in page.events if e.message and e.message.role == "company"]
    assert poppy_said == ["You said: Hello from Poppy (0 before)"]
    assert (BOT.runs[pact_id], BOT.runs[poppy.id]) == (1, 1)


def test_a_post_with_wait_or_cursor_answers_a_page_and_a_bad_wait_is_refused(
    world: PoppyWorld,
) -> None:
    async def scenario() -> tuple[Any, Any, Any]:
        async with world.conversing() as c:
            first = await c.start(_message("One"), wait=0)
            more = await c.send(first.conversation_id, _message("Two"), cursor=first.cursor)
            bad = await c.call("GET", f"{c.endpoint}/{first.conversation_id}/events?wait=soon")
            return first, more, bad

    first, more, bad = run(scenario())
    assert [e.message.text for e in first.events if e.message] == [
        "One",
        "You said: One (0 before)",
    ]
    assert [e.message.text for e in more.events if e.message] == ["Two", "You said: Two (1 before)"]
    assert (bad.status_code, bad.json()) == (400, {"error": "invalid_request"})


def test_a_message_json_cannot_carry_back_is_refused(world: PoppyWorld) -> None:
    # Strict JSON still reads a lone surrogate escape and a number past a double's range (as
    # infinity); neither could be stored as the turn's record nor sent back in its events.
    unwritable = (
        b'{"message": {"id": "msg_s1", "sender": "agent", "data": {"note": "\\ud800"}}}',
        b'{"message": {"id": "msg_s2", "sender": "agent", "data": {"\\udfff": true}}}',
        b'{"message": {"id": "msg_s3", "sender": "agent", "text": "Hi", "context": {"n": 1e400}}}',
    )

    async def scenario() -> list[Any]:
        async with world.conversing() as c:
            first = {"id": "msg_" + secrets.token_hex(8), "sender": "agent", "text": "Hi"}
            started = await c.call("POST", c.endpoint, {"message": first})
            url = f"{c.endpoint}/{started.json()['conversation_id']}/messages"
            answers = []
            for target in (c.endpoint, url):
                for body in unwritable:
                    headers = {**await c.dpop("POST", target), "Content-Type": "application/json"}
                    answers.append(await c.ctx.send("POST", target, headers=headers, content=body))
            return answers

    answers = run(scenario())
    assert [(a.status_code, a.json()) for a in answers] == [(400, {"error": "invalid_request"})] * 6
    assert not {"msg_s1", "msg_s2", "msg_s3"} & set(BOT.runs)


@pytest.mark.parametrize(
    ("method", "rest", "expected"),
    [
        ("POST", "", ("create", None)),
        ("GET", "", None),
        ("POST", "/c_1/messages", ("send", "c_1")),
        ("GET", "/c_1/events", ("events", "c_1")),
        ("POST", "/c_1/close", ("close", "c_1")),
        ("GET", "/c_1/messages", None),
        ("POST", "/c_1/events", None),
        ("POST", "/c_1", None),
        ("POST", "/c_1/close/x", None),
        ("POST", "//messages", None),
    ],
)
def test_conversation_routes(method: str, rest: str, expected: Any) -> None:
    assert conversation_route(method, rest) == expected
