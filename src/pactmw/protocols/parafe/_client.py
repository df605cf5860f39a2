"""The calling agent's side: put consent, with a fresh presentation proof, on a message."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from pactmw.core.jwk import PrivateJWK
from pactmw.protocols.parafe._jwt import random_jti, require_agent_key
from pactmw.protocols.parafe._message import consent_data, message_id, with_parafe
from pactmw.protocols.parafe._proof import create_presentation_proof


class ConsentPresenter:
    """Holds a consent token and the initiator's key; signs one fresh proof per message.

    `key` is this agent's registered Ed25519 or P-256 key (the one the token's `cnf.jkt`
    names). `clock` (epoch seconds) and `new_jti` are injectable for tests.
    """

    def __init__(
        self,
        *,
        token: str,
        session_id: str,
        key: PrivateJWK,
        clock: Callable[[], float] = time.time,
        new_jti: Callable[[], str] = random_jti,
    ) -> None:
        require_agent_key(key)
        self.token = token
        self.session_id = session_id
        self._key = key
        self._clock = clock
        self._new_jti = new_jti

    def proof(self, message_id: str | None = None) -> str:
        """A fresh presentation proof (`ath`, `aud`, `jti`, `iat`, and `mid` when given)."""
        return create_presentation_proof(
            self.token,
            self._key,
            now=self._clock(),
            message_id=message_id,
            jti=self._new_jti(),
        )

    def data(self, message_id: str | None = None) -> dict[str, Any]:
        """The Parafé data for one message: `{"consent": {token, session_id, proof}}`."""
        return consent_data(self.token, self.session_id, self.proof(message_id))

    def attach(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of an A2A message carrying the consent, its proof bound to the message's
        `messageId`, and the extension URI in `extensions`. Send it with the activation
        headers (`activation_headers()`)."""
        return with_parafe(message, self.data(message_id(message)))


__all__ = [
    "ConsentPresenter",
]
