"""Header tricks: a token's header never says where its key is, what it must not check, or
what its payload is (SECURITY.md, "Header tricks").

`jku`, `x5u`, `jwk` and `x5c` are ignored: keys come only from configuration, and the
attacker's key server is never contacted. Any `crit` is refused, even on a genuinely signed
token. A header with a repeated member is not a header. Delegation tokens must say
`typ: at+jwt`, exactly.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from pactmw.core.encoding import b64url_encode
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from pactmw.core.keys import JwksCache
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from tests.advisories.support import (
    DELEGATION_CLAIMS,
    IDENTITY_CLAIMS,
    NOW,
    POLICY,
    delegation_outcome,
    identity_outcome,
    sign_raw,
)
from tests.support.jwks_server import JwksServer
from tests.support.keys import self_signed_certificate
from tests.support.parties import AUDIENCE, ISSUER

PA_KEY = generate_private_jwk("ES256", kid="pa-1")
PROVIDER_KEY = generate_private_jwk("ES256", kid="provider-1")
ATTACKER = generate_private_jwk("ES256", kid="evil-1")
ATTACKER_WITH_PA_KID = generate_private_jwk("ES256", kid="pa-1")


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[JwksServer, JwksServer]]:
    with (
        JwksServer(public_key_set([PA_KEY])) as legit,
        JwksServer(public_key_set([ATTACKER, ATTACKER_WITH_PA_KID])) as evil,
    ):
        yield legit, evil


@pytest.fixture
def legit(servers: tuple[JwksServer, JwksServer]) -> JwksServer:
    servers[0].reset()
    return servers[0]


@pytest.fixture
def evil(servers: tuple[JwksServer, JwksServer]) -> JwksServer:
    servers[1].reset()
    return servers[1]


@pytest.fixture
def identity(legit: JwksServer) -> IdentityVerifier:
    registry = AgentRegistry([RegisteredAgent(issuer=ISSUER, jwks_uri=legit.url)])
    return IdentityVerifier(
        audience=AUDIENCE, registry=registry, keys=JwksCache(POLICY), clock=lambda: NOW
    )


def self_signed_chain(key: PrivateJWK) -> list[str]:
    """An `x5c` value: a self-signed certificate for `key` (standard base64 DER)."""
    certificate = self_signed_certificate(key.key, "pa.example", serial=1)
    return [base64.b64encode(certificate.public_bytes(serialization.Encoding.DER)).decode()]


def test_the_genuine_token_is_accepted(identity: IdentityVerifier, legit: JwksServer) -> None:
    """The control for everything below: the same claims, signed by the agent, are accepted."""
    token = sign_raw(PA_KEY, {"alg": "ES256", "kid": "pa-1", "typ": "JWT"}, IDENTITY_CLAIMS)
    assert identity_outcome(identity, token) == "accepted"
    token = sign_raw(PROVIDER_KEY, {"alg": "ES256", "typ": "at+jwt"}, DELEGATION_CLAIMS)
    assert delegation_outcome(PROVIDER_KEY, token) == "accepted"


# -- key locations in the header: never used, never fetched -------------------------------------


def _key_location_headers(evil: JwksServer, attacker: PrivateJWK) -> dict[str, dict[str, Any]]:
    return {
        "jku": {"jku": evil.url},
        "x5u": {"x5u": evil.url_for("/cert.pem")},
        "jwk": {"jwk": attacker.public.to_dict()},
        "x5c": {"x5c": self_signed_chain(attacker)},
        "all-four": {
            "jku": evil.url,
            "x5u": evil.url_for("/cert.pem"),
            "jwk": attacker.public.to_dict(),
            "x5c": self_signed_chain(attacker),
        },
    }


@pytest.mark.parametrize("member", ["jku", "x5u", "jwk", "x5c", "all-four"])
@pytest.mark.parametrize(
    ("attacker", "expected"),
    [
        pytest.param(ATTACKER, "unknown_kid", id="attacker-kid"),
        pytest.param(ATTACKER_WITH_PA_KID, "bad_signature", id="agent-kid"),
    ],
)
def test_identity_ignores_key_locations_in_the_header(
    identity: IdentityVerifier,
    legit: JwksServer,
    evil: JwksServer,
    member: str,
    attacker: PrivateJWK,
    expected: str,
) -> None:
    extra = _key_location_headers(evil, attacker)[member]
    header = {"alg": "ES256", "kid": attacker.kid, **extra}
    assert identity_outcome(identity, sign_raw(attacker, header, IDENTITY_CLAIMS)) == expected
    assert evil.total_hits == 0
    assert set(legit.hits) == {legit.jwks_path}


@pytest.mark.parametrize("member", ["jku", "x5u", "jwk", "x5c", "all-four"])
def test_identity_ignores_key_locations_in_a_header_without_kid(
    identity: IdentityVerifier, legit: JwksServer, evil: JwksServer, member: str
) -> None:
    # Without a kid every configured key that fits is tried; the embedded one never is.
    header = {"alg": "ES256", **_key_location_headers(evil, ATTACKER)[member]}
    assert identity_outcome(identity, sign_raw(ATTACKER, header, IDENTITY_CLAIMS)) == (
        "bad_signature"
    )
    assert evil.total_hits == 0


@pytest.mark.parametrize("member", ["jku", "x5u", "jwk", "x5c", "all-four"])
@pytest.mark.parametrize("kid", [None, "provider-1", "evil-1"])
def test_delegation_ignores_key_locations_in_the_header(
    evil: JwksServer, member: str, kid: str | None
) -> None:
    header: dict[str, Any] = {"alg": "ES256", "typ": "at+jwt"}
    if kid is not None:
        header["kid"] = kid
    header.update(_key_location_headers(evil, ATTACKER)[member])
    assert (
        delegation_outcome(PROVIDER_KEY, sign_raw(ATTACKER, header, DELEGATION_CLAIMS))
        == "bad_signature"
    )
    assert evil.total_hits == 0


def test_key_locations_do_not_spoil_a_genuine_token(
    identity: IdentityVerifier, evil: JwksServer
) -> None:
    """Ignored means ignored: the agent's own token still verifies with its configured key."""
    header = {"alg": "ES256", "kid": "pa-1", **_key_location_headers(evil, ATTACKER)["all-four"]}
    assert identity_outcome(identity, sign_raw(PA_KEY, header, IDENTITY_CLAIMS)) == "accepted"
    assert evil.total_hits == 0


