"""Compact JWS: parse, verify, sign. The `alg` allow-list runs before any key is touched."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from hypothesis import given
from hypothesis import strategies as st

from pactmw.core.encoding import b64url_decode, b64url_encode, json_dumps
from pactmw.core.errors import JoseError
from pactmw.core.jose import (
    MAX_TOKEN_LENGTH,
    HeaderCache,
    der_signature,
    parse_compact,
    sign_compact,
    verify_signature,
)
from pactmw.core.jwk import PrivateJWK, generate_private_jwk

ALL_ALGS = frozenset({"ES256", "RS256", "EdDSA"})
IDENTITY_ALGS = frozenset({"ES256", "RS256"})
CLAIMS = {"iss": "https://pa.example", "sub": "user-1", "aud": "aud", "iat": 1, "exp": 2}


@pytest.fixture(scope="module")
def keys() -> dict[str, PrivateJWK]:
    return {alg: generate_private_jwk(alg, kid=f"k-{alg}") for alg in sorted(ALL_ALGS)}


def _token(header: dict[str, Any], payload: bytes | dict[str, Any], signature: bytes) -> str:
    body = payload if isinstance(payload, bytes) else json_dumps(payload)
    return ".".join(
        [b64url_encode(json_dumps(header)), b64url_encode(body), b64url_encode(signature)]
    )


def _code(token: str, allowed: frozenset[str], key: Any = None) -> str:
    """The JoseError code that parsing (then verifying with `key`, when given) ends with."""
    try:
        jws = parse_compact(token, allowed_algs=allowed)
        if key is not None:
            verify_signature(jws, key)
    except JoseError as exc:
        return exc.code
    raise AssertionError("the token was accepted")


def _code_cached(token: str, allowed: frozenset[str], cache: HeaderCache) -> str:
    """The JoseError code that parsing with `cache` ends with."""
    with pytest.raises(JoseError) as info:
        parse_compact(token, allowed_algs=allowed, header_cache=cache)
    return info.value.code


# -- round trips --------------------------------------------------------------------------------


@pytest.mark.parametrize("alg", sorted(ALL_ALGS))
def test_sign_verify_round_trip(keys: dict[str, PrivateJWK], alg: str) -> None:
    key = keys[alg]
    token = sign_compact(CLAIMS, key, typ="JWT")
    assert token.count(".") == 2
    jws = parse_compact(token, allowed_algs=ALL_ALGS)
    assert dict(jws.header) == {"alg": alg, "typ": "JWT", "kid": f"k-{alg}"}
    assert jws.alg == alg
    assert jws.kid == f"k-{alg}"
    verify_signature(jws, key.public)
    assert jws.claims() == CLAIMS


@pytest.mark.parametrize("alg", sorted(ALL_ALGS))
def test_raw_payload_round_trip(keys: dict[str, PrivateJWK], alg: str) -> None:
    token = sign_compact(b"\x00\xffraw bytes", keys[alg])
    jws = parse_compact(token, allowed_algs=ALL_ALGS)
    verify_signature(jws, keys[alg].public)
    assert jws.payload == b"\x00\xffraw bytes"
    with pytest.raises(JoseError) as info:
        jws.claims()
    assert info.value.code == "malformed"


def test_es256_signature_is_raw_r_s(keys: dict[str, PrivateJWK]) -> None:
    token = sign_compact(CLAIMS, keys["ES256"])
    assert len(b64url_decode(token.split(".")[2])) == 64


def test_es256_der_signature_refused(keys: dict[str, PrivateJWK]) -> None:
    key = keys["ES256"]
    header = {"alg": "ES256", "kid": key.kid}
    signing_input = f"{b64url_encode(json_dumps(header))}.{b64url_encode(json_dumps(CLAIMS))}"
    assert isinstance(key.key, ec.EllipticCurvePrivateKey)
    der = key.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
    assert len(der) != 64
    # The DER signature is a valid ECDSA signature over the input, in the wrong encoding.
    public = key.public.key
    assert isinstance(public, ec.EllipticCurvePublicKey)
    public.verify(der, signing_input.encode(), ec.ECDSA(hashes.SHA256()))
    token = f"{signing_input}.{b64url_encode(der)}"
    assert _code(token, IDENTITY_ALGS, key.public) == "bad_signature"


def test_es256_signature_of_wrong_length_refused(keys: dict[str, PrivateJWK]) -> None:
    token = sign_compact(CLAIMS, keys["ES256"])
    head, body, sig = token.split(".")
    raw = b64url_decode(sig)
    for bad in (raw[:63], raw + b"\x00", b"", raw[:32]):
        assert _code(f"{head}.{body}.{b64url_encode(bad)}", ALL_ALGS, keys["ES256"].public) == (
            "bad_signature"
        )


# -- alg allow-list -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "alg",
    [
        "none",
        "None",
        "NONE",
        "HS256",
        "HS384",
        "PS256",
        "ES384",
        "ES512",
        "RS512",
        "EdDSA",
        "es256",
    ],
)
def test_alg_outside_the_allowed_set(keys: dict[str, PrivateJWK], alg: str) -> None:
    token = _token({"alg": alg, "kid": "k-ES256"}, CLAIMS, b"sig")
    assert _code(token, IDENTITY_ALGS) == "alg_not_allowed"


def test_alg_none_with_empty_signature_refused() -> None:
    token = _token({"alg": "none"}, CLAIMS, b"")
    assert token.endswith(".")
    assert _code(token, IDENTITY_ALGS) == "alg_not_allowed"
    assert _code(token, ALL_ALGS) == "alg_not_allowed"


@pytest.mark.parametrize("alg", [None, 256, ["ES256"], {"ES256": True}, ""])
def test_alg_missing_or_not_a_string(alg: Any) -> None:
    header = {"kid": "x"} if alg is None else {"alg": alg}
    assert _code(_token(header, CLAIMS, b"sig"), IDENTITY_ALGS) == "alg_not_allowed"


def test_eddsa_allowed_only_when_listed(keys: dict[str, PrivateJWK]) -> None:
    token = sign_compact(CLAIMS, keys["EdDSA"])
    assert _code(token, IDENTITY_ALGS) == "alg_not_allowed"
    verify_signature(parse_compact(token, allowed_algs=ALL_ALGS), keys["EdDSA"].public)


def test_hs256_signed_with_public_key_refused_before_any_key_use(
    keys: dict[str, PrivateJWK],
) -> None:
    # The classic alg-confusion token: HMAC keyed with the verifier's public key material.
    secret = json_dumps(keys["RS256"].public.to_dict())
    header = {"alg": "HS256", "kid": "k-RS256"}
    signing_input = f"{b64url_encode(json_dumps(header))}.{b64url_encode(json_dumps(CLAIMS))}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    token = f"{signing_input}.{b64url_encode(mac)}"
    assert _code(token, IDENTITY_ALGS) == "alg_not_allowed"
    assert _code(token, ALL_ALGS) == "alg_not_allowed"


# -- header members -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        {"crit": ["exp"]},
        {"crit": []},
        {"crit": ["b64"], "b64": False},
        {"b64": False},
        {"b64": True},
    ],
)
def test_crit_and_b64_refused(keys: dict[str, PrivateJWK], extra: dict[str, Any]) -> None:
    token = sign_compact(CLAIMS, keys["ES256"], extra_header=extra)
    assert _code(token, IDENTITY_ALGS, keys["ES256"].public) == "malformed"


def test_key_location_headers_are_ignored(keys: dict[str, PrivateJWK]) -> None:
    configured = keys["ES256"]
    attacker = generate_private_jwk("ES256", kid=configured.kid)
    pointers = {
        "jku": "https://attacker.example/jwks.json",
        "x5u": "https://attacker.example/cert.pem",
        "jwk": attacker.public.to_dict(),
        "x5c": ["MIIB"],
    }
    # Signed by the configured key: the pointers change nothing, it verifies as usual.
    honest = sign_compact(CLAIMS, configured, extra_header=pointers)
    verify_signature(parse_compact(honest, allowed_algs=IDENTITY_ALGS), configured.public)
    # Signed by the key it carries in its own header: the configured key refuses it.
    forged = sign_compact(CLAIMS, attacker, extra_header={"jwk": attacker.public.to_dict()})
    jws = parse_compact(forged, allowed_algs=IDENTITY_ALGS)
    assert jws.header["jwk"] == attacker.public.to_dict()
    with pytest.raises(JoseError) as info:
        verify_signature(jws, configured.public)
    assert info.value.code == "bad_signature"


def test_a_cached_header_is_checked_as_a_fresh_one(keys: dict[str, PrivateJWK]) -> None:
    """A header cache shared by callers that allow different algorithms: a hit still checks
    `alg` against this caller's set, and a header refused once is refused every time."""
    cache = HeaderCache()
    token = sign_compact(CLAIMS, keys["ES256"])
    for _ in range(2):  # a miss, then a hit
        jws = parse_compact(token, allowed_algs=IDENTITY_ALGS, header_cache=cache)
        assert (jws.alg, jws.kid) == ("ES256", "k-ES256")
        assert jws.header == {"alg": "ES256", "kid": "k-ES256"}
        verify_signature(jws, keys["ES256"].public)
        assert _code_cached(token, frozenset({"RS256"}), cache) == "alg_not_allowed"
    for extra in ({"crit": ["exp"]}, {"b64": False}):
        refused = sign_compact(CLAIMS, keys["ES256"], extra_header=extra)
        assert _code_cached(refused, IDENTITY_ALGS, cache) == "malformed"
        assert _code_cached(refused, IDENTITY_ALGS, cache) == "malformed"
    # A header first refused for its alg is not kept: the caller that allows it parses it.
    rs = sign_compact(CLAIMS, keys["RS256"])
    assert _code_cached(rs, frozenset({"ES256"}), cache) == "alg_not_allowed"
    assert parse_compact(rs, allowed_algs=IDENTITY_ALGS, header_cache=cache).alg == "RS256"


