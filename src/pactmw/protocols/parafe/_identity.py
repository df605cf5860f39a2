"""An agent's identity credential, checked with the broker's keys (@getparafe/verify's
`verifyIdentityCredential` and `verifyCredentialJWT`), so an agent can tell who it talks to
before a handshake.

The credential is an SD-JWT VC: `<issuer JWT>~<disclosure>~...~`. The issuer JWT is the
broker's ES256 JWS with typ `dc+sd-jwt` and a DID-URL `kid` (`did:web:api.parafe.ai#<kid>`,
read as the JWKS kid of its fragment, as for every broker JWS). Its `vct` must be the agent
identity type and `_sd_alg`, if present, `sha-256`. Each disclosure must be one the issuer
committed to: base64url(SHA-256(the disclosure as sent)) is in `_sd`. It decodes to
`[salt, name, value]`, and `name` is merged into the claims unless it would replace one.
A key-binding JWT after the last `~` is not checked, as in the reference.

The older form is a plain broker JWT (`verifyCredentialJWT`): ES256 with a JWKS kid, `iss`
`parafe-trust-broker` (or the issuer expected), not a consent token (WRONG_ARTIFACT_TYPE),
and the claims every credential has. The reference's current code refuses EdDSA (the
retired broker key) since 2026-10-09, as the consent-token check does; so does this.

Codes are the reference's (§9.4). Where the reference returns `{valid: false, error}`, this
raises `ParafeError` with the same code; KEY_FETCH_FAILED (the JWKS could not be fetched)
is raised too, as the reference throws it. Pure: the flows that fetch the keys are in
`_flows`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from attrs import evolve, field, frozen

from pactmw.core.encoding import b64url_decode, json_loads
from pactmw.core.errors import KeyUnavailable, MalformedInput
from pactmw.protocols.parafe._errors import ParafeError, receipt_error
from pactmw.protocols.parafe._jwt import sha256_b64url
from pactmw.protocols.parafe._receipts import (
    INVALID_SIGNATURE,
    KEY_FETCH_FAILED,
    KEY_NOT_FOUND,
    MALFORMED,
    BrokerExpectations,
    broker_jws_header,
    check_broker_jws,
)

#: The `vct` of a Parafé agent identity credential.
IDENTITY_VCT = "https://parafe.ai/vct/agent-identity/1"
#: The issuer JWT's `typ` (SD-JWT VC).
SD_JWT_TYP = "dc+sd-jwt"

#: The issuer of a credential JWT unless another is expected.
CREDENTIAL_JWT_ISSUER = "parafe-trust-broker"
#: The code for a consent token given where a credential was expected.
WRONG_ARTIFACT_TYPE = "WRONG_ARTIFACT_TYPE"
#: The claims a credential JWT must carry (not null).
_CREDENTIAL_CLAIMS = (
    "sub",
    "name",
    "identity_assurance",
    "verification_tier",
    "pub_key_thumbprint",
    "iat",
    "exp",
    "iss",
)

#: Names JavaScript's `name in claims` finds on every object (Object.prototype): the reference
#: refuses a disclosure named so as one that "overrides" a claim; so does this.
_JS_OBJECT_NAMES = frozenset(
    {
        "__proto__",
        "__defineGetter__",
        "__defineSetter__",
        "__lookupGetter__",
        "__lookupSetter__",
        "constructor",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
    }
)


@frozen
class IdentityCredential:
    """An identity credential that checked out.

    `format` is `sd-jwt` or `jwt`. For an SD-JWT VC, `claims` are the issuer JWT's claims
    without `_sd` and `_sd_alg`, plus the disclosed ones; `disclosed` names the disclosed
    claims in the order they came. For a credential JWT, `claims` is its payload. `key_id` is the
    broker JWKS kid that verified it. `cnf_jwk` is the agent's registered public key in an
    SD-JWT VC (its RFC 7638 thumbprint is the `cnf.jkt` of the consent tokens it presents);
    a credential JWT names it by `pub_key_thumbprint` instead.
    """

    claims: Mapping[str, Any] = field(repr=False)
    disclosed: tuple[str, ...]
    key_id: str
    format: str = "sd-jwt"

    @property
    def sub(self) -> Any:
        return self.claims.get("sub")

    @property
    def agent_id(self) -> Any:
        return self.claims.get("agent_id")

    @property
    def cnf_jwk(self) -> Mapping[str, Any] | None:
        cnf = self.claims.get("cnf")
        jwk = cnf.get("jwk") if isinstance(cnf, Mapping) else None
        return jwk if isinstance(jwk, Mapping) else None


def _fail(code: str, detail: str) -> ParafeError:
    return receipt_error(code, detail)


def key_error(exc: KeyUnavailable, subject: str) -> ParafeError:
    """KEY_FETCH_FAILED when the JWKS could not be had, KEY_NOT_FOUND for an unknown kid."""
    if exc.code == "jwks_unavailable":
        return _fail(KEY_FETCH_FAILED, f"Could not fetch the broker's keys: {exc}")
    return _fail(KEY_NOT_FOUND, f"No broker key for this {subject}: {exc}")


def split_sd_jwt(sd_jwt: Any) -> tuple[str, list[str]]:
    """The issuer JWT and the disclosures (the segments between it and the last `~`)."""
    if not isinstance(sd_jwt, str):
        raise _fail(MALFORMED, "Not an SD-JWT (expected <jwt>~<disclosures>~)")
    parts = sd_jwt.split("~")
    if not parts[0] or len(parts) < 2:
        raise _fail(MALFORMED, "Not an SD-JWT (expected <jwt>~<disclosures>~)")
    # An empty segment (`~~`) is skipped, as the reference skips it.
    return parts[0], [d for d in parts[1:-1] if d]


def check_identity_payload(
    claims: Mapping[str, Any], disclosures: list[str]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`vct`, `_sd_alg`, then each disclosure against `_sd`; the merged claims."""
    vct = claims.get("vct")
    if not (isinstance(vct, str) and vct == IDENTITY_VCT):
        raise _fail(MALFORMED, f'Unexpected vct "{vct}"')
    if "_sd_alg" in claims and not (
        isinstance(claims["_sd_alg"], str) and claims["_sd_alg"] == "sha-256"
    ):
        raise _fail(MALFORMED, "Unsupported _sd_alg")
    sd = claims.get("_sd")
    committed = {d for d in sd if isinstance(d, str)} if isinstance(sd, list) else set()
    merged = {k: v for k, v in claims.items() if k not in ("_sd", "_sd_alg")}
    names: list[str] = []
    for disclosure in disclosures:
        if sha256_b64url(disclosure) not in committed:
            raise _fail(INVALID_SIGNATURE, "A disclosure is not one the issuer signed")
        try:
            decoded = json_loads(b64url_decode(disclosure))
        except MalformedInput as exc:
            raise _fail(MALFORMED, f"Malformed disclosure ({exc})") from exc
        if not (isinstance(decoded, list) and len(decoded) == 3 and isinstance(decoded[1], str)):
            raise _fail(MALFORMED, "Malformed disclosure")
        name = decoded[1]
        if name in merged or name in _JS_OBJECT_NAMES:
            raise _fail(MALFORMED, f'Disclosure overrides claim "{name}"')
        merged[name] = decoded[2]
        names.append(name)
    return merged, tuple(names)


