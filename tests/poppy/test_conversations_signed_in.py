"""Poppy conversations across a real Device Sign-In (PAP-7.11-01, PAP-7.2-01): the person
approves in headless Chromium, the SDK's own conformance cases run by id over TLS, on sqlite
and PostgreSQL. The bot needs `orders:read` for "orders": signed out, the conversation
answers with an `authorization` event and a message; signed in, the same conversation goes
on; once an account's, a signed-out Session is told to sign in."""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from personal_agent_protocol.conformance import (
    Scenario,
)
from personal_agent_protocol.models import Message

from pactmw.provider import Reply, Turn
from tests.poppy.support import SIGNED_IN_CASES
from tests.support.poppy_world import (
    SCENARIO,
    BrowserDriver,
    PoppyWorld,
    case_param,
    dpop_call,
    signed_in_brand,
    world_fixture,
)

PROMPT = "Where are my orders?"


def orders_bot(turn: Turn) -> Reply:
    if "orders" in turn.text:
        turn.require_scopes("orders:read", message="Sign in so I can look up your orders.")
        return Reply(text=f"{turn.delegation.account if turn.delegation else '?'}: no orders")
    return Reply(text=f"You said: {turn.text}")


world = world_fixture(attrs.evolve(signed_in_brand(), handler=orders_bot))


@pytest.fixture(scope="module")
def person(world: PoppyWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserDriver]:
    with world.chromium(tmp_path_factory) as browser:
        yield world.browser_driver(browser)


@pytest.mark.parametrize("case_id", [case_param(case_id) for case_id in SIGNED_IN_CASES])
def test_sdk_signed_in_conversation_case(
    world: PoppyWorld, person: BrowserDriver, case_id: str
) -> None:
    scenario: Scenario = dataclasses.replace(SCENARIO, account_prompt=PROMPT)
    world.assert_case_passes(case_id, driver=person, scenario=scenario)


def test_a_message_id_is_the_users_across_accounts(
    world: PoppyWorld, person: BrowserDriver
) -> None:
    # PAP-7.3-01: a message id is unique for the User, not per account. The same id with
    # other content is `409 message_id_conflict` whoever of that User sends it (the SDK's
    # reference company checks the content first); the same message again is a retry,
    # answered only to a Session that may read the conversation (PAP-7.2-01).
    async def test(ctx: Any) -> list[tuple[int, str]]:
        user = ctx.new_user()
        alice = await ctx.sign_in(user, await ctx.session(user), account="alice")
        bob = await ctx.sign_in(user, await ctx.session(user), account="bob")
        signed_out = await ctx.session(user)
        endpoint = await ctx.conversations_endpoint()
        first = Message(id="msg_" + secrets.token_urlsafe(12), sender="agent", text="hello")
        other = first.model_copy(update={"text": "something else"})
        answers = [await _start(ctx, user, alice.token, endpoint, first)]
        for token in (bob.token, signed_out):
            for message in (other, first):
                answers.append(await _start(ctx, user, token, endpoint, message))
        return answers

    async def one() -> list[tuple[int, str]]:
        async with world.http() as http:
            return await test(world.context(http, driver=person))

    assert asyncio.run(one()) == [
        (201, ""),
        (409, "message_id_conflict"),
        (404, "conversation_not_found"),
        (409, "message_id_conflict"),
        (403, "sign_in_required"),
    ]


async def _start(
    ctx: Any, user: str, token: Any, endpoint: str, message: Message
) -> tuple[int, str]:
    """`POST E` with `message`: the status and the error (empty for a success)."""
    body = {"message": message.model_dump(mode="json", exclude_none=True)}
    answer = await dpop_call(ctx, user, "POST", endpoint, body, token=token)
    return answer.status_code, "" if answer.status_code < 300 else answer.json()["error"]