@pytest.mark.parametrize("kid", [1, ["a"], {"k": 1}, True])
def test_kid_must_be_a_string(kid: Any) -> None:
    assert _code(_token({"alg": "ES256", "kid": kid}, CLAIMS, b"s"), IDENTITY_ALGS) == "malformed"


def test_token_without_kid(keys: dict[str, PrivateJWK]) -> None:
    key = generate_private_jwk("ES256")
    token = sign_compact(CLAIMS, key, extra_header={"kid": None})
    jws = parse_compact(token, allowed_algs=IDENTITY_ALGS)
    assert jws.kid is None
    verify_signature(jws, key.public)


# -- shape --------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 4, 5])
def test_exactly_three_segments(keys: dict[str, PrivateJWK], count: int) -> None:
    token = sign_compact(CLAIMS, keys["ES256"])
    parts = token.split(".")
    shaped = ".".join((parts * 2)[:count])
    assert _code(shaped, IDENTITY_ALGS, keys["ES256"].public) == "malformed"


@pytest.mark.parametrize(
    "token", ["", ".", "..", "...", "a.b.c", "e30.e30", "e30.e30.e30.", "x.e30.e30"]
)
def test_garbage_is_malformed(token: str) -> None:
    assert _code(token, IDENTITY_ALGS) == "malformed"