# -- crit: no extension is understood, so every crit fails ----------------------------------------

CRIT_HEADERS: dict[str, dict[str, Any]] = {
    "empty-list": {"crit": []},
    "unknown": {"crit": ["https://example.com/ext"], "https://example.com/ext": True},
    "unknown-without-member": {"crit": ["exp"]},
    "b64-false": {"crit": ["b64"], "b64": False},
    "b64-true": {"crit": ["b64"], "b64": True},
    "registered-name": {"crit": ["kid"]},
    "alg-itself": {"crit": ["alg"]},
    "a-string": {"crit": "b64"},
    "null": {"crit": None},
    "b64-without-crit": {"b64": False},
}


@pytest.mark.parametrize("case", sorted(CRIT_HEADERS))
def test_identity_refuses_crit_on_a_genuine_token_before_any_fetch(
    identity: IdentityVerifier, legit: JwksServer, case: str
) -> None:
    header = {"alg": "ES256", "kid": "pa-1", **CRIT_HEADERS[case]}
    assert identity_outcome(identity, sign_raw(PA_KEY, header, IDENTITY_CLAIMS)) == (
        "malformed_token"
    )
    assert legit.total_hits == 0


@pytest.mark.parametrize("case", sorted(CRIT_HEADERS))
def test_delegation_refuses_crit_on_a_genuine_token(case: str) -> None:
    header = {"alg": "ES256", "typ": "at+jwt", "kid": "provider-1", **CRIT_HEADERS[case]}
    assert delegation_outcome(PROVIDER_KEY, sign_raw(PROVIDER_KEY, header, DELEGATION_CLAIMS)) == (
        "malformed_token"
    )


