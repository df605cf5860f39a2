"""The verification flows and their two drivers.

Each check is written once, as a generator that yields what it needs (broker keys, a DID
document, a replay-memory answer, the broker's online answer) and receives the answers, or
the exception getting them raised, thrown in at the `yield`. `ParafeVerifier.verify` and
`averify` (and the receipt verifier's pair) are the small drivers that answer with blocking
or non-blocking I/O, as `pactmw.protocols.identity` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from pactmw.core.jose import HeaderCache
from pactmw.core.jwk import PublicJWK
from pactmw.core.replay import MemoryReplayMemory, ReplayMemory
from pactmw.protocols.parafe._broker import KeySource
from pactmw.protocols.parafe._card import CardExtension, ScopeRequirement
from pactmw.protocols.parafe._consent import (
    ConsentClaims,
)
from pactmw.protocols.parafe._flows import (
    Flow,
    VerifiedConsent,
    action_receipt_flow,
    arun,
    consent_flow,
    index_ack_flow,
    online_flow,
    run,
    session_receipt_flow,
    token_flow,
)
from pactmw.protocols.parafe._online import (
    OnlineVerification,
)
from pactmw.protocols.parafe._receipts import (
    ActionReceipt,
    BrokerExpectations,
    IndexAck,
    SessionReceipt,
)

# -- the verifiers -------------------------------------------------------------------------


def _requirements(
    requirements: Mapping[str, ScopeRequirement | Mapping[str, Any]] | None,
) -> dict[str, ScopeRequirement] | None:
    if requirements is None:
        return None
    return {
        name: value if isinstance(value, ScopeRequirement) else ScopeRequirement.from_dict(value)
        for name, value in requirements.items()
    }


class ParafeVerifier:
    """Verifies the consent that incoming A2A messages carry, for one agent. Thread-safe.

    `agent_id` is this agent's Parafé id (tokens must name it as `target_agent_id`). `keys`
    is the one broker it trusts (`BrokerKeys`, or `StaticBrokerKeys` offline).
    `scope_requirements` (usually its own card's) are checked offline when given. Proofs are
    required unless `require_proof=False`. `replay` defaults to a per-process memory; pass a
    `StoreReplayMemory` when several processes serve the agent. `online=True` also asks the
    broker (§8) after the offline checks pass, catching revoked agents and closed sessions.
    `clock` is wall-clock epoch seconds.
    """

    def __init__(
        self,
        *,
        agent_id: str,
        keys: KeySource,
        scope_requirements: Mapping[str, ScopeRequirement | Mapping[str, Any]] | None = None,
        require_proof: bool = True,
        replay: ReplayMemory | None = None,
        online: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(agent_id, str) or not agent_id:
            raise ValueError("agent_id must be a non-empty string")
        self.agent_id = agent_id
        self.keys = keys
        self.scope_requirements = _requirements(scope_requirements)
        self.require_proof = require_proof
        self.replay: ReplayMemory = replay if replay is not None else MemoryReplayMemory()
        self.online = online
        self._clock = clock
        self._headers = HeaderCache()

    @classmethod
    def for_card(cls, card: CardExtension, keys: KeySource, **options: Any) -> ParafeVerifier:
        """A verifier for the agent a card entry describes (its id and scope requirements)."""
        return cls(
            agent_id=card.agent_id,
            keys=keys,
            scope_requirements=card.scope_requirements,
            **options,
        )

    def _flow(self, message: Any, action: str | None, initiator_key: Any) -> Flow[VerifiedConsent]:
        if self.online and action is None:
            # Refused before any check runs, so no proof jti is spent on a call that cannot end.
            raise ValueError("online verification needs the action")
        return consent_flow(
            message,
            agent_id=self.agent_id,
            now=self._clock(),
            broker_url=self.keys.broker_url,
            action=action,
            scope_requirements=self.scope_requirements,
            require_proof=self.require_proof,
            initiator_key=initiator_key,
            online=self.online,
            header_cache=self._headers,
        )

    def verify(
        self,
        message: Any,
        *,
        action: str | None = None,
        initiator_key: PublicJWK | Mapping[str, Any] | None = None,
    ) -> VerifiedConsent:
        """Verify the consent an A2A message (a JSON object) carries, for `action` if given.

        Blocking when keys or documents must be fetched. Raises `ParafeError` with the code
        of the first failing check; `initiator_key` skips the DID-document lookup.
        """
        return run(self._flow(message, action, initiator_key), self.keys, self.replay)

    async def averify(
        self,
        message: Any,
        *,
        action: str | None = None,
        initiator_key: PublicJWK | Mapping[str, Any] | None = None,
    ) -> VerifiedConsent:
        """Async `verify`."""
        return await arun(self._flow(message, action, initiator_key), self.keys, self.replay)

    def _token_flow(
        self, token: str, session_id: str | None, action: str | None, agent: bool
    ) -> Flow[ConsentClaims]:
        return token_flow(
            token,
            now=self._clock(),
            agent_id=self.agent_id if agent else None,
            session_id=session_id,
            action=action,
            scope_requirements=self.scope_requirements,
            header_cache=self._headers,
        )

    def verify_token(
        self,
        token: str,
        *,
        session_id: str | None = None,
        action: str | None = None,
        check_agent: bool = True,
    ) -> ConsentClaims:
        """Steps 7-16 for a bare token (no proof): `verifyConsentTokenOffline`."""
        return run(self._token_flow(token, session_id, action, check_agent), self.keys)

    async def averify_token(
        self,
        token: str,
        *,
        session_id: str | None = None,
        action: str | None = None,
        check_agent: bool = True,
    ) -> ConsentClaims:
        """Async `verify_token`."""
        return await arun(self._token_flow(token, session_id, action, check_agent), self.keys)

    def _online_flow(
        self, token: str, action: str, session_id: str | None, proof: str | None
    ) -> Flow[OnlineVerification]:
        return online_flow(
            token,
            action=action,
            session_id=session_id,
            agent_id=self.agent_id,
            proof=proof,
            broker_url=self.keys.broker_url,
        )

    def verify_online(
        self,
        token: str,
        *,
        action: str,
        session_id: str | None = None,
        proof: str | None = None,
    ) -> OnlineVerification:
        """Ask the broker alone (§8). A 2xx answer may still say `valid=False`: check it."""
        return run(self._online_flow(token, action, session_id, proof), self.keys)

    async def averify_online(
        self,
        token: str,
        *,
        action: str,
        session_id: str | None = None,
        proof: str | None = None,
    ) -> OnlineVerification:
        """Async `verify_online`."""
        return await arun(self._online_flow(token, action, session_id, proof), self.keys)


class ReceiptVerifier:
    """Checks receipts other agents and the broker signed (§7.3, §7.4, session receipts).

    Issuer keys come from agents' DID documents at the trusted broker (`keys`); broker
    signatures from its JWKS. Raises `ParafeError` with the @getparafe/verify codes (§9.4).
    """

    def __init__(self, keys: KeySource, *, clock: Callable[[], float] = time.time) -> None:
        self.keys = keys
        self._clock = clock

    def _receipt_flow(
        self,
        receipt: str,
        issuer_key: PublicJWK | Mapping[str, Any] | None,
        expected_session_id: str | None,
        consent_token: str | None,
        acknowledgment: str | None,
    ) -> Flow[ActionReceipt]:
        return action_receipt_flow(
            receipt,
            now=self._clock(),
            issuer_key=issuer_key,
            expected_session_id=expected_session_id,
            consent_token=consent_token,
            acknowledgment=acknowledgment,
        )

    def verify_action_receipt(
        self,
        receipt: str,
        *,
        issuer_key: PublicJWK | Mapping[str, Any] | None = None,
        expected_session_id: str | None = None,
        consent_token: str | None = None,
        acknowledgment: str | None = None,
    ) -> ActionReceipt:
        """Check an action receipt. `acknowledgment` (the broker's index ack) is what makes
        the receipt of a since-revoked agent count; `issuer_key` skips the DID lookup (and the
        revocation check with it)."""
        flow = self._receipt_flow(
            receipt, issuer_key, expected_session_id, consent_token, acknowledgment
        )
        return run(flow, self.keys)

    async def averify_action_receipt(
        self,
        receipt: str,
        *,
        issuer_key: PublicJWK | Mapping[str, Any] | None = None,
        expected_session_id: str | None = None,
        consent_token: str | None = None,
        acknowledgment: str | None = None,
    ) -> ActionReceipt:
        """Async `verify_action_receipt`."""
        flow = self._receipt_flow(
            receipt, issuer_key, expected_session_id, consent_token, acknowledgment
        )
        return await arun(flow, self.keys)

    def _broker_expectations(self, expected_issuer: str | None) -> BrokerExpectations:
        return BrokerExpectations(self._clock(), expected_issuer=expected_issuer)

    def verify_index_ack(self, ack: str, *, expected_issuer: str | None = None) -> IndexAck:
        """Check the broker's index acknowledgment of a filed receipt (§7.4): its ES256
        signature with the broker's JWKS, typ, `ver` 1, times, `entry_hash`, and `iss` when
        `expected_issuer` is given. `check_session_index` checks a session's acks together."""
        return run(index_ack_flow(ack, self._broker_expectations(expected_issuer)), self.keys)

    async def averify_index_ack(self, ack: str, *, expected_issuer: str | None = None) -> IndexAck:
        """Async `verify_index_ack`."""
        flow = index_ack_flow(ack, self._broker_expectations(expected_issuer))
        return await arun(flow, self.keys)

    def verify_session_receipt(
        self, receipt: str, *, expected_issuer: str | None = None
    ) -> SessionReceipt:
        """Check the broker's session receipt (v2): its ES256 signature with the broker's
        JWKS, typ `parafe-session-receipt+jwt`, `ver` 2, the members every receipt has, times,
        and `iss` when `expected_issuer` is given."""
        flow = session_receipt_flow(receipt, self._broker_expectations(expected_issuer))
        return run(flow, self.keys)

    async def averify_session_receipt(
        self, receipt: str, *, expected_issuer: str | None = None
    ) -> SessionReceipt:
        """Async `verify_session_receipt`."""
        flow = session_receipt_flow(receipt, self._broker_expectations(expected_issuer))
        return await arun(flow, self.keys)


__all__ = [
    "ParafeVerifier",
    "ReceiptVerifier",
    "VerifiedConsent",
]
