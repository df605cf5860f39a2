"""The consent checks of one message: token and proof once, then each action against them."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from attrs import evolve

from pactmw.protocols.parafe import (
    INVALID_CONSENT_TOKEN,
    ConsentClaims,
    OnlineVerification,
    ParafeError,
    VerifiedConsent,
    read_consent,
)
from pactmw.protocols.parafe._errors import missing

if TYPE_CHECKING:
    from pactmw.provider.parafe._agent import ParafeAgent


def _online_checked(verified: VerifiedConsent, online: OnlineVerification) -> VerifiedConsent:
    # A 2xx answer may still say `valid: false` (parafe-verifier.md §8): refuse it.
    if not online.valid:
        raise ParafeError(
            INVALID_CONSENT_TOKEN,
            "Parafe consent token is invalid: the broker does not consider it valid.",
        )
    return evolve(verified, online=online)


def _session_closed_error() -> ParafeError:
    return ParafeError(
        INVALID_CONSENT_TOKEN,
        "Parafe consent token was refused: the session is closed; start a new handshake.",
    )


class MessageCheck:
    """Verifies one message's consent for each action of its turn (`ParafeTurn.require`):
    the token and the proof with the first action, later actions against the verified token;
    then the session must not be closed, and the broker confirms the scopes checked online.
    Raises `ParafeError`."""

    def __init__(self, message: Any, no_message: str | None = None) -> None:
        self._message = message
        self._no_message = no_message
        self._verified: VerifiedConsent | None = None
        self._session_open = True
        self._online_done = False

    def _proof_for_online(self) -> str | None:
        # The proof goes to the broker with the message's first online check only: it is
        # single-use, and the broker may remember it too.
        if self._online_done:
            return None
        self._online_done = True
        try:
            return read_consent(self._message).proof
        except ParafeError:
            return None

    # Token and proof are checked once per message: the proof is spent as soon as they pass,
    # so that result is kept even when the broker or a closed session then refuses the
    # action; later actions are checked against the verified token alone. `verify` and
    # `averify` differ only in how they wait for the verifier and the store.

    def verify(self, agent: ParafeAgent, action: str) -> VerifiedConsent:
        first = self._verified
        if first is None:
            self._check_there_is_a_message()
            verified = self._verified = agent.verifier.verify(self._message, action=action)
            self._session_open = not agent.session_is_closed(verified.session_id)
        else:
            claims = agent.verifier.verify_token(
                first.consent_token, session_id=first.session_id, action=action
            )
            verified = _again(first, claims, action)
        online = self._online_request(agent, verified, action)
        if online is None:
            return verified
        return _online_checked(verified, agent.verifier.verify_online(**online))

    async def averify(self, agent: ParafeAgent, action: str) -> VerifiedConsent:
        first = self._verified
        if first is None:
            self._check_there_is_a_message()
            verified = await agent.verifier.averify(self._message, action=action)
            self._verified = verified
            closed = await asyncio.to_thread(agent.session_is_closed, verified.session_id)
            self._session_open = not closed
        else:
            claims = await agent.verifier.averify_token(
                first.consent_token, session_id=first.session_id, action=action
            )
            verified = _again(first, claims, action)
        online = self._online_request(agent, verified, action)
        if online is None:
            return verified
        return _online_checked(verified, await agent.verifier.averify_online(**online))

    def _check_there_is_a_message(self) -> None:
        # The reference's code for no Parafé data, saying why there is none at all: "No
        # Parafe consent token found in the message" would send the caller after its token.
        if self._no_message is not None:
            raise missing(f"No Parafe consent token found: {self._no_message}.")

    def _online_request(
        self, agent: ParafeAgent, verified: VerifiedConsent, action: str
    ) -> dict[str, Any] | None:
        """Refuse a closed session; then the arguments of the broker's check when the scope
        is checked online, else None."""
        if not self._session_open:
            raise _session_closed_error()
        if not agent.config.online_for(verified.claims.scope):
            return None
        return {
            "token": verified.consent_token,
            "action": action,
            "session_id": verified.session_id,
            "proof": self._proof_for_online(),
        }


def _again(first: VerifiedConsent, claims: ConsentClaims, action: str) -> VerifiedConsent:
    """The message's verified consent, for a later action checked against its token."""
    return evolve(first, claims=claims, action=action)


__all__ = [
    "MessageCheck",
]
