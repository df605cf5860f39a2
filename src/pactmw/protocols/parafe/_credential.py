"""Identity credentials checked on their own: @getparafe/verify's `verifyIdentityCredential`
(the SD-JWT VC) and `verifyCredentialJWT` (the credential JWT).

Runs `identity_credential_flow` or `credential_jwt_flow` (see `_identity` for the checks)
with the usual drivers, so the broker keys come from a `KeySource` (`BrokerKeys` refetches
once on an unknown kid).
"""

from __future__ import annotations

import time

from pactmw.protocols.parafe._broker import KeySource
from pactmw.protocols.parafe._flows import (
    Flow,
    arun,
    credential_jwt_flow,
    identity_credential_flow,
    run,
)
from pactmw.protocols.parafe._identity import IdentityCredential
from pactmw.protocols.parafe._receipts import BrokerExpectations


def _flow(
    credential: str,
    expected_issuer: str | None,
    clock_tolerance: int,
    now: float | None,
    *,
    jwt: bool = False,
) -> Flow[IdentityCredential]:
    """The flow of one check; the four public functions differ only in which and how run."""
    if isinstance(clock_tolerance, bool) or not isinstance(clock_tolerance, int):
        raise TypeError("clock_tolerance is whole seconds")
    if clock_tolerance < 0:
        raise ValueError("clock_tolerance must not be negative")
    make = credential_jwt_flow if jwt else identity_credential_flow
    when = time.time() if now is None else now
    return make(credential, BrokerExpectations(when, clock_tolerance, expected_issuer))


def verify_identity_credential(
    credential: str,
    keys: KeySource,
    *,
    expected_issuer: str | None = None,
    clock_tolerance: int = 0,
    now: float | None = None,
) -> IdentityCredential:
    """Check an agent's identity credential, an SD-JWT VC (`<jwt>~<disclosure>~...~`).

    The broker's ES256 signature (from `keys`), typ `dc+sd-jwt`, `iss` only when
    `expected_issuer` is given, `exp`/`nbf` with `clock_tolerance` seconds (default 0),
    `vct`, `_sd_alg`, and that every disclosure is one the broker committed to. `now` is
    epoch seconds (default: the clock). Blocking when the JWKS must be fetched.

    Returns the claims with the disclosed ones merged in. Raises `ParafeError` with the
    @getparafe/verify code: MALFORMED, INVALID_SIGNATURE, EXPIRED, NOT_YET_VALID,
    ISSUER_MISMATCH, KEY_NOT_FOUND or KEY_FETCH_FAILED.
    """
    return run(_flow(credential, expected_issuer, clock_tolerance, now), keys)


async def averify_identity_credential(
    credential: str,
    keys: KeySource,
    *,
    expected_issuer: str | None = None,
    clock_tolerance: int = 0,
    now: float | None = None,
) -> IdentityCredential:
    """Async `verify_identity_credential`."""
    return await arun(_flow(credential, expected_issuer, clock_tolerance, now), keys)


def verify_credential_jwt(
    token: str,
    keys: KeySource,
    *,
    expected_issuer: str | None = None,
    clock_tolerance: int = 0,
    now: float | None = None,
) -> IdentityCredential:
    """Check an agent's identity credential in its credential-JWT form.

    The broker's ES256 signature (from `keys`; EdDSA, the retired key, is refused), `iss`
    (`parafe-trust-broker` unless `expected_issuer`), `exp`/`nbf` with `clock_tolerance`
    seconds, then that it is no consent token (WRONG_ARTIFACT_TYPE) and carries `sub`,
    `name`, `identity_assurance`, `verification_tier`, `pub_key_thumbprint`, `iat`, `exp`
    and `iss` (MALFORMED). Returns its claims (`format == "jwt"`). Raises `ParafeError`.
    """
    return run(_flow(token, expected_issuer, clock_tolerance, now, jwt=True), keys)


async def averify_credential_jwt(
    token: str,
    keys: KeySource,
    *,
    expected_issuer: str | None = None,
    clock_tolerance: int = 0,
    now: float | None = None,
) -> IdentityCredential:
    """Async `verify_credential_jwt`."""
    return await arun(_flow(token, expected_issuer, clock_tolerance, now, jwt=True), keys)


__all__ = [
    "averify_credential_jwt",
    "averify_identity_credential",
    "verify_credential_jwt",
    "verify_identity_credential",
]
