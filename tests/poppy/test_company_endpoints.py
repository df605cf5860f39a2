"""The Poppy company side over real TLS, driven by the SDK's own personal agent: discovery,
Session start and renewal at the token endpoint, and the refusals of forged, replayed and
mismatched requests, each SDK conformance case run by its ledger-named id, on sqlite and
PostgreSQL (plan step 4, docs/design/poppy.md)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from pactmw.protocols.poppy import JWT_BEARER_GRANT
from tests.poppy.support import STEP_4_CASES
from tests.support.poppy_world import PoppyWorld, case_param, world_fixture

world = world_fixture()


@pytest.mark.parametrize("case_id", [case_param(case_id) for case_id in STEP_4_CASES])
def test_sdk_conformance_case(world: PoppyWorld, case_id: str) -> None:
    world.assert_case_passes(case_id)


def test_an_assertion_date_past_a_double_is_refused(world: PoppyWorld) -> None:
    # JSON integers have no limit: an `iat` of 10**400 is one, and no float holds it.
    async def scenario() -> list[httpx.Response]:
        async with world.http() as http:
            ctx = world.context(http)
            user = ctx.new_user()
            issuer = (await ctx.metadata()).issuer
            answers = []
            for far_client in (True, False):
                client = await ctx.client_form()
                session = ctx.claims(subject=user, audience=issuer)
                if far_client:
                    claims = ctx.claims(subject=ctx.agent.identity.client_id, audience=issuer)
                    claims["iat"] = 10**400
                    client["client_assertion"] = ctx.assertion(claims)
                else:
                    session["iat"] = 10**400
                grant = {"grant_type": JWT_BEARER_GRANT, "assertion": ctx.assertion(session)}
                answers.append(await ctx.token_request(user, {**grant, **client}))
            return answers

    client_refused, session_refused = asyncio.run(scenario())
    assert (client_refused.status_code, client_refused.json()) == (401, {"error": "invalid_client"})
    assert (session_refused.status_code, session_refused.json()) == (
        400,
        {"error": "invalid_grant"},
    )