def test_a_crit_header_is_refused_even_after_the_same_header_without_it_was_cached(
    identity: IdentityVerifier,
) -> None:
    # The identity verifier memoises parsed headers; a near-identical header must not ride on
    # a cached entry.
    plain = {"alg": "ES256", "kid": "pa-1"}
    assert identity_outcome(identity, sign_raw(PA_KEY, plain, IDENTITY_CLAIMS)) == "accepted"
    crit = {"alg": "ES256", "kid": "pa-1", "crit": ["b64"], "b64": False}
    for _ in range(2):
        assert identity_outcome(identity, sign_raw(PA_KEY, crit, IDENTITY_CLAIMS)) == (
            "malformed_token"
        )


# -- cty/zip/enc: the payload is what was signed, never unwrapped ---------------------------------


@pytest.mark.parametrize(
    "extra",
    [{"cty": "JWT"}, {"zip": "DEF"}, {"enc": "A256GCM"}, {"cty": "application/jwt"}],
    ids=["cty-JWT", "zip", "enc", "cty-media-type"],
)
def test_a_nested_or_compressed_payload_is_never_unwrapped(
    identity: IdentityVerifier, extra: dict[str, str]
) -> None:
    # The payload is another (genuine) token: a verifier that honoured `cty: JWT` would
    # verify and return the inner one. pactmw reads the payload as claims and refuses it.
    inner = sign_compact(IDENTITY_CLAIMS, PA_KEY, typ="JWT").encode()
    header = {"alg": "ES256", "kid": "pa-1", **extra}
    assert identity_outcome(identity, sign_raw(PA_KEY, header, inner)) == "malformed_token"
    inner_delegation = sign_compact(DELEGATION_CLAIMS, PROVIDER_KEY, typ="at+jwt").encode()
    header = {"alg": "ES256", "typ": "at+jwt", **extra}
    assert delegation_outcome(PROVIDER_KEY, sign_raw(PROVIDER_KEY, header, inner_delegation)) == (
        "malformed_token"
    )


# -- kid: just a string to compare, never a path, a query or a URL ---------------------------------

HOSTILE_KIDS = [
    "../../../../etc/passwd",
    "/dev/zero",
    "provider-1' OR '1'='1",
    'provider-1"; DROP TABLE grants; --',
    "provider-1\x00",
    "\x00",
    "provider-1\r\nX-Injected: 1",
    "%2e%2e%2fprovider-1",
    "https://evil.example/jwks.json",
    "file:///etc/passwd",
    "ргоvidег-1",  # Cyrillic look-alike of provider-1
    "provider-1 ",
    "\ud800",
    "k" * 15_000,
]


@pytest.mark.parametrize("kid", HOSTILE_KIDS, ids=range(len(HOSTILE_KIDS)))
def test_delegation_hostile_kids_are_just_unknown(kid: str) -> None:
    # Signed by the attacker: the kid finds no provider key. (`json.dumps` escapes what UTF-8
    # cannot carry, such as a lone surrogate.)
    header = json.dumps({"alg": "ES256", "typ": "at+jwt", "kid": kid}).encode()
    assert delegation_outcome(PROVIDER_KEY, sign_raw(ATTACKER, header, DELEGATION_CLAIMS)) in {
        "bad_signature",
        "malformed_token",  # the NUL/surrogate/huge ones may fail to parse instead
    }
    # Signed by the provider's own key but naming another kid: still refused, no key found.
    genuine = sign_raw(PROVIDER_KEY, header, DELEGATION_CLAIMS)
    assert delegation_outcome(PROVIDER_KEY, genuine) in {"bad_signature", "malformed_token"}


def test_a_kid_near_the_token_bound_is_unknown_and_fetches_once(
    identity: IdentityVerifier, legit: JwksServer
) -> None:
    header = {"alg": "ES256", "kid": "pa-1" + "x" * 11_500}
    token = sign_raw(PA_KEY, header, IDENTITY_CLAIMS)
    assert len(token) < 16 * 1024
    for _ in range(3):
        assert identity_outcome(identity, token) == "unknown_kid"
    assert legit.hits == {legit.jwks_path: 1}


# -- a header member given twice is not a header --------------------------------------------------

_SIG = b64url_encode(b"x" * 64)


def _duplicate(*members: str) -> bytes:
    return ("{" + ",".join(members) + "}").encode()


