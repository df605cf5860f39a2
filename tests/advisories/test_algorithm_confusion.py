"""Algorithm confusion: a token never chooses how it is verified (SECURITY.md, "Algorithm
confusion").

Every forged token below is refused on its `alg` alone, before any key is touched: the
identity verifier's JWKS server sees no request (each test gets a fresh, empty key cache, so
any lookup would fetch), and a delegation token's key set records no lookup. Then key-type
confusion: an allowed `alg` that names a key of the other type finds no key to use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from attrs import field, frozen
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from pactmw.core.encoding import b64url_encode
from pactmw.core.errors import AuthenticationFailed, JoseError
from pactmw.core.jwk import KeySet, PrivateJWK, PublicJWK, generate_private_jwk, public_key_set
from pactmw.core.keys import JwksCache
from pactmw.protocols.delegation import DelegationRejected, verify_access_token
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from tests.advisories.support import (
    DELEGATION_CLAIMS,
    IDENTITY_CLAIMS,
    INTERFACE,
    NOW,
    POLICY,
    hmac_token,
    public_key_spellings,
    segment,
    sign_raw,
)
from tests.support.jwks_server import JwksServer
from tests.support.parties import AUDIENCE, ISSUER

PA_EC = generate_private_jwk("ES256", kid="ec-1")
PA_RSA = generate_private_jwk("RS256", kid="rsa-1")
PA_ED = generate_private_jwk("EdDSA", kid="ed-1")
PROVIDER_EC = generate_private_jwk("ES256", kid="provider-ec")
PROVIDER_RSA = generate_private_jwk("RS256", kid="provider-rsa")
PROVIDER_ED = generate_private_jwk("EdDSA", kid="provider-ed")


@frozen
class CountingKeySet(KeySet):
    """A KeySet that records every lookup, so a test can prove none happened."""

    lookups: list[tuple[str | None, str]] = field(factory=list)

    def candidates(self, kid: str | None, alg: str) -> tuple[PublicJWK, ...]:
        self.lookups.append((kid, alg))
        return KeySet.candidates(self, kid, alg)


@pytest.fixture(scope="module")
def jwks_server() -> Iterator[JwksServer]:
    # The agent publishes an EdDSA key too: EdDSA is refused even when a key would fit.
    with JwksServer(public_key_set([PA_EC, PA_RSA, PA_ED])) as server:
        yield server


@pytest.fixture
def jwks(jwks_server: JwksServer) -> JwksServer:
    jwks_server.reset()
    return jwks_server


@pytest.fixture
def identity(jwks: JwksServer) -> IdentityVerifier:
    registry = AgentRegistry([RegisteredAgent(issuer=ISSUER, jwks_uri=jwks.url)])
    return IdentityVerifier(
        audience=AUDIENCE, registry=registry, keys=JwksCache(POLICY), clock=lambda: NOW
    )


@pytest.fixture
def provider_keys() -> CountingKeySet:
    return CountingKeySet((PROVIDER_EC.public, PROVIDER_RSA.public, PROVIDER_ED.public))


def identity_refusal(verifier: IdentityVerifier, token: str) -> str:
    with pytest.raises(AuthenticationFailed) as refused:
        verifier.verify("Bearer " + token)
    return refused.value.reason


def delegation_refusal(keys: KeySet, token: str) -> DelegationRejected:
    with pytest.raises(DelegationRejected) as refused:
        verify_access_token(
            "Bearer " + token, keys=keys, interface_url=INTERFACE, client_id=ISSUER, now=NOW + 1
        )
    return refused.value


# -- the forgeries ---------------------------------------------------------------------------------

Forge = Callable[[PrivateJWK, dict[str, Any], str | None], str]


def _header(alg: Any, victim: PrivateJWK, typ: str | None) -> dict[str, Any]:
    header: dict[str, Any] = {"alg": alg, "kid": victim.kid}
    if typ is not None:
        header["typ"] = typ
    return header


def _hmac(alg: str, spelling: str) -> Forge:
    """HMAC keyed with the victim's public key material, naming the victim's kid."""

    def forge(victim: PrivateJWK, claims: dict[str, Any], typ: str | None) -> str:
        secret = public_key_spellings(victim)[spelling]
        return hmac_token(_header(alg, victim, typ), claims, secret)

    return forge


def _unsigned(alg: str, signature: bytes = b"") -> Forge:
    def forge(victim: PrivateJWK, claims: dict[str, Any], typ: str | None) -> str:
        return f"{segment(_header(alg, victim, typ))}.{segment(claims)}.{b64url_encode(signature)}"

    return forge


def _eddsa(victim: PrivateJWK, claims: dict[str, Any], typ: str | None) -> str:
    # A genuine EdDSA signature by a key published under the victim's name.
    key = PA_ED if victim in (PA_EC, PA_RSA) else PROVIDER_ED
    return sign_raw(key, _header("EdDSA", key, typ), claims)


def _ps256(victim: PrivateJWK, claims: dict[str, Any], typ: str | None) -> str:
    # A genuine RSA-PSS signature by the victim's own RSA key (if it is one): valid crypto,
    # but PS256 is not an algorithm these tokens may use.
    rsa_key = PA_RSA if victim in (PA_EC, PA_RSA) else PROVIDER_RSA
    signing_input = f"{segment(_header('PS256', rsa_key, typ))}.{segment(claims)}"
    pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
    private = rsa_key.key
    assert isinstance(private, rsa.RSAPrivateKey)
    signature = private.sign(signing_input.encode(), pss, hashes.SHA256())
    return f"{signing_input}.{b64url_encode(signature)}"


def _es384(victim: PrivateJWK, claims: dict[str, Any], typ: str | None) -> str:
    # A genuine ES384 signature by a P-384 key, naming the victim's kid.
    key = ec.generate_private_key(ec.SECP384R1())
    signing_input = f"{segment(_header('ES384', victim, typ))}.{segment(claims)}"
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA384())))
    return f"{signing_input}.{b64url_encode(r.to_bytes(48, 'big') + s.to_bytes(48, 'big'))}"


FORGERIES: dict[str, Forge] = {
    **{f"HS256-keyed-with-{name}": _hmac("HS256", name) for name in ("pem", "der", "jwk-json")},
    "HS256-keyed-with-compact-jwk": _hmac("HS256", "jwk-compact"),
    "HS256-keyed-with-jwk-members": _hmac("HS256", "jwk-members"),
    "HS384-keyed-with-pem": _hmac("HS384", "pem"),
    "HS512-keyed-with-der": _hmac("HS512", "der"),
    "none": _unsigned("none"),
    "None": _unsigned("None"),
    "NONE": _unsigned("NONE"),
    "nOnE": _unsigned("nOnE"),
    "none-with-a-signature": _unsigned("none", b"sig"),
    "EdDSA": _eddsa,
    "PS256": _ps256,
    "ES384": _es384,
    "RS512": _unsigned("RS512", b"x" * 256),
    "ES256K": _unsigned("ES256K", b"x" * 64),
    "Ed25519": _unsigned("Ed25519", b"x" * 64),
    "ES256-trailing-space": _unsigned("ES256 ", b"x" * 64),
    "ES256-NUL": _unsigned("ES256\x00", b"x" * 64),
    "ES256-fullwidth": _unsigned("ＥＳ256", b"x" * 64),
    "RS256-lowercase": _unsigned("rs256", b"x" * 256),
}
VICTIMS = {"EC": (PA_EC, PROVIDER_EC), "RSA": (PA_RSA, PROVIDER_RSA)}


def test_the_key_server_is_reached_by_a_genuine_token(
    identity: IdentityVerifier, jwks: JwksServer
) -> None:
    """The control: with the same setup a genuine token does fetch, so 0 hits below means
    the refusal came before any key was looked for."""
    for key in (PA_EC, PA_RSA):
        assert identity.verify(
            "Bearer " + sign_raw(key, _header(key.alg, key, "JWT"), IDENTITY_CLAIMS)
        )
    assert jwks.total_hits == 1


@pytest.mark.parametrize("victim", sorted(VICTIMS))
@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_identity_refuses_the_alg_before_any_key_fetch(
    identity: IdentityVerifier, jwks: JwksServer, forgery: str, victim: str
) -> None:
    token = FORGERIES[forgery](VICTIMS[victim][0], IDENTITY_CLAIMS, "JWT")
    assert identity_refusal(identity, token) == "unsupported_alg"
    assert jwks.total_hits == 0


@pytest.mark.parametrize("victim", sorted(VICTIMS))
@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_delegation_refuses_the_alg_before_any_key_lookup(
    provider_keys: CountingKeySet, forgery: str, victim: str
) -> None:
    token = FORGERIES[forgery](VICTIMS[victim][1], DELEGATION_CLAIMS, "at+jwt")
    refused = delegation_refusal(provider_keys, token)
    assert refused.reason == "malformed_token"
    assert isinstance(refused.__cause__, JoseError)
    assert refused.__cause__.code == "alg_not_allowed"
    assert provider_keys.lookups == []


def test_async_identity_refuses_every_forgery_before_any_key_fetch(
    identity: IdentityVerifier, jwks: JwksServer
) -> None:
    async def refuse_all() -> list[str]:
        reasons = []
        for forge in FORGERIES.values():
            try:
                await identity.averify("Bearer " + forge(PA_EC, IDENTITY_CLAIMS, "JWT"))
            except AuthenticationFailed as exc:
                reasons.append(exc.reason)
        return reasons

    assert asyncio.run(refuse_all()) == ["unsupported_alg"] * len(FORGERIES)
    assert jwks.total_hits == 0


# -- key-type confusion: an allowed alg naming a key of the other type ----------------------------


def _relabelled(key: PrivateJWK, alg: str, kid: str | None, claims: dict[str, Any]) -> str:
    """A genuine signature by `key`, under a header that claims another `alg` and `kid`."""
    genuine = sign_raw(key, {"alg": key.alg, "kid": kid}, claims)
    _, payload, signature = genuine.split(".")
    return f"{segment({'alg': alg, 'kid': kid})}.{payload}.{signature}"


@pytest.mark.parametrize(
    ("signer", "alg", "kid"),
    [
        pytest.param(PA_RSA, "RS256", "ec-1", id="RS256-naming-the-EC-key"),
        pytest.param(PA_EC, "ES256", "rsa-1", id="ES256-naming-the-RSA-key"),
        pytest.param(PA_EC, "RS256", "ec-1", id="ES256-signature-relabelled-RS256"),
        pytest.param(PA_RSA, "ES256", "rsa-1", id="RS256-signature-relabelled-ES256"),
    ],
)
def test_identity_never_uses_a_key_of_the_wrong_type(
    identity: IdentityVerifier, signer: PrivateJWK, alg: str, kid: str
) -> None:
    token = _relabelled(signer, alg, kid, IDENTITY_CLAIMS)
    assert identity_refusal(identity, token) == "unknown_kid"


@pytest.mark.parametrize(
    ("signer", "alg", "kid"),
    [
        pytest.param(PROVIDER_RSA, "RS256", "provider-ec", id="RS256-naming-the-EC-key"),
        pytest.param(PROVIDER_EC, "ES256", "provider-rsa", id="ES256-naming-the-RSA-key"),
        pytest.param(PROVIDER_EC, "RS256", "provider-ec", id="ES256-signature-relabelled-RS256"),
        pytest.param(PROVIDER_RSA, "ES256", "provider-rsa", id="RS256-signature-relabelled-ES256"),
    ],
)
def test_delegation_never_uses_a_key_of_the_wrong_type(
    provider_keys: CountingKeySet, signer: PrivateJWK, alg: str, kid: str
) -> None:
    genuine = sign_raw(signer, {"alg": signer.alg, "typ": "at+jwt"}, DELEGATION_CLAIMS)
    _, payload, signature = genuine.split(".")
    token = f"{segment({'alg': alg, 'typ': 'at+jwt', 'kid': kid})}.{payload}.{signature}"
    assert delegation_refusal(provider_keys, token).reason == "bad_signature"
    # The lookup asked for keys of the header's alg only: none of them has that kid.
    assert provider_keys.lookups == [(kid, alg)]
    assert provider_keys.candidates(kid, alg) == ()


def test_one_kid_on_an_ec_and_an_rsa_key_only_the_fitting_key_is_tried(
    jwks: JwksServer,
) -> None:
    ec_key = generate_private_jwk("ES256", kid="shared")
    rsa_key = generate_private_jwk("RS256", kid="shared")
    # Published without `alg`, so only the key type tells them apart.
    published = [
        {k: v for k, v in key.public.to_dict().items() if k != "alg"} for key in (ec_key, rsa_key)
    ]
    jwks.set_keys({"keys": published})
    try:
        registry = AgentRegistry([RegisteredAgent(issuer=ISSUER, jwks_uri=jwks.url)])
        verifier = IdentityVerifier(
            audience=AUDIENCE, registry=registry, keys=JwksCache(POLICY), clock=lambda: NOW
        )
        for key in (ec_key, rsa_key):
            token = sign_raw(key, {"alg": key.alg, "kid": "shared"}, IDENTITY_CLAIMS)
            assert verifier.verify("Bearer " + token).sub == "u1"
        for key, alg in ((ec_key, "RS256"), (rsa_key, "ES256")):
            token = _relabelled(key, alg, "shared", IDENTITY_CLAIMS)
            assert identity_refusal(verifier, token) == "bad_signature"
    finally:
        jwks.set_keys(public_key_set([PA_EC, PA_RSA, PA_ED]))


def test_a_published_key_whose_alg_contradicts_its_type_is_never_used(jwks: JwksServer) -> None:
    ec_as_rsa = {**PA_EC.public.to_dict(), "alg": "RS256", "kid": "liar-ec"}
    rsa_as_ec = {**PA_RSA.public.to_dict(), "alg": "ES256", "kid": "liar-rsa"}
    jwks.set_keys({"keys": [ec_as_rsa, rsa_as_ec, PA_EC.public.to_dict()]})
    try:
        registry = AgentRegistry([RegisteredAgent(issuer=ISSUER, jwks_uri=jwks.url)])
        verifier = IdentityVerifier(
            audience=AUDIENCE, registry=registry, keys=JwksCache(POLICY), clock=lambda: NOW
        )
        for key, kid in ((PA_EC, "liar-ec"), (PA_RSA, "liar-rsa")):
            for alg in ("ES256", "RS256"):
                token = _relabelled(key, alg, kid, IDENTITY_CLAIMS)
                assert identity_refusal(verifier, token) == "unknown_kid"
        # The honest key in the same document still works.
        token = sign_raw(PA_EC, {"alg": "ES256", "kid": "ec-1"}, IDENTITY_CLAIMS)
        assert verifier.verify("Bearer " + token).sub == "u1"
    finally:
        jwks.set_keys(public_key_set([PA_EC, PA_RSA, PA_ED]))
