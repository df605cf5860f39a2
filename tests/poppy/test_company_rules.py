"""The token and revocation endpoints' own rules, with requests the SDK's personal agent
signs (its conformance context's assertion and proof makers), over TLS on sqlite and
PostgreSQL: replayed proofs are refused by every Provider sharing the store (PAP-4.3-06),
renewal ends the old token, only admitted agents get Sessions, and grants not offered yet
are refused in the protocol's words."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlencode

import pytest
from personal_agent_protocol.discovery import DiscoveryClient

from pactmw.core.http import Request, Response
from pactmw.provider import RateLimit
from pactmw.provider.poppy._credentials import token_hash
from tests.support.clock import wait_for_room_in_window
from tests.support.poppy_accounts import JWT_BEARER, session_form
from tests.support.poppy_world import (
    SHOP,
    PoppyWorld,
    poppy_brand,
    world_fixture,
)

FORM = "application/x-www-form-urlencoded"


world = world_fixture()


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def handle(provider: Any, path: str, form: dict[str, str], proof: str | None) -> Response:
    """One request to a Provider through its blocking driver (another worker, no server)."""
    body = urlencode(form).encode()
    headers = [("content-type", FORM)] + ([("dpop", proof)] if proof else [])
    request = Request(method="POST", path=path, headers=tuple(headers))
    response: Response = provider.handle(request, lambda limit: body)
    return response


def test_pap_4_3_06_a_token_endpoint_proof_is_spent_for_every_provider(world: PoppyWorld) -> None:
    async def twice() -> tuple[Any, Any, str, dict[str, str]]:
        async with world.http() as http:
            ctx = world.context(http)
            metadata = await ctx.metadata()
            user = ctx.new_user()
            proof = await ctx.proof(user, "POST", metadata.token_endpoint)
            first = await ctx.token_request(user, await session_form(ctx, user), dpop=proof)
            again = await ctx.token_request(user, await session_form(ctx, user), dpop=proof)
            return first, again, proof, await session_form(ctx, user)

    first, again, proof, fresh = run(twice())
    assert first.status_code == 200
    assert (again.status_code, again.json()) == (400, {"error": "invalid_dpop_proof"})
    # Another process on the same store refuses it too (the replay memory is the store).
    other = world.other_provider()
    try:
        refused = handle(other, "/a2a/shop/poppy/token", fresh, proof)
    finally:
        other.close()
    assert (refused.status, json.loads(refused.body)) == (400, {"error": "invalid_dpop_proof"})


def test_renewal_keeps_the_session_and_ends_its_old_token(world: PoppyWorld) -> None:
    async def renew() -> tuple[Any, Any]:
        async with world.http() as http:
            ctx = world.context(http)
            metadata = await ctx.metadata()
            user = ctx.new_user()
            old = await ctx.session(user)
            new = await ctx.agent.sessions.renew(
                client_id=ctx.agent.identity.client_id,
                pairwise_user_id=user,
                issuer=metadata.issuer,
                token_endpoint=metadata.token_endpoint,
                tenant_id=ctx.tenant_id,
                session_id=old.session_id,
            )
            return old, new

    old, new = run(renew())
    assert new.session_id == old.session_id
    assert not new.signed_in
    store, now = world.provider.store, world.provider.poppy._clock()  # type: ignore[union-attr]
    assert (
        store.session_for_token(token_hash=token_hash(old.access_token.get_secret_value()), now=now)
        is None
    )
    kept = store.session_for_token(
        token_hash=token_hash(new.access_token.get_secret_value()), now=now
    )
    assert kept is not None
    assert (kept.session_id, kept.client_id, kept.signed_in) == (
        old.session_id,
        world.atlas.client_id,
        False,
    )


def test_a_session_is_bound_to_the_proof_key_and_lasts_the_configured_time(
    world: PoppyWorld,
) -> None:
    async def start() -> Any:
        async with world.http() as http:
            ctx = world.context(http)
            return await ctx.session(ctx.new_user())

    session = run(start())
    assert session.expires_in == 3600
    assert session.session_id.startswith("ses_")
    stored = world.provider.store.session_for_token(
        token_hash=token_hash(session.access_token.get_secret_value()),
        now=world.provider.poppy._clock(),  # type: ignore[union-attr]
    )
    assert stored is not None
    assert len(stored.jkt) == 43  # an RFC 7638 SHA-256 thumbprint, base64url


def test_only_admitted_agents_get_sessions(world: PoppyWorld) -> None:
    admitting_atlas = poppy_brand(agents=[world.atlas.client_id])

    async def forms() -> tuple[dict[str, str], dict[str, str], str, str]:
        async with world.http() as http:
            atlas = world.context(http)
            plain = world.context(http, identity=world.plain)
            metadata = await atlas.metadata()
            user = atlas.new_user()
            atlas_form = await session_form(atlas, user)
            plain_form = {
                "grant_type": JWT_BEARER,
                "assertion": plain.assertion(
                    {**plain.claims(subject=user, audience=metadata.issuer)},
                    identity=world.plain,
                ),
                **(await atlas.client_form(world.plain)),
            }
            return (
                atlas_form,
                plain_form,
                await atlas.proof(user, "POST", metadata.token_endpoint),
                await atlas.proof(user, "POST", metadata.token_endpoint),
            )

    atlas_form, plain_form, proof_one, proof_two = run(forms())
    provider = world.other_provider(admitting_atlas)
    try:
        refused = handle(provider, "/a2a/shop/poppy/token", plain_form, proof_one)
        admitted = handle(provider, "/a2a/shop/poppy/token", atlas_form, proof_two)
    finally:
        provider.close()
    assert (refused.status, json.loads(refused.body)) == (401, {"error": "invalid_client"})
    assert admitted.status == 200


@pytest.mark.parametrize(
    ("grant", "status", "error"),
    [
        # No sign-in has issued an Account Token yet: every one is unknown.
        ({"grant_type": "refresh_token", "refresh_token": "act_x", "session_id": "ses_x"}, 400,
         "invalid_grant"),
        ({"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": "d",
          "session_id": "ses_x"}, 400, "unsupported_grant_type"),
        ({"grant_type": "authorization_code", "code": "c", "redirect_uri": "https://a.example/",
          "code_verifier": "v", "session_id": "ses_x"}, 400, "unsupported_grant_type"),
        ({"grant_type": "password"}, 400, "unsupported_grant_type"),
        ({"grant_type": JWT_BEARER}, 400, "invalid_request"),
        ({"grant_type": JWT_BEARER, "assertion": "x", "session_id": "bad id"}, 400,
         "invalid_session"),
    ],
)  # fmt: skip
def test_grants_not_offered_or_malformed_are_refused_in_the_protocol_words(
    world: PoppyWorld, grant: dict[str, str], status: int, error: str
) -> None:
    async def send() -> Any:
        async with world.http() as http:
            ctx = world.context(http)
            user = ctx.new_user()
            return await ctx.token_request(user, {**grant, **(await ctx.client_form())})

    response = run(send())
    assert (response.status_code, response.json()) == (status, {"error": error})
    assert response.headers["cache-control"] == "no-store"


def test_revocation_needs_the_client_and_answers_any_token_alike(world: PoppyWorld) -> None:
    async def send() -> tuple[Any, Any, Any]:
        async with world.http() as http:
            ctx = world.context(http)
            metadata = await ctx.metadata()
            session = await ctx.session(ctx.new_user())
            headers = {"Content-Type": FORM}

            async def revoke(form: dict[str, str]) -> Any:
                content = urlencode(form).encode()
                return await ctx.send(
                    "POST", metadata.revocation_endpoint, headers=headers, content=content
                )

            token = session.access_token.get_secret_value()
            known = await revoke({"token": token, **(await ctx.client_form())})
            unknown = await revoke({"token": "sat_unknown", **(await ctx.client_form())})
            anonymous = await revoke({"token": token})
            return known, unknown, anonymous

    known, unknown, anonymous = run(send())
    for response in (known, unknown):
        assert (response.status_code, response.json()) == (200, {})
        assert response.headers["cache-control"] == "no-store"
    assert (anonymous.status_code, anonymous.json()) == (401, {"error": "invalid_client"})


def test_discovery_is_served_on_the_brand_domain_and_checked_by_the_sdk(
    world: PoppyWorld,
) -> None:
    async def discover() -> Any:
        async with world.http() as http:
            ctx = world.context(http)
            return await DiscoveryClient(reactor=ctx.agent.reactor).discover(SHOP)

    company = run(discover())
    issuer = "https://shop.example/a2a/shop/poppy"
    assert company.document.organization.domain == SHOP
    assert str(company.document.auth.issuer) == issuer
    assert company.oauth_metadata.issuer == issuer
    assert str(company.oauth_metadata.token_endpoint) == issuer + "/token"
    assert list(company.oauth_metadata.poppy_domains) == [SHOP]
    assert "ES256" in company.oauth_metadata.dpop_signing_alg_values_supported

    def get(path: str, host: str) -> Response:
        request = Request(method="GET", path=path, headers=(("host", host),))
        response: Response = world.provider.handle(request, lambda limit: b"")
        return response

    served = get("/.well-known/poppy.json", "SHOP.example:443")
    assert served.status == 200
    assert json.loads(served.body)["organization"]["domain"] == SHOP
    for path, host in [
        ("/.well-known/poppy.json", "other.example"),
        ("/.well-known/poppy.json", "[::1]"),
        ("/.well-known/oauth-authorization-server/a2a/nobody/poppy", SHOP),
    ]:
        refused = get(path, host)
        assert refused.status == 404


def test_pap_4_3_18_token_requests_are_limited_per_agent_user(world: PoppyWorld) -> None:
    async def forms() -> tuple[list[tuple[dict[str, str], str]], dict[str, str], str]:
        async with world.http() as http:
            ctx = world.context(http)
            metadata = await ctx.metadata()
            user, other = ctx.new_user(), ctx.new_user()
            same = [
                (
                    await session_form(ctx, user),
                    await ctx.proof(user, "POST", metadata.token_endpoint),
                )
                for _ in range(3)
            ]
            return (
                same,
                await session_form(ctx, other),
                await ctx.proof(other, "POST", metadata.token_endpoint),
            )

    same, other_form, other_proof = run(forms())
    # The Provider's clock is the real one: the three requests must fall in one window.
    wait_for_room_in_window(60.0, 10.0)
    provider = world.other_provider(token_rate_limit=RateLimit(per_user=2, window=60.0))
    try:
        answers = [handle(provider, "/a2a/shop/poppy/token", form, proof) for form, proof in same]
        other = handle(provider, "/a2a/shop/poppy/token", other_form, other_proof)
    finally:
        provider.close()
    assert [a.status for a in answers] == [200, 200, 429]
    assert json.loads(answers[2].body) == {"error": "rate_limited"}
    assert 1 <= int(dict(answers[2].headers)["Retry-After"]) <= 60
    assert other.status == 200  # another user of the same agent has a budget of its own
