"""What `require` gives the bot: a `ParafeConsent`, or the `ParafeRefused` it raises."""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from pactmw.core.errors import PactmwError
from pactmw.protocols.parafe import ConsentClaims, MandateRef, ParafeError


@frozen
class ParafeConsent:
    """What the bot sees of a verified consent (never the token or the proof).

    `claims` are the broker-signed token claims (`claims.claims` the whole payload, parties and
    `mandate_refs` included; `mandates` reads them typed). `online_verified` is True when the
    broker confirmed it too.
    """

    action: str
    session_id: str
    scope: str
    permissions: tuple[Any, ...]
    exclusions: tuple[Any, ...]
    modality: str | None
    initiator: str | None
    proof_verified: bool
    online_verified: bool
    consent_ref: str
    claims: ConsentClaims = field(repr=False)
    mandates: tuple[MandateRef, ...] = ()


class ParafeRefused(PactmwError):
    """`turn.parafe.require(action)` refused: the reply becomes the refusal.

    `error` is the `ParafeError` (`code`, `message`, `task_state`), `receipt` the signed
    refusal receipt (None when the message carried no consent to bind it to).
    """

    def __init__(self, error: ParafeError, action: str, receipt: str | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.action = action
        self.receipt = receipt

    @property
    def code(self) -> str:
        return self.error.code

    @property
    def message(self) -> str:
        return self.error.message

    @property
    def task_state(self) -> str:
        return self.error.task_state

    def __repr__(self) -> str:
        return f"ParafeRefused({self.error.code!r}, action={self.action!r})"


__all__ = [
    "ParafeConsent",
    "ParafeRefused",
]
