"""Account Tokens at the token and revocation endpoints (§4.8, §4.9), over TLS with the SDK's
personal agent signing every request, on sqlite and PostgreSQL.

Device sign-in issues the first Account Token of a grant (tests/poppy/test_device_sign_in.py
drives it with a person in Chromium); to stay fast and exact, each test here writes that
grant and token into the store itself, as the sign-in does, and everything after (signing
Sessions in, rotation, scopes, sign-out) goes through the endpoints."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from pactmw.provider.poppy._credentials import token_hash
from tests.support.poppy_accounts import GRANTED_SCOPES, Agent, scenario, signed_in
from tests.support.poppy_world import PoppyWorld, dpop_call, world_fixture

world = world_fixture()


def test_an_account_token_signs_a_new_session_in_and_rotates(world: PoppyWorld) -> None:
    async def body(agent: Agent) -> Any:
        user = agent.ctx.new_user()
        first = signed_in(world, user)
        session = await agent.ctx.session(user)
        signing_in = await agent.refresh(user, first, session.session_id)
        second = signing_in.json()["refresh_token"]
        replayed = await agent.refresh(user, first, session.session_id)
        successor = await agent.refresh(user, second, session.session_id)
        return session, signing_in, replayed, successor

    session, signing_in, replayed, successor = scenario(world, body)
    answer = signing_in.json()
    assert signing_in.status_code == 200
    assert signing_in.headers["cache-control"] == "no-store"
    assert (answer["signed_in"], answer["scope"], answer["session_id"]) == (
        True,
        "orders:read orders:write",
        session.session_id,
    )
    assert answer["token_type"] == "DPoP"
    assert answer["refresh_token"].startswith("act_")
    stored = world.provider.store.get_session(session.session_id)
    assert stored is not None
    assert (stored.account, stored.scopes) == ("alice", GRANTED_SCOPES)
    assert stored.signed_in
    # Each sign-in gives the Session a new token; the one before stops working.
    now = world.provider.poppy._clock()  # type: ignore[union-attr]
    assert (
        world.provider.store.session_for_token(
            token_hash=token_hash(answer["access_token"]), now=now
        )
        is None
    )
    latest = successor.json()["access_token"]
    assert world.provider.store.session_for_token(token_hash=token_hash(latest), now=now)
    # lifecycle.rotated-token: the rotated-away token is refused, its successor works.
    assert (replayed.status_code, replayed.json()) == (400, {"error": "invalid_grant"})
    assert successor.status_code == 200
    assert successor.json()["signed_in"] is True


def test_pap_4_4_02_narrower_scopes_then_never_wider(world: PoppyWorld) -> None:
    async def body(agent: Agent) -> Any:
        user = agent.ctx.new_user()
        token = signed_in(world, user)
        session = await agent.ctx.session(user)
        narrower = await agent.refresh(user, token, session.session_id, scope="orders:read")
        wider = await agent.refresh(
            user, narrower.json()["refresh_token"], session.session_id, scope="orders:write"
        )
        return narrower, wider

    narrower, wider = scenario(world, body)
    assert (narrower.status_code, narrower.json()["scope"]) == (200, "orders:read")
    assert (wider.status_code, wider.json()) == (400, {"error": "invalid_scope"})


def test_pap_4_8_03_another_users_session_is_refused_and_nothing_is_spent(
    world: PoppyWorld,
) -> None:
    async def body(agent: Agent) -> Any:
        user, other = agent.ctx.new_user(), agent.ctx.new_user()
        token = signed_in(world, user)
        foreign = await agent.ctx.session(other)
        refused = await agent.refresh(user, token, foreign.session_id)
        unknown = await agent.refresh(user, token, "ses_unknown")
        own = await agent.ctx.session(user)
        still = await agent.refresh(user, token, own.session_id)
        return refused, unknown, still

    refused, unknown, still = scenario(world, body)
    assert (refused.status_code, refused.json()) == (400, {"error": "invalid_session"})
    assert (unknown.status_code, unknown.json()) == (400, {"error": "invalid_session"})
    assert still.status_code == 200


def test_pap_4_8_04_a_session_never_signs_in_to_another_account(world: PoppyWorld) -> None:
    async def body(agent: Agent) -> Any:
        user = agent.ctx.new_user()
        alice, bob = signed_in(world, user, "alice"), signed_in(world, user, "bob")
        session = await agent.ctx.session(user)
        assert (await agent.refresh(user, alice, session.session_id)).status_code == 200
        mismatch = await agent.refresh(user, bob, session.session_id)
        fresh = await agent.ctx.session(user)
        elsewhere = await agent.refresh(user, bob, fresh.session_id)
        return mismatch, elsewhere

    mismatch, elsewhere = scenario(world, body)
    assert (mismatch.status_code, mismatch.json()) == (400, {"error": "account_mismatch"})
    assert elsewhere.status_code == 200  # bob's token was not spent by the refusal


def test_pap_4_8_02_an_account_token_works_only_for_its_agent(world: PoppyWorld) -> None:
    async def body(agent: Agent) -> Any:
        user = agent.ctx.new_user()
        token = signed_in(world, user)
        session = await agent.ctx.session(user)
        stolen = await agent.refresh(user, token, session.session_id, identity=world.plain)
        own = await agent.refresh(user, token, session.session_id)
        return stolen, own

    stolen, own = scenario(world, body)
    assert (stolen.status_code, stolen.json()) == (400, {"error": "invalid_grant"})
    assert own.status_code == 200


def test_revoking_any_token_of_a_sign_in_signs_out_its_sessions(world: PoppyWorld) -> None:
    async def body(agent: Agent) -> Any:
        user = agent.ctx.new_user()
        first = signed_in(world, user)
        one, two = await agent.ctx.session(user), await agent.ctx.session(user)
        signed_one = await agent.refresh(user, first, one.session_id)
        second = signed_one.json()["refresh_token"]
        signed_two = await agent.refresh(user, second, two.session_id)
        third = signed_two.json()["refresh_token"]
        by_another_agent = await agent.revoke(first, world.plain)
        still = world.provider.store.get_session(one.session_id)
        revoked = await agent.revoke(first)  # a token rotated away before: the whole sign-in
        after = await agent.refresh(user, third, one.session_id)
        return signed_one, signed_two, by_another_agent, still, revoked, after

    signed_one, signed_two, by_another_agent, still, revoked, after = scenario(world, body)
    assert (by_another_agent.status_code, by_another_agent.json()) == (200, {})
    assert still is not None
    assert still.signed_in  # another agent's revocation ends nothing
    assert (revoked.status_code, revoked.json()) == (200, {})
    now = world.provider.poppy._clock()  # type: ignore[union-attr]
    for answer in (signed_one, signed_two):
        session = world.provider.store.session_for_token(
            token_hash=token_hash(answer.json()["access_token"]), now=now
        )
        assert session is not None  # the Session goes on, signed out (§4.9)
        assert not session.signed_in
    assert (after.status_code, after.json()) == (400, {"error": "invalid_grant"})


def test_a_token_that_is_not_ascii_is_just_not_one_of_ours(world: PoppyWorld) -> None:
    # A form value is any UTF-8 text; no token pactmw issues is anything but ASCII.
    async def body(agent: Agent) -> Any:
        user = agent.ctx.new_user()
        session = await agent.ctx.session(user)
        refreshed = await agent.refresh(user, "act_é", session.session_id)
        revoked = await agent.revoke("act_é")
        return refreshed, revoked

    refreshed, revoked = scenario(world, body)
    assert (refreshed.status_code, refreshed.json()) == (400, {"error": "invalid_grant"})
    assert (revoked.status_code, revoked.json()) == (200, {})  # RFC 7009 §2.2


@pytest.mark.parametrize("how", ["grant", "account"])
def test_guide_co_account_01_disconnecting_signs_out_like_revocation(
    world: PoppyWorld, how: str
) -> None:
    async def body(agent: Agent) -> Any:
        user = agent.ctx.new_user()
        account = f"acct_{how}_" + secrets.token_hex(4)
        token = signed_in(world, user, account)
        session = await agent.ctx.session(user)
        signed = await agent.refresh(user, token, session.session_id)
        grant_id = world.provider.store.account_token(token_hash(token)).grant_id  # type: ignore[union-attr]
        if how == "grant":  # the operator, or the person on the connected-agents page
            assert world.provider.revoke_grant(grant_id)
        else:  # the account was disabled
            assert world.provider.revoke_account(account, brand_id="shop") == [grant_id]
        after = await agent.refresh(user, signed.json()["refresh_token"], session.session_id)
        return session, after

    session, after = scenario(world, body)
    stored = world.provider.store.get_session(session.session_id)
    assert stored is not None
    assert not stored.signed_in
    assert (after.status_code, after.json()) == (400, {"error": "invalid_grant"})


def test_the_api_serves_signed_in_sessions_and_sees_sign_out_at_once(world: PoppyWorld) -> None:
    async def body(agent: Agent) -> Any:
        ctx = agent.ctx
        user = ctx.new_user()
        token = signed_in(world, user)
        session = await ctx.session(user)
        url = ctx.url("/api/orders")

        async def read(access: str) -> Any:
            return await dpop_call(ctx, user, "GET", url, token=access)

        signed_out = await read(session.access_token.get_secret_value())
        signing_in = await agent.refresh(user, token, session.session_id, scope="orders:write")
        narrow = await read(signing_in.json()["access_token"])
        full = await agent.refresh(
            user, signed_in(world, user), (await ctx.session(user)).session_id
        )
        served = await read(full.json()["access_token"])
        account_token_at_api = await read(full.json()["refresh_token"])
        await agent.revoke(full.json()["refresh_token"])
        after_sign_out = await read(full.json()["access_token"])
        return signed_out, narrow, served, account_token_at_api, after_sign_out

    signed_out, narrow, served, account_token_at_api, after_sign_out = scenario(world, body)
    challenge = 'DPoP error="sign_in_required", scope="orders:read"'
    assert (signed_out.status_code, signed_out.json()) == (
        403,
        {"error": "sign_in_required", "scope": "orders:read"},
    )
    assert signed_out.headers["www-authenticate"] == challenge
    assert (narrow.status_code, narrow.json()["error"]) == (403, "insufficient_scope")
    assert (served.status_code, served.json()) == (200, {"orders": [], "account": "alice"})
    # PAP-4.8-01: an Account Token is no Session Token.
    assert (account_token_at_api.status_code, account_token_at_api.json()) == (
        401,
        {"error": "invalid_token"},
    )
    # PAP-4.9-01: the next request after sign-out is signed out.
    assert (after_sign_out.status_code, after_sign_out.json()["error"]) == (403, "sign_in_required")
