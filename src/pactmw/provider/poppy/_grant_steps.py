"""What the token endpoint's grants share (§4.2, §4.3, §4.7): the per-user rate limit, spending
the DPoP proof last of the checks, the token response, and signing a Session in."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from attrs import frozen

from pactmw.core.dpop import DpopError, DpopProof, spend_dpop_proof
from pactmw.core.http import Response
from pactmw.core.replay import StoreReplayMemory
from pactmw.protocols.poppy import PoppyError, VerifiedAssertion, dpop_refusal
from pactmw.provider.delegated._responses import NO_STORE, json_response
from pactmw.provider.flow import Flow, SubFlow, store
from pactmw.provider.poppy._bounds import within_rate
from pactmw.provider.poppy._brands import PoppyBrand
from pactmw.provider.poppy._credentials import new_session_token, token_hash
from pactmw.provider.ratelimit import RateLimiter
from pactmw.store.base import Store


class _AgentRecord(Protocol):
    @property
    def brand_id(self) -> str: ...
    @property
    def client_id(self) -> str: ...


def is_agents(record: _AgentRecord | None, brand: PoppyBrand, client: VerifiedAssertion) -> bool:
    """Whether a stored Session or Account Token is this agent's at this Brand: another
    agent's or Brand's is refused (or, at sign-out, ignored) exactly as an unknown one."""
    return record is not None and (record.brand_id, record.client_id) == (
        brand.brand_id,
        client.client_id,
    )


def token_response(
    session_token: str,
    *,
    expires_in: int,
    scopes: tuple[str, ...],
    session_id: str,
    signed_in: bool,
    account_token: str | None = None,
) -> Response:
    """The token endpoint's answer: a DPoP-bound Session Token, and with a sign-in the
    Account Token as its `refresh_token` (§4.7)."""
    body: dict[str, object] = {
        "access_token": session_token,
        "token_type": "DPoP",
        "expires_in": expires_in,
        "scope": " ".join(scopes),
        "session_id": session_id,
        "signed_in": signed_in,
    }
    if account_token is not None:
        body["refresh_token"] = account_token
    return json_response(body, extra=NO_STORE)


@frozen
class GrantSteps:
    """The steps every grant of one Provider's token endpoints takes, over its store."""

    store: Store
    clock: Callable[[], float]
    dpop_replay: StoreReplayMemory
    #: Token requests per (agent, User ID), counted once the grant named the user: only
    #: verified agents are counted (GUIDE-rate-03), in the store when it is shared.
    limiter: RateLimiter

    def admit(self, client_id: str, user_id: str) -> SubFlow:
        """`429 rate_limited` when the agent's user is over the token endpoint's limit."""
        yield from within_rate(self.limiter, client_id, user_id, self.clock(), "token requests")

    def spend(self, proof: DpopProof) -> SubFlow:
        """Mark the proof's `jti` used, in the store (PAP-4.3-06): last of the checks."""
        try:
            yield store(spend_dpop_proof, proof=proof, replay=self.dpop_replay, now=self.clock())
        except DpopError as exc:
            raise dpop_refusal(exc, token_endpoint=True) from exc

    def signed_in(
        self,
        brand: PoppyBrand,
        client: VerifiedAssertion,
        proof: DpopProof,
        *,
        session_id: str,
        user_id: str,
        account: str,
        grant_id: str,
        scopes: tuple[str, ...],
        account_token: str,
        now: float,
    ) -> Flow:
        """Sign the agent's Session in with `scopes` under a fresh Session Token bound to the
        proof's key; the value is the token response, the Account Token as its
        `refresh_token` (§4.7)."""
        session_token = new_session_token()
        expires_in = int(brand.config.session_seconds)
        change = yield store(
            self.store.sign_in_session,
            session_id=session_id,
            brand_id=brand.brand_id,
            client_id=client.client_id,
            user_id=user_id,
            account=account,
            grant_id=grant_id,
            scopes=scopes,
            jkt=proof.thumbprint,
            token_hash=token_hash(session_token),
            now=now,
            expires_at=now + expires_in,
        )
        if change.kind != "changed":
            # Only a concurrent sign-in of this Session to another account gets here.
            raise PoppyError(400, change.kind, "the Session changed meanwhile")
        return token_response(
            session_token,
            expires_in=expires_in,
            scopes=scopes,
            session_id=session_id,
            signed_in=True,
            account_token=account_token,
        )


__all__ = [
    "GrantSteps",
    "is_agents",
    "token_response",
]