def sd_jwt_header(sd_jwt: Any) -> tuple[str, str, list[str]]:
    """Split the credential and read the issuer JWT's key: (issuer JWT, kid, disclosures)."""
    issuer_jwt, disclosures = split_sd_jwt(sd_jwt)
    kid, _ = broker_jws_header(issuer_jwt)
    return issuer_jwt, kid, disclosures


def check_identity_credential(
    issuer_jwt: str,
    kid: str,
    disclosures: list[str],
    candidates: Any,
    expect: BrokerExpectations,
) -> IdentityCredential:
    """The checks after the key lookup: signature, typ, issuer, time, then the payload."""
    claims = check_broker_jws(
        issuer_jwt, candidates, expect, typ=SD_JWT_TYP, subject="identity credential"
    )
    merged, names = check_identity_payload(claims, disclosures)
    return IdentityCredential(claims=MappingProxyType(merged), disclosed=names, key_id=kid)


def check_credential_jwt(
    token: str, kid: str, candidates: Any, expect: BrokerExpectations
) -> IdentityCredential:
    """A credential JWT after the key lookup: signature, issuer (`parafe-trust-broker` unless
    `expect` names another), time, then its shape."""
    if expect.expected_issuer is None:
        expect = evolve(expect, expected_issuer=CREDENTIAL_JWT_ISSUER)
    claims = check_broker_jws(token, candidates, expect, typ=None, subject="credential")
    token_type = claims.get("token_type")
    if isinstance(token_type, str) and token_type == "consent":  # noqa: S105 - a claim value
        raise _fail(WRONG_ARTIFACT_TYPE, "Expected a credential, got a consent token")
    for name in _CREDENTIAL_CLAIMS:
        if claims.get(name) is None:
            raise _fail(MALFORMED, f'Credential missing required claim "{name}"')
    for name in ("sub", "pub_key_thumbprint"):
        if not isinstance(claims[name], str):
            raise _fail(MALFORMED, f'Credential "{name}" must be a string')
    return IdentityCredential(
        claims=MappingProxyType(claims), disclosed=(), key_id=kid, format="jwt"
    )


__all__ = [
    "CREDENTIAL_JWT_ISSUER",
    "IDENTITY_VCT",
    "SD_JWT_TYP",
    "WRONG_ARTIFACT_TYPE",
    "IdentityCredential",
    "check_credential_jwt",
    "check_identity_credential",
    "check_identity_payload",
    "key_error",
    "sd_jwt_header",
    "split_sd_jwt",
]
