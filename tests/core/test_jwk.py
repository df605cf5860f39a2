"""JWK import/export, RFC 7638 thumbprints (RFC and Parafé known answers), key sets."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from pactmw.core.encoding import b64url_decode, b64url_encode
from pactmw.core.errors import MalformedInput
from pactmw.core.jose import parse_compact, sign_compact, verify_signature
from pactmw.core.jwk import (
    MIN_RSA_BITS,
    KeySet,
    PrivateJWK,
    generate_private_jwk,
    import_private_jwk,
    import_public_jwk,
    parse_jwks,
    private_jwk_from_key,
    public_key_set,
    thumbprint,
)

ALL_ALGS = frozenset({"ES256", "RS256", "EdDSA"})

# RFC 7638 §3.1: the example RSA key (also RFC 7517 Appendix A.1) and its SHA-256 thumbprint.
RFC7638_KEY = {
    "kty": "RSA",
    "n": (
        "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_B"
        "JECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_F"
        "DW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4"
        "vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
    ),
    "e": "AQAB",
    "alg": "RS256",
    "kid": "2011-04-29",
}
RFC7638_THUMBPRINT = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
# The octets of the SHA-256 hash as RFC 7638 §3.1 prints them.
RFC7638_DIGEST = bytes(
    [55, 54, 203, 177, 120, 124, 184, 48, 156, 119, 238, 140, 55, 5, 197, 225, 111, 251,
     158, 133, 151, 21, 144, 31, 30, 76, 89, 177, 17, 130, 245, 123]
)  # fmt: skip

# Parafé fixtures (shared/reference/parafe-verifier.md §5).
PARAFE_VECTORS = [
    pytest.param(
        {
            "kty": "EC",
            "crv": "P-256",
            "x": "DP8JIkhK5mg_YYA4jDLvcYqC-qS6c5_ezkCJqavW18I",
            "y": "XRSk2SCjoMNl6JZN4fhXCkD2guvpTkGXeUoj7F6Xskc",
        },
        "363Q6wMkgayCrXhgC5d_aIrYsDAUpJbTZaO4twW3Abs",
        id="ec-p256-initiator",
    ),
    pytest.param(
        {"kty": "OKP", "crv": "Ed25519", "x": "bjfNZCFkDRwG_oSmAdEIah7EwSWE7U76hAKy0aJQD4I"},
        "RkHy1TuGaxUzpIof7aW7T-LRmBGATh8avnFo2bFsuJk",
        id="ed25519",
    ),
    pytest.param(
        {
            "kty": "EC",
            "crv": "P-256",
            "x": "_kBqK2YqP575ystt4dPPgS8KcmyUd32h00hRwh2UrUM",
            "y": "oWS9imHHTUvVFAezr71dJ8KzAGFl4ZRt3cYahRbzXy4",
        },
        "aSWWor4s_GVEzOXRVI7XqMcEzj5WYpGpzqoaORAmpPI",
        id="broker-ec-kid",
    ),
]


@pytest.fixture(scope="module")
def keys() -> dict[str, PrivateJWK]:
    return {alg: generate_private_jwk(alg, kid=f"k-{alg}") for alg in sorted(ALL_ALGS)}


def _ec_public(key: ec.EllipticCurvePrivateKey) -> dict[str, str]:
    size = (key.curve.key_size + 7) // 8
    nums = key.public_key().public_numbers()
    return {
        "kty": "EC",
        "x": b64url_encode(nums.x.to_bytes(size, "big")),
        "y": b64url_encode(nums.y.to_bytes(size, "big")),
    }


# -- thumbprints --------------------------------------------------------------------------------


def test_rfc7638_example_thumbprint() -> None:
    assert thumbprint(RFC7638_KEY) == RFC7638_THUMBPRINT
    assert b64url_decode(RFC7638_THUMBPRINT) == RFC7638_DIGEST
    # §3.1's canonical JSON input, hashed independently.
    canonical = '{"e":"AQAB","kty":"RSA","n":"' + RFC7638_KEY["n"] + '"}'
    assert hashlib.sha256(canonical.encode()).digest() == RFC7638_DIGEST
    imported = import_public_jwk(RFC7638_KEY)
    assert imported.thumbprint == RFC7638_THUMBPRINT
    assert imported.kid == "2011-04-29"
    assert imported.alg == "RS256"
    assert isinstance(imported.key, rsa.RSAPublicKey)
    assert imported.key.key_size == 2048


@pytest.mark.parametrize(("jwk", "expected"), PARAFE_VECTORS)
def test_parafe_thumbprint_vectors(jwk: dict[str, str], expected: str) -> None:
    assert thumbprint(jwk) == expected
    # The fixtures are real keys: they import, and the imported key carries the same thumbprint.
    assert import_public_jwk(jwk).thumbprint == expected


@pytest.mark.parametrize(("jwk", "expected"), PARAFE_VECTORS)
def test_thumbprint_ignores_member_order_and_optional_members(
    jwk: dict[str, str], expected: str
) -> None:
    shuffled = dict(reversed(list(jwk.items())))
    shuffled.update(kid="anything", use="sig", alg="ES256" if jwk["kty"] == "EC" else "EdDSA")
    assert thumbprint(shuffled) == expected


def test_thumbprint_refuses_missing_members_and_unknown_kty() -> None:
    with pytest.raises(MalformedInput):
        thumbprint({"kty": "EC", "crv": "P-256", "x": "AA"})
    with pytest.raises(MalformedInput):
        thumbprint({"kty": "oct", "k": "AAAA"})
    with pytest.raises(MalformedInput):
        thumbprint({"kty": "RSA", "n": 5, "e": "AQAB"})


def test_generated_kid_defaults_to_thumbprint(keys: dict[str, PrivateJWK]) -> None:
    for alg in ALL_ALGS:
        key = generate_private_jwk(alg)
        assert key.kid == key.public.thumbprint == thumbprint(key.public.to_dict())
    assert keys["ES256"].kid == "k-ES256"


# -- private JWK round trip ---------------------------------------------------------------------


@pytest.mark.parametrize("alg", sorted(ALL_ALGS))
def test_private_jwk_round_trip(keys: dict[str, PrivateJWK], alg: str) -> None:
    original = keys[alg]
    exported = original.to_dict()
    assert exported["alg"] == alg
    assert exported["kid"] == f"k-{alg}"
    assert "d" in exported
    for source in (exported, json.dumps(exported), json.dumps(exported).encode()):
        restored = import_private_jwk(source)
        assert restored.alg == alg
        assert restored.kid == original.kid
        assert restored.public.to_dict() == original.public.to_dict()
        assert restored.to_dict() == exported
        # The restored key signs what the original public key verifies, and the reverse.
        token = sign_compact({"sub": "x"}, restored)
        verify_signature(parse_compact(token, allowed_algs=ALL_ALGS), original.public)
        token = sign_compact({"sub": "y"}, original)
        verify_signature(parse_compact(token, allowed_algs=ALL_ALGS), restored.public)


def test_private_jwk_with_foreign_public_half_refused(keys: dict[str, PrivateJWK]) -> None:
    other = generate_private_jwk("ES256")
    mixed = keys["ES256"].to_dict() | {"x": other.public.to_dict()["x"]}
    with pytest.raises(MalformedInput):
        import_private_jwk(mixed)


def test_private_jwk_with_wrong_alg_refused(keys: dict[str, PrivateJWK]) -> None:
    with pytest.raises(MalformedInput):
        import_private_jwk(keys["ES256"].to_dict() | {"alg": "RS256"})


def test_public_key_set_publishes_public_members_only(keys: dict[str, PrivateJWK]) -> None:
    document = public_key_set(keys.values()).to_dict()
    assert len(document["keys"]) == 3
    for entry in document["keys"]:
        assert not {"d", "p", "q", "dp", "dq", "qi"} & set(entry)
    assert parse_jwks(document).to_dict() == document


def test_private_key_types_outside_the_profile_refused() -> None:
    with pytest.raises(MalformedInput):
        private_jwk_from_key(ec.generate_private_key(ec.SECP384R1()))
    with pytest.raises(MalformedInput):
        private_jwk_from_key(rsa.generate_private_key(public_exponent=65537, key_size=1024))
    with pytest.raises(MalformedInput):
        private_jwk_from_key(b"not a key")
    with pytest.raises(MalformedInput):
        generate_private_jwk("HS256")


# -- public import: what is refused ------------------------------------------------------------


@pytest.mark.parametrize("alg", sorted(ALL_ALGS))
def test_public_import_refuses_private_members(keys: dict[str, PrivateJWK], alg: str) -> None:
    with pytest.raises(MalformedInput, match="private"):
        import_public_jwk(keys[alg].to_dict())


@pytest.mark.parametrize("member", ["d", "p", "q", "dp", "dq", "qi", "oth", "k"])
def test_any_private_member_refuses_the_public_import(
    keys: dict[str, PrivateJWK], member: str
) -> None:
    jwk = keys["RS256"].public.to_dict() | {member: "AQAB"}
    with pytest.raises(MalformedInput, match="private"):
        import_public_jwk(jwk)


def test_parse_jwks_refuses_the_whole_set_when_one_key_is_private(
    keys: dict[str, PrivateJWK],
) -> None:
    good = [keys["ES256"].public.to_dict(), keys["RS256"].public.to_dict()]
    assert len(parse_jwks({"keys": good}).keys) == 2
    leaked = keys["EdDSA"].to_dict()
    with pytest.raises(MalformedInput, match="private"):
        parse_jwks({"keys": [*good, leaked]})
    with pytest.raises(MalformedInput, match="private"):
        parse_jwks(json.dumps({"keys": [leaked, *good]}))


def test_parse_jwks_skips_a_symmetric_key_and_keeps_the_others(
    keys: dict[str, PrivateJWK],
) -> None:
    # RFC 7517 §5: a key that cannot or must not be used is ignored; an `oct` key is never a
    # verification key here (its `k` is a shared secret), and it does not void the set.
    es = keys["ES256"].public.to_dict()
    for oct_key in (
        {"kty": "oct", "k": "c2VjcmV0"},
        {"kty": "oct", "k": "c2VjcmV0", "kid": "k-ES256"},
    ):
        for document in ({"keys": [oct_key, es]}, json.dumps({"keys": [es, oct_key]})):
            parsed = parse_jwks(document)
            assert [key.kid for key in parsed.keys] == ["k-ES256"]
            assert parsed.candidates("k-ES256", "ES256") == (keys["ES256"].public,)
    # A set whose only key is symmetric verifies nothing (it is not refused as a document).
    assert parse_jwks({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}).keys == ()


def test_weak_rsa_refused() -> None:
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024).public_key()
    nums = weak.public_numbers()
    jwk = {
        "kty": "RSA",
        "n": b64url_encode(nums.n.to_bytes(128, "big")),
        "e": b64url_encode(nums.e.to_bytes(3, "big")),
    }
    assert MIN_RSA_BITS == 2048
    with pytest.raises(MalformedInput, match="2048"):
        import_public_jwk(jwk)
    assert parse_jwks({"keys": [jwk]}).keys == ()


def test_ec_point_off_curve_refused(keys: dict[str, PrivateJWK]) -> None:
    jwk = keys["ES256"].public.to_dict()
    y = bytearray(b64url_decode(jwk["y"]))
    y[-1] ^= 0x01
    off_curve = jwk | {"y": b64url_encode(bytes(y))}
    with pytest.raises(MalformedInput, match="not on P-256"):
        import_public_jwk(off_curve)
    assert parse_jwks({"keys": [off_curve]}).keys == ()


def test_ec_coordinates_of_wrong_length_refused(keys: dict[str, PrivateJWK]) -> None:
    jwk = keys["ES256"].public.to_dict()
    for member in ("x", "y"):
        short = jwk | {member: b64url_encode(b64url_decode(jwk[member])[1:])}
        with pytest.raises(MalformedInput):
            import_public_jwk(short)
        padded = jwk | {member: b64url_encode(b"\x00" + b64url_decode(jwk[member]))}
        with pytest.raises(MalformedInput):
            import_public_jwk(padded)


def test_wrong_curve_refused(keys: dict[str, PrivateJWK]) -> None:
    p384 = _ec_public(ec.generate_private_key(ec.SECP384R1()))
    with pytest.raises(MalformedInput, match="P-256"):
        import_public_jwk(p384 | {"crv": "P-384"})
    # A P-384 point labelled P-256 fails the length check.
    with pytest.raises(MalformedInput):
        import_public_jwk(p384 | {"crv": "P-256"})
    with pytest.raises(MalformedInput):
        import_public_jwk(keys["ES256"].public.to_dict() | {"crv": "secp256k1"})
    okp = keys["EdDSA"].public.to_dict()
    for crv in ("X25519", "Ed448", "P-256"):
        with pytest.raises(MalformedInput):
            import_public_jwk(okp | {"crv": crv})
    with pytest.raises(MalformedInput):
        import_public_jwk({k: v for k, v in keys["ES256"].public.to_dict().items() if k != "crv"})


@pytest.mark.parametrize(
    ("alg", "wrong_alg"),
    [("ES256", "RS256"), ("RS256", "ES256"), ("EdDSA", "ES256"), ("ES256", "HS256")],
)
def test_jwk_alg_must_fit_kty(keys: dict[str, PrivateJWK], alg: str, wrong_alg: str) -> None:
    with pytest.raises(MalformedInput):
        import_public_jwk(keys[alg].public.to_dict() | {"alg": wrong_alg})


@pytest.mark.parametrize(
    "jwk",
    [
        None,
        [],
        "string",
        {},
        {"kty": "oct"},
        {"kty": "EC", "crv": "P-256", "x": "AA==", "y": "AA"},
        {"kty": "RSA", "n": "", "e": "AQAB"},
        {"kty": 1},
    ],
)
def test_malformed_public_jwks_refused(jwk: Any) -> None:
    with pytest.raises(MalformedInput):
        import_public_jwk(jwk)


def test_kid_and_alg_must_be_strings(keys: dict[str, PrivateJWK]) -> None:
    with pytest.raises(MalformedInput):
        import_public_jwk(keys["ES256"].public.to_dict() | {"kid": 7})
    with pytest.raises(MalformedInput):
        import_public_jwk(keys["ES256"].public.to_dict() | {"alg": ["ES256"]})


# -- key sets -----------------------------------------------------------------------------------


def test_parse_jwks_skips_encryption_keys_and_odd_keys(keys: dict[str, PrivateJWK]) -> None:
    es = keys["ES256"].public.to_dict()
    rs = keys["RS256"].public.to_dict()
    ed = keys["EdDSA"].public.to_dict()
    document = {
        "keys": [
            es | {"use": "sig"},
            rs | {"use": "enc", "kid": "enc-key"},
            ed,
            {"kty": "EC", "crv": "P-521", "x": "AA", "y": "AA"},
            {"kty": "unknown"},
            "not an object",
        ]
    }
    parsed = parse_jwks(document)
    assert [key.kid for key in parsed.keys] == ["k-ES256", "k-EdDSA"]
    assert not parsed.has_kid("enc-key")
    assert parsed.candidates("enc-key", "RS256") == ()


@pytest.mark.parametrize(
    ("key_ops", "kept"),
    [
        (["verify"], True),
        (["sign", "verify"], True),
        (["encrypt"], False),  # RFC 7517 §4.3: not for verifying
        (["sign"], False),
        ([], False),
        # jose applies `key_ops` only when it is an array; anything else is ignored.
        ("verify", True),
        ("encrypt", True),
        (None, True),
        ({"verify": True}, True),
    ],
)
def test_parse_jwks_reads_key_ops_only_when_it_is_an_array(
    keys: dict[str, PrivateJWK], key_ops: Any, kept: bool
) -> None:
    es = keys["ES256"].public.to_dict() | {"key_ops": key_ops}
    other = keys["EdDSA"].public.to_dict()
    parsed = parse_jwks({"keys": [es, other]})
    assert [key.kid for key in parsed.keys] == (["k-ES256", "k-EdDSA"] if kept else ["k-EdDSA"])


@pytest.mark.parametrize(
    "odd",
    [
        {"use": "enc"},
        {"use": 1},
        {"use": None},
        {"use": "SIG"},
        {"kid": 7},
        {"alg": ["ES256"]},
        {"alg": "RS256"},
        {"crv": "P-384"},
        {"kty": "EC-unknown"},
        {"use": "sig", "key_ops": ["encrypt"]},  # both present: both must allow verifying
    ],
)
def test_parse_jwks_skips_a_member_it_must_not_use_and_keeps_the_others(
    keys: dict[str, PrivateJWK], odd: dict[str, Any]
) -> None:
    es = keys["ES256"].public.to_dict()
    other = keys["EdDSA"].public.to_dict()
    parsed = parse_jwks({"keys": [es | odd, other]})
    assert [key.kid for key in parsed.keys] == ["k-EdDSA"]


@pytest.mark.parametrize("document", [None, [], {}, {"keys": {}}, {"keys": "x"}, "[]", b"{"])
def test_parse_jwks_refuses_documents_without_a_keys_array(document: Any) -> None:
    with pytest.raises(MalformedInput):
        parse_jwks(document)


def test_candidates_by_kid_and_alg(keys: dict[str, PrivateJWK]) -> None:
    es, rs, ed = (keys[a].public for a in ("ES256", "RS256", "EdDSA"))
    second_es = generate_private_jwk("ES256", kid="shared").public
    shared_rs = generate_private_jwk("RS256", kid="shared").public
    keyset = KeySet((es, rs, ed, second_es, shared_rs))

    assert keyset.candidates("k-ES256", "ES256") == (es,)
    assert keyset.candidates("k-RS256", "RS256") == (rs,)
    assert keyset.candidates("k-EdDSA", "EdDSA") == (ed,)
    # An RSA key is never a candidate for ES256, nor an EC key for RS256, whatever the kid.
    assert keyset.candidates("k-RS256", "ES256") == ()
    assert keyset.candidates("k-ES256", "RS256") == ()
    assert keyset.candidates("k-EdDSA", "ES256") == ()
    assert keyset.candidates("shared", "ES256") == (second_es,)
    assert keyset.candidates("shared", "RS256") == (shared_rs,)
    # Without a kid: every key that fits the alg, and only those.
    assert keyset.candidates(None, "ES256") == (es, second_es)
    assert keyset.candidates(None, "RS256") == (rs, shared_rs)
    assert keyset.candidates("missing", "ES256") == ()
    assert keyset.candidates(None, "HS256") == ()
    assert keyset.candidates(None, "none") == ()
    assert keyset.has_kid("shared")
    assert not keyset.has_kid("missing")


def test_key_without_alg_fits_only_its_key_type(keys: dict[str, PrivateJWK]) -> None:
    es_unrestricted = import_public_jwk({**keys["ES256"].public.members, "kid": "a"})
    assert es_unrestricted.alg is None
    assert es_unrestricted.fits("ES256")
    assert not es_unrestricted.fits("RS256")
    assert not es_unrestricted.fits("ES384")


def test_public_import_round_trips_key_material(keys: dict[str, PrivateJWK]) -> None:
    for alg in ALL_ALGS:
        public = keys[alg].public
        imported = import_public_jwk(public.to_dict())
        assert imported.to_dict() == public.to_dict()
        assert imported.thumbprint == public.thumbprint
        assert type(imported.key) is type(public.key)
