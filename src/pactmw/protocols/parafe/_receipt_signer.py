"""Signing this agent's action receipts and AP2 receipts (parafe-verifier.md §7.1, §7.2,
spec §5.3). Pure.

Signing follows the a2a-extension's `signActionReceipt` and its signer's `refuse` and
`ap2Receipt`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from attrs import evolve

from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK
from pactmw.protocols.parafe._ap2_receipts import (
    Ap2Outcome,
    Ap2Receipt,
    MandateReferences,
    ReferenceForm,
    sign_ap2_receipt,
)
from pactmw.protocols.parafe._constants import (
    ACTION_ERRORS,
    ACTION_RECEIPT_TYP,
    MAX_ERROR_DESCRIPTION,
)
from pactmw.protocols.parafe._errors import (
    EXPIRED_CONSENT_TOKEN,
    INVALID_PROOF,
    SCOPE_VIOLATION,
    ParafeError,
)
from pactmw.protocols.parafe._jwt import (
    random_jti,
    require_agent_key,
    sha256_b64url,
    unverified_claims,
    whole_seconds,
)
from pactmw.protocols.parafe._message import Consent
from pactmw.protocols.parafe._receipts import consent_ref, details_hash

_UNSET: Any = object()


# -- signing ---------------------------------------------------------------------------------


def receipt_error_for(error: BaseException, action: str, consent_token: str | None) -> str:
    """The receipt `error` for a refused consent check (§7.2, `actionErrorFor`).

    A scope violation is `excluded` when the action is in the token's `exclusions` (read from
    the unverified token, as the reference does) and `not_permitted` otherwise.
    """
    code = error.code if isinstance(error, ParafeError) else None
    if code == SCOPE_VIOLATION:
        exclusions = unverified_claims(consent_token).get("exclusions")
        if isinstance(exclusions, list) and action in [x for x in exclusions if isinstance(x, str)]:
            return "excluded"
        return "not_permitted"
    if code == EXPIRED_CONSENT_TOKEN:
        return "consent_expired"
    if code == INVALID_PROOF:
        return "proof_invalid"
    return "consent_invalid"


class ReceiptSigner:
    """Signs this agent's action receipts with its registered key (§7.1).

    `agent_did` is the agent's DID (`did:web:api.parafe.ai:agents:<id>`, the `id` of its DID
    document); the header `kid` is `<agent_did>#keys-1`. `key` must be the agent's registered
    Ed25519 (EdDSA) or P-256 (ES256) key. `clock` and `new_jti` are injectable for tests.
    """

    def __init__(
        self,
        key: PrivateJWK,
        agent_did: str,
        *,
        clock: Callable[[], float] = time.time,
        new_jti: Callable[[], str] = random_jti,
    ) -> None:
        require_agent_key(key)
        if not agent_did.startswith("did:"):
            raise ValueError("agent_did must be the agent's DID")
        self.agent_did = agent_did
        self.kid = f"{agent_did}#keys-1"
        self._key = evolve(key, public=evolve(key.public, kid=self.kid))
        self._clock = clock
        self._new_jti = new_jti

    def sign(
        self,
        *,
        session_id: str,
        consent_token: str,
        action: str,
        result: str = "success",
        error: str | None = None,
        error_description: str | None = None,
        request: str | bytes | None = None,
        request_ref: str | None = None,
        details: Any = _UNSET,
        details_hash_value: str | None = None,
        business_ref: str | None = None,
        mandate_ref: str | None = None,
    ) -> str:
        """Sign one action receipt (a compact JWS) for `action` under `consent_token`.

        `result` is `success` (then no `error`) or `error` (then `error` is one of the six
        codes). `request` (the request message) and `details` (what was done, any JSON value)
        go on the receipt only as hashes. Raises `ValueError` for an inconsistent receipt.
        """
        if result not in ("success", "error"):
            raise ValueError("result must be 'success' or 'error'")
        if result == "error" and not error:
            raise ValueError("an 'error' receipt needs error (e.g. 'excluded')")
        if result == "success" and error:
            raise ValueError("a 'success' receipt has no error")
        if error is not None and error not in ACTION_ERRORS:
            raise ValueError(f"error must be one of {', '.join(sorted(ACTION_ERRORS))}")
        if request_ref is None and request is not None:
            request_ref = sha256_b64url(request)
        if details_hash_value is None and details is not _UNSET:
            details_hash_value = details_hash(details)
        claims = {
            "ver": 1,
            "session_id": session_id,
            "consent_ref": consent_ref(consent_token),
            "action": action,
            "result": result,
            "error": error if result == "error" else None,
            "error_description": error_description,
            "request_ref": request_ref,
            "details_hash": details_hash_value,
            "business_ref": business_ref,
            "mandate_ref": mandate_ref,
            "iss": self.agent_did,
            "iat": whole_seconds(self._clock()),
            "jti": self._new_jti(),
        }
        return sign_compact(claims, self._key, typ=ACTION_RECEIPT_TYP)

    def refuse(
        self,
        error: BaseException,
        action: str | None,
        consent: Consent | None = None,
    ) -> str | None:
        """The signed receipt of a refusal (§7.2), or None when there is nothing to bind it to.

        `consent` is the message's `Consent` (a `ParafeError` from the verifier carries it as
        `error.consent`, the default). No receipt without a consent or without an action.
        """
        if consent is None and isinstance(error, ParafeError):
            consent = error.consent
        if consent is None or action is None:
            return None
        token, session_id = consent.token, consent.session_id
        if isinstance(error, ParafeError):
            description = error.message[:MAX_ERROR_DESCRIPTION]
        else:
            description = "Parafe consent could not be verified."
        return self.sign(
            session_id=session_id,
            consent_token=token,
            action=action,
            result="error",
            error=receipt_error_for(error, action, token),
            error_description=description,
        )

    def ap2_receipt(
        self,
        kind: str,
        outcome: Ap2Outcome,
        mandate: str | MandateReferences,
        *,
        reference_form: ReferenceForm = "closed_jwt",
        iss: str | None = None,
    ) -> Ap2Receipt:
        """Sign an AP2 Checkout (`kind` "checkout") or Payment ("payment") Receipt for
        `mandate` (spec §5.3), as the reference signer's `ap2Receipt`: `iss` defaults to the
        agent's DID and the header `kid` is its key. Needs a P-256 key (`ValueError`
        otherwise, or for an incomplete receipt); file it with the receipt's `kind`."""
        return sign_ap2_receipt(
            self._key,
            kind,
            outcome,
            mandate,
            iss=iss or self.agent_did,
            now=whole_seconds(self._clock()),
            reference_form=reference_form,
            kid=self.kid,
        )


__all__ = [
    "ReceiptSigner",
    "receipt_error_for",
]