DUPLICATE_HEADERS = {
    "alg-HS256-then-ES256": _duplicate('"alg":"HS256"', '"alg":"ES256"', '"kid":"pa-1"'),
    "alg-ES256-then-none": _duplicate('"alg":"ES256"', '"kid":"pa-1"', '"alg":"none"'),
    "alg-twice-the-same": _duplicate('"alg":"ES256"', '"kid":"pa-1"', '"alg":"ES256"'),
    "alg-escaped-twice": _duplicate('"alg":"ES256"', '"kid":"pa-1"', '"\\u0061lg":"ES256"'),
    "kid-evil-then-genuine": _duplicate('"alg":"ES256"', '"kid":"evil"', '"kid":"pa-1"'),
    "typ-JWT-then-at+jwt": _duplicate(
        '"alg":"ES256"', '"kid":"pa-1"', '"typ":"JWT"', '"typ":"at+jwt"'
    ),
    "crit-hidden-by-repeat": _duplicate(
        '"alg":"ES256"', '"kid":"pa-1"', '"crit":["b64"]', '"crit":[]'
    ),
}


@pytest.mark.parametrize("case", sorted(DUPLICATE_HEADERS))
def test_identity_refuses_a_header_with_a_repeated_member_before_any_fetch(
    identity: IdentityVerifier, legit: JwksServer, case: str
) -> None:
    token = sign_raw(PA_KEY, DUPLICATE_HEADERS[case], IDENTITY_CLAIMS)
    assert identity_outcome(identity, token) == "malformed_token"
    assert legit.total_hits == 0


@pytest.mark.parametrize("case", sorted(DUPLICATE_HEADERS))
def test_delegation_refuses_a_header_with_a_repeated_member(case: str) -> None:
    raw = DUPLICATE_HEADERS[case].replace(b'"kid":"pa-1"', b'"kid":"provider-1","typ":"at+jwt"')
    if case == "typ-JWT-then-at+jwt":
        raw = DUPLICATE_HEADERS[case].replace(b'"kid":"pa-1"', b'"kid":"provider-1"')
    assert delegation_outcome(PROVIDER_KEY, sign_raw(PROVIDER_KEY, raw, DELEGATION_CLAIMS)) == (
        "malformed_token"
    )


# -- typ of delegation tokens ---------------------------------------------------------------------

WRONG_TYPS: list[Any] = [
    "JWT",
    "jwt",
    "",
    "at+jwt ",
    " at+jwt",
    "at+jwt\x00",
    "at+jwt;q=1",
    "at%2Bjwt",
    "at jwt",
    "pact-receipt+jws",
    "pact-consent+jwt",
    "JOSE",
    "JOSE+JSON",
    ["at+jwt"],
    {"typ": "at+jwt"},
    True,
    1,
    None,
]


@pytest.mark.parametrize("typ", WRONG_TYPS, ids=[repr(t) for t in WRONG_TYPS])
def test_delegation_token_with_a_wrong_typ_is_refused(typ: Any) -> None:
    token = sign_raw(PROVIDER_KEY, {"alg": "ES256", "typ": typ}, DELEGATION_CLAIMS)
    assert delegation_outcome(PROVIDER_KEY, token) == "bad_typ"


def test_delegation_token_without_typ_is_refused() -> None:
    token = sign_raw(PROVIDER_KEY, {"alg": "ES256"}, DELEGATION_CLAIMS)
    assert delegation_outcome(PROVIDER_KEY, token) == "bad_typ"


@pytest.mark.parametrize("typ", ["AT+JWT", "At+Jwt", "application/at+jwt", "APPLICATION/AT+JWT"])
def test_delegation_token_typ_is_compared_exactly(typ: str) -> None:
    # RFC 9068 would also allow `application/at+jwt` and case variants (media types are
    # case-insensitive). The Provider verifies only tokens it minted itself, always spelled
    # `at+jwt`, so the exact match is the stricter, deliberate choice.
    token = sign_raw(PROVIDER_KEY, {"alg": "ES256", "typ": typ}, DELEGATION_CLAIMS)
    assert delegation_outcome(PROVIDER_KEY, token) == "bad_typ"
