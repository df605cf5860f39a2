"""`agents block` reaches Poppy agents (`pactmw.provider.agent_admin.set_enabled`, what
`pactmw agents block`, `manage.py pactmw agents block` and `flask pactmw agents block` run),
over TLS with the SDK's personal agent signing every request: a blocked agent's live
Sessions are refused from their next request and it gets no new Session nor Account Token,
as a blocked PACT agent's grants are refused while it is blocked; `allow` lets the same
Sessions and grant work again."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from pactmw.core.http import Request
from pactmw.protocols.poppy import PoppyError
from pactmw.provider.agent_admin import Outcome, list_agents, set_enabled
from tests.support.logs import assert_logs_tame
from tests.support.poppy_accounts import Agent, session_form, signed_in
from tests.support.poppy_world import PoppyWorld, dpop_call, poppy_brand, world_fixture

world = world_fixture(stores=("sqlite",))


async def read_orders(agent: Agent, user: str, access: str) -> httpx.Response:
    ctx = agent.ctx
    return await dpop_call(ctx, user, "GET", ctx.url("/api/orders"), token=access)


def test_a_blocked_poppy_agent_is_refused_everywhere_until_allowed(
    world: PoppyWorld, caplog: pytest.LogCaptureFixture
) -> None:
    client_id = world.atlas.client_id
    answers: dict[str, httpx.Response] = {}

    async def body(agent: Agent) -> None:
        ctx = agent.ctx
        user = ctx.new_user()
        account_token = signed_in(world, user)
        session = await ctx.session(user)
        signing_in = await agent.refresh(user, account_token, session.session_id)
        assert signing_in.status_code == 200, signing_in.text
        access, account_token = (
            signing_in.json()["access_token"],
            signing_in.json()["refresh_token"],
        )
        signed_out = (await ctx.session(user)).access_token.get_secret_value()
        answers["before"] = await read_orders(agent, user, access)

        assert set_enabled(world.provider, client_id, False) == Outcome((f"blocked {client_id}",))
        answers["signed in"] = await read_orders(agent, user, access)
        answers["signed out"] = await read_orders(agent, user, signed_out)
        answers["new session"] = await ctx.token_request(user, await session_form(ctx, user))
        answers["refresh"] = await agent.refresh(user, account_token, session.session_id)
        blocked = [e.status for e in list_agents(world.provider) if e.issuer == client_id]
        assert blocked == ["blocked"]

        assert set_enabled(world.provider, client_id, True) == Outcome((f"allowed {client_id}",))
        answers["after allow"] = await read_orders(agent, user, access)
        answers["refresh after allow"] = await agent.refresh(
            user, account_token, session.session_id
        )

    async def go() -> None:
        async with world.http() as http:
            await body(Agent(world.context(http)))

    with caplog.at_level(logging.INFO, logger="pactmw"):
        asyncio.run(go())
    assert answers["before"].status_code == 200
    # The live Sessions, signed in or out, are refused at their next request, as an unknown
    # Session Token is: the block is read on every request, like PACT's.
    for refused in ("signed in", "signed out"):
        assert (answers[refused].status_code, answers[refused].json()) == (
            401,
            {"error": "invalid_token"},
        ), refused
    # No new Session, no Account Token rotation: the agent is a client the Brand refuses.
    for refused in ("new session", "refresh"):
        assert (answers[refused].status_code, answers[refused].json()) == (
            401,
            {"error": "invalid_client"},
        ), refused
    # Blocking ends nothing for good: allowed again, the same Session and grant work.
    assert answers["after allow"].status_code == 200
    assert answers["refresh after allow"].status_code == 200
    messages = assert_logs_tame(caplog.records)
    assert any(
        "poppy session refused: error=invalid_token" in m and "this agent is blocked" in m
        for m in messages
    ), messages


def test_blocking_one_poppy_agent_leaves_the_others_alone(world: PoppyWorld) -> None:
    async def go() -> tuple[int, int]:
        async with world.http() as http:
            ctx = world.context(http)
            user = ctx.new_user()
            assert set_enabled(world.provider, world.plain.client_id, False).error is None
            try:
                started = await ctx.token_request(user, await session_form(ctx, user))
                access = started.json()["access_token"]
                read = await read_orders(Agent(ctx), user, access)
            finally:
                set_enabled(world.provider, world.plain.client_id, True)
            return started.status_code, read.status_code

    # Atlas is not blocked: its Session starts, and reaches the API (403: signed out).
    assert asyncio.run(go()) == (200, 403)


def test_a_session_of_an_agent_the_brand_no_longer_admits_is_refused(world: PoppyWorld) -> None:
    # The same rule as a block: a Brand restarted with a narrower poppy.agents (another
    # Provider on the same store here) refuses the live Sessions of the agents it dropped.
    async def make() -> tuple[str, list[str]]:
        async with world.http() as http:
            ctx = world.context(http)
            user = ctx.new_user()
            session = await ctx.session(user)
            url = ctx.url("/api/orders")
            proofs = [await ctx.proof(user, "GET", url, token=session) for _ in range(2)]
            return session.access_token.get_secret_value(), proofs

    access, (one, two) = asyncio.run(make())

    def request(proof: str) -> Request:
        headers = (("authorization", f"DPoP {access}"), ("dpop", proof))
        return Request(method="GET", path="/api/orders", headers=headers)

    narrower = world.other_provider(poppy_brand(agents=[world.plain.client_id]))
    unchanged = world.other_provider()
    try:
        with pytest.raises(PoppyError) as refused:
            narrower.poppy_session("shop", request(one))
        caller = unchanged.poppy_session("shop", request(two))
    finally:
        narrower.close()
        unchanged.close()
    assert (refused.value.status, refused.value.error) == (401, "invalid_token")
    assert refused.value.detail == "this agent is not admitted"
    assert caller.client_id == world.atlas.client_id


def test_a_poppy_agent_that_only_talks_signed_out_is_listed(world: PoppyWorld) -> None:
    """The Brand admits any agent, and `plain` starts a Session no one signs in to: it holds
    no grant, yet `agents list` shows it while its Session is live, and `agents block`
    finds it listed (no warning of a misspelt id)."""
    plain = world.plain.client_id
    assert set_enabled(world.provider, plain, False).lines[1:] == (
        f"{plain} is no agent agents list shows: a Poppy agent without a live grant or "
        "Session, or a misspelt id",
    )  # no Session yet
    set_enabled(world.provider, plain, True)

    async def start() -> None:
        async with world.http() as http:
            ctx = world.context(http, identity=world.plain)
            await ctx.session(ctx.new_user())

    asyncio.run(start())
    listed = [
        (e.source, e.brand_id, e.status, e.added_at)
        for e in list_agents(world.provider)
        if e.issuer == plain
    ]
    assert listed == [("poppy", "shop", "allowed", None)]  # no grant: no ADDED
    try:
        assert set_enabled(world.provider, plain, False) == Outcome((f"blocked {plain}",))
        blocked = [e.status for e in list_agents(world.provider) if e.issuer == plain]
        assert blocked == ["blocked"]
    finally:
        set_enabled(world.provider, plain, True)
