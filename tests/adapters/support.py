"""What the adapter tests share besides the contract harness: the protocol's 401 challenges and
their check, a delegation world (a Provider whose Brand offers delegation, in memory), and an
ASGI server without the WebSocket denial extension."""

from __future__ import annotations

import time
import uuid

import httpx
from starlette.types import ASGIApp, Receive, Scope, Send

from pactmw.core.jose import sign_compact
from pactmw.core.jwk import generate_private_jwk, public_key_set
from pactmw.protocols.delegation import SigningKeys
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from pactmw.provider import Brand, Provider
from pactmw.provider.brand import DelegationConfig
from pactmw.store import open_store
from tests.support.parties import ISSUER

#: The protocol's 401 challenges: no credential, and a credential refused.
CHALLENGE = 'Bearer realm="a2a"'
INVALID_TOKEN = 'Bearer realm="a2a", error="invalid_token"'


def assert_refused(response: httpx.Response, challenge: str = CHALLENGE) -> None:
    """The protocol's 401: exact challenge, empty body, never the A2A content type."""
    assert response.status_code == 401, (response.status_code, response.text[:300])
    assert response.headers.get_list("www-authenticate") == [challenge]
    assert response.content == b""
    assert "application/a2a+json" not in response.headers.get("content-type", "")


# -- a delegation world: delegation tokens on an app's own endpoints -----------------------------

AUDIENCE = "urn:test:provider"
BASE = "https://provider.example"


class World:
    """One personal agent, and a Provider (memory store) whose Brand `acme` offers delegation:
    its identity tokens and delegation tokens, as the guarded app's tests send them."""

    def __init__(self) -> None:
        self.agent_key = generate_private_jwk("ES256", kid="pa")
        registry = AgentRegistry(
            [RegisteredAgent(issuer=ISSUER, jwks=public_key_set([self.agent_key]))]
        )
        self.verifier = IdentityVerifier(audience=AUDIENCE, registry=registry)
        config = DelegationConfig(
            scopes={"orders:read": "See orders", "orders:cancel": "Cancel orders"},
            login_url="/login",
        )
        self.provider = Provider(
            base_url=BASE,
            verifier=self.verifier,
            store=open_store("memory://"),
            brands=[Brand(id="acme", name="Acme", handler=lambda t: "hi", delegation=config)],
            signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
        )

    def identity(self, sub: str = "user-1") -> str:
        now = int(time.time())
        claims = {"iss": ISSUER, "sub": sub, "aud": AUDIENCE, "iat": now, "exp": now + 120}
        return "Bearer " + sign_compact(claims, self.agent_key, typ="JWT")

    def delegation(
        self, scopes: tuple[str, ...], sub: str = "user-1", revoked: bool = False
    ) -> str:
        granted = self.provider.grant_delegation(
            "acme",
            # A fresh account per token: a second approval for one account widens its grant.
            account=f"acct-{sub}-{uuid.uuid4().hex[:8]}",
            agent_issuer=ISSUER,
            agent_sub=sub,
            scopes=scopes,
        )
        if revoked:
            assert self.provider.revoke_grant(granted.grant_id)
        return granted.header


class WithoutDenialExtension:
    """A server that cannot send a response to a handshake: the extension taken away."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            extensions = dict(scope.get("extensions") or {})
            extensions.pop("websocket.http.response", None)
            scope = {**scope, "extensions": extensions}
        await self.app(scope, receive, send)
