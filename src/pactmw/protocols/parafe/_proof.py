"""Presentation proofs (parafe-verifier.md §6): checking one, and making one. Pure.

The proof is what makes a key-bound token useless to anyone but its initiator: a JWS over
`ath` (the token's hash), `aud` (the target's DID), `iat`, `jti` and optionally `mid` (the A2A
message id), signed with the key whose thumbprint the token carries in `cnf.jkt`.

The seed's claims table was lost; the table and every limit here are the reference's (§6,
§12 item 6): at most 300 s old with 60 s of clock tolerance, `jti` of 16 or more characters,
`mid` compared only when both the message and the proof have one, single use for 360 s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from attrs import field, frozen

from pactmw.core.errors import JoseError, MalformedInput
from pactmw.core.jose import parse_compact, sign_compact, verify_signature
from pactmw.core.jwk import PrivateJWK, PublicJWK, import_public_jwk
from pactmw.protocols.parafe import _errors as err
from pactmw.protocols.parafe._constants import (
    POP_TYP,
    PROOF_CLOCK_TOLERANCE,
    PROOF_MAX_AGE,
    PROOF_MIN_JTI_LENGTH,
)
from pactmw.protocols.parafe._jwt import (
    MISSING,
    TIME_MESSAGES,
    TIME_OK,
    as_float,
    claims_failure,
    random_jti,
    require_agent_key,
    sha256_b64url,
    strict_equal,
    time_check,
    typ_matches,
    unverified_claims,
    utf16_length,
    whole_seconds,
    without_kid,
)

#: The key types a Parafé agent may register (§5): P-256 signs ES256, Ed25519 EdDSA.
_ALG_FOR_KTY = {"EC": "ES256", "OKP": "EdDSA"}


class KeyBound(Protocol):
    """What a proof is checked against: the consent token's claims, `cnf.jkt` and initiator.

    `ConsentClaims` is one; so is what `verify_presentation_proof` makes of a plain mapping.
    """

    @property
    def claims(self) -> Mapping[str, Any]: ...

    @property
    def jkt(self) -> str | None: ...

    @property
    def initiator(self) -> str | None: ...


@frozen
class ProofClaims:
    """A presentation proof that checked out."""

    jti: str
    iat: float
    mid: str | None
    claims: Mapping[str, Any] = field(repr=False)


def initiator_key(jwk: Any) -> PublicJWK:
    """An initiator's public key from its JWK; `INVALID_PROOF` for anything unusable.

    (The reference lets a malformed JWK escape as a plain exception, which it then reports
    as INVALID_CONSENT_TOKEN; §6 asks a port to report INVALID_PROOF, and so do we.)
    """
    if isinstance(jwk, PublicJWK):
        key = jwk
    else:
        if not isinstance(jwk, Mapping):
            raise err.invalid_proof("the initiator's DID document has no public key")
        try:
            key = import_public_jwk(jwk)
        except MalformedInput as exc:
            raise err.invalid_proof(f"the initiator's public key is unusable ({exc})") from exc
    if key.kty not in _ALG_FOR_KTY:
        raise err.invalid_proof("the initiator's key is neither P-256 nor Ed25519")
    return key


def check_proof(
    proof: str,
    *,
    token: str,
    consent: KeyBound,
    key: PublicJWK,
    now: float,
    message_id: str | None,
    expected_audience: str | None = None,
) -> ProofClaims:
    """§6 steps 4-9 (the caller did 1-3 and does 10, the replay check).

    `expected_audience`, when given, must also equal the proof's `aud` (checked right after
    the token's `aud`, as @getparafe/verify's `expectedAudience`). Every failure is
    `ParafeError(INVALID_PROOF)`.
    """
    if key.thumbprint != consent.jkt:
        raise err.invalid_proof("the initiator's key is not the one the token is bound to")
    alg = _ALG_FOR_KTY[key.kty]
    if not isinstance(proof, str):
        raise err.invalid_proof("Compact JWS must be a string or Uint8Array")  # jose's words
    try:
        jws = parse_compact(proof, allowed_algs=frozenset({alg}))
        verify_signature(jws, key)
    except JoseError as exc:
        detail = {
            "alg_not_allowed": '"alg" (Algorithm) Header Parameter value not allowed',
            "bad_signature": "signature verification failed",
        }.get(exc.code, f"not a signed token ({exc})")
        raise err.invalid_proof(detail) from exc
    try:
        claims = jws.claims()
    except JoseError as exc:
        raise err.invalid_proof(claims_failure(exc)) from exc
    if not typ_matches(jws.header, POP_TYP):
        raise err.invalid_proof('unexpected "typ" JWT header value')
    outcome = time_check(
        claims,
        now=whole_seconds(now),
        tolerance=PROOF_CLOCK_TOLERANCE,
        max_age=PROOF_MAX_AGE,
    )
    if outcome != TIME_OK:
        raise err.invalid_proof(TIME_MESSAGES[outcome])
    if not strict_equal(claims.get("ath", MISSING), sha256_b64url(token)):
        raise err.invalid_proof("the proof is for a different token")
    if not strict_equal(claims.get("aud", MISSING), consent.claims.get("aud", MISSING)):
        raise err.invalid_proof("the proof is for a different audience")
    if expected_audience is not None and not strict_equal(
        claims.get("aud", MISSING), expected_audience
    ):
        raise err.invalid_proof("the proof is for a different audience")
    mid = claims.get("mid", MISSING)
    if message_id is not None and mid is not MISSING and not strict_equal(mid, message_id):
        raise err.invalid_proof("the proof is for a different message")
    jti = claims.get("jti")
    if not isinstance(jti, str) or utf16_length(jti) < PROOF_MIN_JTI_LENGTH:
        raise err.invalid_proof("the proof needs a random jti")
    return ProofClaims(
        jti=jti,
        iat=as_float(claims["iat"]),
        mid=mid if isinstance(mid, str) else None,
        claims=claims,
    )


def create_presentation_proof(
    token: str,
    key: PrivateJWK,
    *,
    now: float,
    message_id: str | None = None,
    jti: str | None = None,
) -> str:
    """Sign a fresh presentation proof for `token` with the initiator's own key.

    `key` must be the agent's registered Ed25519 (EdDSA) or P-256 (ES256) key. `aud` is copied
    from the token, which must name one (`ParafeError(INVALID_CONSENT_TOKEN)` otherwise: no
    proof applies to a token that is not key-bound). Send one per message, with `message_id`
    the A2A `messageId` it travels with.
    """
    require_agent_key(key)
    aud = unverified_claims(token).get("aud")
    if not isinstance(aud, str):
        raise err.invalid_token("this token has no audience; no proof applies.")
    claims: dict[str, Any] = {
        "ath": sha256_b64url(token),
        "aud": aud,
        "jti": jti if jti is not None else random_jti(),
    }
    if message_id:
        claims["mid"] = message_id
    claims["iat"] = whole_seconds(now)
    return sign_compact(claims, without_kid(key), typ=POP_TYP)


__all__ = [
    "KeyBound",
    "ProofClaims",
    "check_proof",
    "create_presentation_proof",
    "initiator_key",
]
