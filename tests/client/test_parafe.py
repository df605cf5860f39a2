"""`ParafeBrokerClient` against a broker that misbehaves: fixed answers on a static server.

The broker's well-behaved wire is tested against a stand-in broker in
tests/parafe_integration; here each answer is one a broker should not send, and each must be
one of pactmw's errors.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pactmw.client import (
    AsyncParafeBrokerClient,
    BrokerRefused,
    ParafeBrokerClient,
    ResponseInvalid,
)
from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.parafe import BrokerRetry
from tests.client.support import StaticServer

NEVER_AGAIN = BrokerRetry(retries=0)


def registration(**changes: Any) -> dict[str, Any]:
    return {
        "agent_id": "agent-1",
        "credential": "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhZ2VudC0xIn0.c2ln",
        "identity_assurance": "self_registered",
        "verification_tier": "unverified",
        **changes,
    }


UNPARSABLE_CLAIM = {"claim_url": "https://[::1/claim", "code": "c-1", "expires_at": "2026-12-03"}


def test_a_claim_link_that_is_not_a_url(static: StaticServer) -> None:
    """A claim URL `urlsplit` cannot read (an unclosed IPv6 bracket) is an unusable claim
    link: `ResponseInvalid` for a registration or a new link, none on a refusal. Each raised
    a bare ValueError, the refusal's from building `BrokerRefused` itself."""
    static.json("/agents/register", registration(claim=UNPARSABLE_CLAIM))
    agent = ParafeBrokerClient(static.base, retry=NEVER_AGAIN)
    with pytest.raises(ResponseInvalid, match="claim link"):
        agent.register(generate_private_jwk("ES256"))

    static.json("/agents/register", registration())
    agent.register(generate_private_jwk("ES256"))
    static.json("/agents/agent-1/claim-link", UNPARSABLE_CLAIM)
    with pytest.raises(ResponseInvalid, match="claim link"):
        agent.create_claim_link()

    refusal = {"error": "identity_required", "claim": UNPARSABLE_CLAIM}
    static.json("/agents/agent-1/claim-status", refusal, status=403)
    with pytest.raises(BrokerRefused) as refused:
        agent.claim_status()
    assert (refused.value.code, refused.value.claim_link) == ("identity_required", None)

    async def run() -> None:
        aagent = AsyncParafeBrokerClient(
            static.base, credential=agent.credential, retry=NEVER_AGAIN
        )
        with pytest.raises(ResponseInvalid, match="claim link"):
            await aagent.create_claim_link()
        with pytest.raises(BrokerRefused):
            await aagent.claim_status()

    asyncio.run(run())


@pytest.mark.parametrize("credential", ["cred\r\nX-Injected: 1", "cred\x00", "cred-€"])
def test_a_credential_no_header_can_carry_is_refused(static: StaticServer, credential: str) -> None:
    """The credential goes in the `Authorization` header of every call as the agent. One with
    CR, LF, NUL or non-ASCII text was kept, and each later call raised a bare ValueError or
    UnicodeEncodeError while writing that header; it is refused when it arrives."""
    static.json("/agents/register", registration(credential=credential))
    agent = ParafeBrokerClient(static.base, retry=NEVER_AGAIN)
    with pytest.raises(ResponseInvalid, match="credential"):
        agent.register(generate_private_jwk("ES256"))

    static.json("/agents/register", registration())
    agent.register(generate_private_jwk("ES256"))
    renewal = {"renewed": True, "agent_id": "agent-1", "credential": credential}
    static.json("/agents/agent-1/renew", renewal)

    async def run() -> None:
        aagent = AsyncParafeBrokerClient(
            static.base, credential=agent.credential, retry=NEVER_AGAIN
        )
        with pytest.raises(ResponseInvalid, match="credential"):
            await aagent.renew()

    asyncio.run(run())
