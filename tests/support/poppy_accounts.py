"""Signed-in Poppy Users without a browser, for tests in a `PoppyWorld`: a grant and its
first Account Token written into the store as a completed Device Sign-In leaves them
(`signed_in`), and the SDK's personal agent at the token and revocation endpoints (`Agent`).

tests/poppy/test_device_sign_in.py drives the sign-in itself, with a person in Chromium;
the tests that only need its result stay fast and exact with these.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any
from urllib.parse import urlencode

from pactmw.provider.poppy._credentials import token_hash
from tests.support.poppy_world import PoppyWorld

__all__ = ["GRANTED_SCOPES", "JWT_BEARER", "Agent", "scenario", "session_form", "signed_in"]

#: The scopes `signed_in` grants.
GRANTED_SCOPES = ("orders:read", "orders:write")
DAY = 86_400.0
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def signed_in(world: PoppyWorld, user: str, account: str = "alice", client: str = "") -> str:
    """What a completed sign-in leaves: a grant of `user` at `account` and its first Account
    Token (returned)."""
    store, now = world.provider.store, world.provider.poppy._clock()  # type: ignore[union-attr]
    grant = store.upsert_grant(
        grant_id="grt_" + secrets.token_hex(8),
        brand_id="shop",
        account=account,
        client_id=client or world.atlas.client_id,
        pa_sub=user,
        scopes=GRANTED_SCOPES,
        now=now,
        expires_at=now + 30 * DAY,
    )
    token = "act_" + secrets.token_urlsafe(16)
    store.issue_account_token(
        token_hash=token_hash(token),
        grant_id=grant.grant_id,
        brand_id="shop",
        client_id=client or world.atlas.client_id,
        scopes=GRANTED_SCOPES,
        now=now,
        expires_at=now + 30 * DAY,
    )
    return token


class Agent:
    """The SDK's personal agent (its conformance context) for one test."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    async def refresh(
        self, user: str, token: str, session_id: str, scope: str | None = None, **client: Any
    ) -> Any:
        form = {"grant_type": "refresh_token", "refresh_token": token, "session_id": session_id}
        if scope is not None:
            form["scope"] = scope
        form.update(await self.ctx.client_form(client.get("identity")))
        return await self.ctx.token_request(user, form)

    async def revoke(self, token: str, identity: Any = None) -> Any:
        metadata = await self.ctx.metadata()
        form = {"token": token, **(await self.ctx.client_form(identity))}
        return await self.ctx.send(
            "POST",
            metadata.revocation_endpoint,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            content=urlencode(form).encode(),
        )


def scenario(world: PoppyWorld, body: Any) -> Any:
    """Run `body(agent)` with an `Agent` of `world`, and answer what it answered."""

    async def go() -> Any:
        async with world.http() as http:
            return await body(Agent(world.context(http)))

    return asyncio.run(go())


async def session_form(ctx: Any, user: str, **extra: str) -> dict[str, str]:
    """The token request form that opens a signed-out Session of `user` (`extra` added)."""
    metadata = await ctx.metadata()
    return {
        "grant_type": JWT_BEARER,
        "assertion": ctx.assertion(ctx.claims(subject=user, audience=metadata.issuer)),
        **(await ctx.client_form()),
        **extra,
    }