@pytest.mark.parametrize("token", [None, 5, b"e30.e30.e30", ["e30", "e30", "e30"], {"a": 1}])
def test_a_token_that_is_not_a_string_is_malformed(token: Any) -> None:
    # Found in a custom-server trial: a token read from a JSON body can be any JSON value,
    # and bytes come straight from ASGI headers; each was a TypeError or AttributeError.
    assert _code(token, IDENTITY_ALGS) == "malformed"


@pytest.mark.parametrize("header", [b"[]", b'"ES256"', b"1", b"null", b"true", b'["alg","ES256"]'])
def test_header_must_be_a_json_object(header: bytes) -> None:
    token = f"{b64url_encode(header)}.{b64url_encode(b'{}')}.{b64url_encode(b'sig')}"
    assert _code(token, IDENTITY_ALGS) == "malformed"


@pytest.mark.parametrize(
    "header_b64",
    [
        b64url_encode(b'{"alg":"ES256","alg":"ES256"}'),  # duplicate member
        b64url_encode(b'{"alg":"ES256"') + "",  # truncated JSON
        b64url_encode(b'{"alg":"ES256"}') + "=",  # padding
        "eyJhbGciOiJFUzI1NiJ9".replace("-", "+") + "+",  # standard alphabet
        b64url_encode('{"alg":"ES256"}'.encode("utf-16")),  # not UTF-8
    ],
)
def test_header_encoding_is_strict(header_b64: str) -> None:
    token = f"{header_b64}.{b64url_encode(b'{}')}.{b64url_encode(b'sig')}"
    assert _code(token, IDENTITY_ALGS) == "malformed"


def test_payload_and_signature_segments_must_be_base64url(keys: dict[str, PrivateJWK]) -> None:
    head, body, sig = sign_compact(CLAIMS, keys["ES256"]).split(".")
    for token in (f"{head}.{body}=.{sig}", f"{head}.{body}.{sig}=", f"{head}.{body}.{sig}+"):
        assert _code(token, IDENTITY_ALGS, keys["ES256"].public) == "malformed"


@pytest.mark.parametrize("segment", [0, 1, 2])
def test_every_character_outside_the_alphabet_is_refused(
    keys: dict[str, PrivateJWK], segment: int
) -> None:
    # One translate pass vets the characters and maps the alphabet to the standard one: "+",
    # "/", "=", the "!" it marks refusals with, and every non-ASCII character stay refused.
    parts = sign_compact(CLAIMS, keys["ES256"]).split(".")
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
    for char in [chr(c) for c in range(256)] + ["é", "€", "\ud800", "😀"]:
        if char in alphabet:
            continue
        tampered = list(parts)
        tampered[segment] = tampered[segment][:8] + char + tampered[segment][8:]
        with pytest.raises(JoseError) as info:
            parse_compact(".".join(tampered), allowed_algs=IDENTITY_ALGS)
        assert info.value.code == "malformed", repr(char)


