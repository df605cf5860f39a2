"""Poppy conversations across a real Device Sign-In (PAP-7.11-01, PAP-7.2-01): the person
approves in headless Chromium, the SDK's own conformance cases run by id over TLS, on sqlite
and PostgreSQL. The bot needs `orders:read` for "orders": signed out, the conversation
answers with an `authorization` event and a message; signed in, the same conversation goes
on; once an account's, a signed-out Session is told to sign in."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import attrs
import pytest
from personal_agent_protocol.conformance import (
    Scenario,
)

from pactmw.provider import Reply, Turn
from tests.support.poppy_world import (
    SCENARIO,
    BrowserDriver,
    PoppyWorld,
    case_param,
    signed_in_brand,
    world_on,
)

PROMPT = "Where are my orders?"
#: The SDK's cases that need a person to sign in; each must pass, never skip.
SIGNED_IN_CASES = (
    "conversations.authorization-then-same-conversation",
    "conversations.signed-out-token-on-account-conversation",
)


def orders_bot(turn: Turn) -> Reply:
    if "orders" in turn.text:
        turn.require_scopes("orders:read", message="Sign in so I can look up your orders.")
        return Reply(text=f"{turn.delegation.account if turn.delegation else '?'}: no orders")
    return Reply(text=f"You said: {turn.text}")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PoppyWorld]:
    brand = attrs.evolve(signed_in_brand(), handler=orders_bot)
    yield from world_on(request, tmp_path_factory, brands=(brand,))


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
