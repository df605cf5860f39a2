"""RSA keys chosen to make verification expensive (SECURITY.md, "Resource exhaustion").

A JWKS is not always the Provider's to choose: a Poppy client's `jwks_uri` is on the client's
own host, an open-mode issuer's comes from its discovery, a DPoP proof carries its key in its
header. OpenSSL accepts an RSA public exponent as long as the modulus (up to 3072 bits) and a
modulus up to 16384 bits, and a signature check then costs a modular exponentiation that
long: about 8 ms for one 3072-bit exponent, against 0.05 ms for an ordinary 2048-bit key
with e = 65537, and a token without `kid` is tried against every key of the set (the 64 KiB
cap holds some sixty of them: more than half a second of CPU per request). As Go does
(crypto/rsa: e at most 2^31 - 1; crypto/tls, CVE-2023-29409: moduli of at most 8192 bits),
such keys are not imported: a JWKS skips them, a DPoP proof carrying one is refused at its
`jwk`, before any signature is checked.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pactmw.core.dpop import DpopError, check_dpop_proof
from pactmw.core.encoding import b64url_encode
from pactmw.core.errors import AuthenticationFailed, MalformedInput
from pactmw.core.jwk import import_public_jwk, parse_jwks
from pactmw.core.keys import JwksCache
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from tests.advisories.support import IDENTITY_CLAIMS, NOW, POLICY, segment
from tests.support.jwks_server import JwksServer
from tests.support.parties import AUDIENCE, ISSUER


def _b64_int(value: int) -> str:
    return b64url_encode(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def _modulus(bits: int) -> int:
    # Any odd number of that size imports (nothing checks that it is a product of two
    # primes): what an attacker publishes need not be a key anyone holds.
    return (1 << (bits - 1)) | (0x5DEECE66D << 64) | 1


def _rsa(bits: int, e: int) -> dict[str, str]:
    return {"kty": "RSA", "n": _b64_int(_modulus(bits)), "e": _b64_int(e)}


COSTLY = {
    "e-of-3070-bits": _rsa(3072, (_modulus(3072) >> 2) | 1),
    "e-of-2048-bits": _rsa(2048, (_modulus(2048) >> 1) | 1),
    "e-just-past-2^31-1": _rsa(2048, 2**31 + 1),
    "e-of-64-bits-modulus-16384": _rsa(16384, 2**64 - 1),
    "modulus-of-8193-bits": _rsa(8193, 65537),
}
ORDINARY = {
    "2048-65537": _rsa(2048, 65537),
    "2048-3": _rsa(2048, 3),
    "8192-65537": _rsa(8192, 65537),
    "4096-2^31-1": _rsa(4096, 2**31 - 1),
}


@pytest.mark.parametrize("name", sorted(COSTLY))
def test_a_costly_rsa_key_is_not_imported(name: str) -> None:
    with pytest.raises(MalformedInput):
        import_public_jwk(COSTLY[name])
    assert parse_jwks({"keys": [COSTLY[name]]}).keys == ()


@pytest.mark.parametrize("name", sorted(ORDINARY))
def test_ordinary_rsa_keys_still_import(name: str) -> None:
    assert import_public_jwk(ORDINARY[name]).kty == "RSA"


@pytest.fixture
def costly_jwks() -> Iterator[JwksServer]:
    # Sixty keys of the costliest kind, no kid: everything a token without kid would try.
    member = COSTLY["e-of-3070-bits"]
    with JwksServer() as server:
        server.set_keys({"keys": [member] * 60})
        yield server


def test_a_token_without_kid_is_tried_against_no_costly_key(costly_jwks: JwksServer) -> None:
    registry = AgentRegistry([RegisteredAgent(issuer=ISSUER, jwks_uri=costly_jwks.url)])
    verifier = IdentityVerifier(
        audience=AUDIENCE, registry=registry, keys=JwksCache(POLICY), clock=lambda: NOW
    )
    # An RS256 signature as long as the modulus, so every key would run its exponentiation.
    signature = (_modulus(3072) - 12345).to_bytes(384, "big")
    token = f"{segment({'alg': 'RS256'})}.{segment(IDENTITY_CLAIMS)}.{b64url_encode(signature)}"
    with pytest.raises(AuthenticationFailed) as refused:
        verifier.verify("Bearer " + token)
    # No key of the set is usable, so none is tried (it was `bad_signature`, after 60 tries).
    assert refused.value.reason == "unknown_kid"
    assert costly_jwks.total_hits == 1


def test_a_dpop_proof_carrying_a_costly_key_is_refused_at_its_jwk() -> None:
    header = {"typ": "dpop+jwt", "alg": "RS256", "jwk": COSTLY["e-of-3070-bits"]}
    claims = {"jti": "x" * 16, "htm": "POST", "htu": "https://shop.example/token", "iat": NOW}
    signature = (_modulus(3072) - 12345).to_bytes(384, "big")
    proof = f"{segment(header)}.{segment(claims)}.{b64url_encode(signature)}"
    with pytest.raises(DpopError) as refused:
        check_dpop_proof(proof, method="POST", url="https://shop.example/token", now=NOW)
    assert refused.value.reason == "jwk"