def test_payload_that_is_not_an_object(keys: dict[str, PrivateJWK]) -> None:
    for payload in (b"[]", b'"x"', b"{", b'{"a":1,"a":2}', b'{"exp":NaN}'):
        jws = parse_compact(sign_compact(payload, keys["ES256"]), allowed_algs=IDENTITY_ALGS)
        verify_signature(jws, keys["ES256"].public)
        with pytest.raises(JoseError) as info:
            jws.claims()
        assert info.value.code == "malformed"


def test_over_long_token_refused(keys: dict[str, PrivateJWK]) -> None:
    key = keys["ES256"]
    # Find a filler that makes the signed token exactly MAX_TOKEN_LENGTH characters long.
    base = len(sign_compact({"f": ""}, key))
    exact = None
    for extra in range(MAX_TOKEN_LENGTH - base - 8, MAX_TOKEN_LENGTH - base + 8):
        candidate = sign_compact({"f": "x" * int(extra * 3 / 4)}, key)
        if len(candidate) == MAX_TOKEN_LENGTH:
            exact = candidate
            break
    assert exact is not None
    verify_signature(parse_compact(exact, allowed_algs=IDENTITY_ALGS), key.public)
    longer = sign_compact({"f": "x" * (MAX_TOKEN_LENGTH * 3 // 4)}, key)
    assert len(longer) > MAX_TOKEN_LENGTH
    with pytest.raises(JoseError, match="too long") as info:
        parse_compact(longer, allowed_algs=IDENTITY_ALGS)
    assert info.value.code == "malformed"
    with pytest.raises(JoseError, match="too long"):
        parse_compact("a" * 10_000_000, allowed_algs=IDENTITY_ALGS)


# -- key / signature mismatch -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("token_alg", "key_alg"),
    [
        ("ES256", "RS256"),
        ("RS256", "ES256"),
        ("EdDSA", "ES256"),
        ("ES256", "EdDSA"),
        ("RS256", "EdDSA"),
    ],
)
def test_key_type_mismatch(keys: dict[str, PrivateJWK], token_alg: str, key_alg: str) -> None:
    token = sign_compact(CLAIMS, keys[token_alg])
    assert _code(token, ALL_ALGS, keys[key_alg].public) == "key_mismatch"


@pytest.mark.parametrize("alg", sorted(ALL_ALGS))
def test_tampered_payload_refused(keys: dict[str, PrivateJWK], alg: str) -> None:
    head, _, sig = sign_compact(CLAIMS, keys[alg]).split(".")
    tampered = b64url_encode(json_dumps(CLAIMS | {"sub": "admin"}))
    assert _code(f"{head}.{tampered}.{sig}", ALL_ALGS, keys[alg].public) == "bad_signature"


@pytest.mark.parametrize("alg", sorted(ALL_ALGS))
def test_tampered_header_and_signature_refused(keys: dict[str, PrivateJWK], alg: str) -> None:
    head, body, sig = sign_compact(CLAIMS, keys[alg]).split(".")
    new_head = b64url_encode(json_dumps({"alg": alg, "kid": f"k-{alg}", "typ": "JWT"}))
    assert _code(f"{new_head}.{body}.{sig}", ALL_ALGS, keys[alg].public) == "bad_signature"
    raw = bytearray(b64url_decode(sig))
    raw[len(raw) // 2] ^= 0x01
    flipped = b64url_encode(bytes(raw))
    assert _code(f"{head}.{body}.{flipped}", ALL_ALGS, keys[alg].public) == "bad_signature"


@pytest.mark.parametrize("alg", sorted(ALL_ALGS))
def test_signature_by_another_key_of_the_same_type_refused(
    keys: dict[str, PrivateJWK], alg: str
) -> None:
    stranger = generate_private_jwk(alg, kid=f"k-{alg}")
    token = sign_compact(CLAIMS, stranger)
    assert _code(token, ALL_ALGS, keys[alg].public) == "bad_signature"


@given(st.binary(min_size=64, max_size=64))
def test_der_signature_is_what_cryptography_encodes(rs: bytes) -> None:
    r, s = int.from_bytes(rs[:32], "big"), int.from_bytes(rs[32:], "big")
    assert der_signature(rs) == encode_dss_signature(r, s)


@pytest.mark.parametrize(
    "rs",
    [
        bytes(64),
        b"\x80" + bytes(31) + b"\x7f" + bytes(31),
        bytes(31) + b"\x01" + bytes(31) + b"\xff",
        b"\xff" * 64,
        bytes(1) + b"\x80" + bytes(30) + bytes(2) + b"\x01" * 30,
    ],
)
def test_der_signature_edges(rs: bytes) -> None:
    r, s = int.from_bytes(rs[:32], "big"), int.from_bytes(rs[32:], "big")
    assert der_signature(rs) == encode_dss_signature(r, s)
