"""Pure delegation crypto: access tokens, receipts, `args_hash`, timestamps, signing keys."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat
from pathlib import Path
from typing import Any

import jwt
import pytest

from pactmw.core.http import challenge
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import KeySet, PrivateJWK, generate_private_jwk, public_key_set
from pactmw.protocols.delegation import (
    Action,
    Delegation,
    DelegationRejected,
    SigningKeys,
    args_hash,
    iso_timestamp,
    mint_access_token,
    mint_login_assertion,
    receipt_claims,
    sign_receipt,
    verify_access_token,
)
from tests.delegated.support import independent_hash, jws_claims, jws_header
from tests.support.keys import private_pem

INTERFACE = "https://provider.example/a2a/acme"
ISS = INTERFACE + "/oauth"
CLIENT = "https://pa.example"
NOW = 1_790_769_600  # 2026-09-30T12:00:00Z
CHALLENGE = 'Bearer realm="a2a", error="invalid_token"'

KEY = generate_private_jwk("ES256", kid="provider-1")
OTHER_KEY = generate_private_jwk("ES256", kid="provider-1")  # same kid, different key
KEYS = public_key_set([KEY])


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def mint(**overrides: Any) -> str:
    arguments: dict[str, Any] = {
        "key": KEY,
        "interface_url": INTERFACE,
        "account": "acct-42",
        "client_id": CLIENT,
        "scopes": ["orders:read", "orders:cancel", "orders:read"],
        "grant_id": "a2agrant_1",
        "now": NOW,
    }
    arguments.update(overrides)
    return mint_access_token(**arguments)


def claims(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "iss": ISS,
        "aud": INTERFACE,
        "sub": "acct-42",
        "client_id": CLIENT,
        "scope": "orders:read",
        "grant_id": "a2agrant_1",
        "iat": NOW,
        "exp": NOW + 3600,
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def verify(
    token: str, *, now: float = NOW + 1, client_id: str = CLIENT, keys: KeySet = KEYS
) -> Delegation:
    return verify_access_token(
        "Bearer " + token, keys=keys, interface_url=INTERFACE, client_id=client_id, now=now
    )


def refused(reason: str, header: str | None) -> DelegationRejected:
    with pytest.raises(DelegationRejected) as caught:
        verify_access_token(
            header, keys=KEYS, interface_url=INTERFACE, client_id=CLIENT, now=NOW + 1
        )
    exc = caught.value
    assert exc.reason == reason, (exc.reason, exc)
    assert exc.www_authenticate == CHALLENGE
    answer = challenge(exc)
    assert answer.status == 401
    assert dict(answer.headers)["WWW-Authenticate"] == CHALLENGE
    assert answer.body == b""
    return exc


# -- access tokens --------------------------------------------------------------------------------


def test_access_token_round_trip() -> None:
    token = mint()
    header = jws_header(token)
    assert header == {"alg": "ES256", "typ": "at+jwt", "kid": "provider-1"}
    assert jws_claims(token) == {
        "iss": ISS,
        "aud": INTERFACE,
        "sub": "acct-42",
        "client_id": CLIENT,
        "scope": "orders:cancel orders:read",
        "grant_id": "a2agrant_1",
        "iat": NOW,
        "exp": NOW + 3600,
    }
    # An independent verifier agrees (PyJWT, with the public key only).
    decoded = jwt.decode(
        token,
        jwt.PyJWK(KEY.public.to_dict()).key,
        algorithms=["ES256"],
        audience=INTERFACE,
        issuer=ISS,
        options={"verify_exp": False},
    )
    assert decoded["sub"] == "acct-42"

    delegation = verify(token)
    assert isinstance(delegation, Delegation)
    assert delegation.account == "acct-42"
    assert delegation.scopes == frozenset({"orders:read", "orders:cancel"})
    assert delegation.grant_id == "a2agrant_1"
    assert delegation.client_id == CLIENT
    assert delegation.has("orders:read")
    assert not delegation.has("orders:refund")
    assert delegation.claims["iss"] == ISS


def test_access_token_lifetime_is_at_most_an_hour() -> None:
    assert jws_claims(mint(lifetime=60))["exp"] == NOW + 60
    for lifetime in (0, -1, 3601):
        with pytest.raises(ValueError, match="one hour"):
            mint(lifetime=lifetime)


def test_rs256_tokens_verify_too() -> None:
    rsa = generate_private_jwk("RS256", kid="rsa-1")
    token = mint(key=rsa)
    assert jws_header(token)["alg"] == "RS256"
    assert verify(token, keys=public_key_set([rsa])).account == "acct-42"


def test_expiry_has_no_leeway() -> None:
    token = mint()
    assert verify(token, now=NOW + 3599.999).account == "acct-42"
    for now in (NOW + 3600, NOW + 3600.001, NOW + 4000):
        with pytest.raises(DelegationRejected) as caught:
            verify(token, now=now)
        assert caught.value.reason == "expired"


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        pytest.param(sign_compact(claims(), KEY, typ="JWT"), "bad_typ", id="typ-JWT"),
        pytest.param(sign_compact(claims(), KEY), "bad_typ", id="typ-missing"),
        pytest.param(
            sign_compact(claims(), KEY, typ="pact-receipt+jws"), "bad_typ", id="typ-receipt"
        ),
        pytest.param(
            sign_compact(claims(iss="https://provider.example/a2a/other/oauth"), KEY, typ="at+jwt"),
            "bad_issuer",
            id="iss-other-brand",
        ),
        pytest.param(
            sign_compact(claims(iss=INTERFACE), KEY, typ="at+jwt"), "bad_issuer", id="iss-no-oauth"
        ),
        pytest.param(
            sign_compact(claims(aud=ISS), KEY, typ="at+jwt"), "bad_audience", id="aud-issuer"
        ),
        pytest.param(
            sign_compact(claims(aud=[INTERFACE]), KEY, typ="at+jwt"),
            "bad_audience",
            id="aud-array",
        ),
        pytest.param(
            sign_compact(claims(aud="https://provider.example/a2a/other"), KEY, typ="at+jwt"),
            "bad_audience",
            id="aud-other-brand",
        ),
        pytest.param(
            sign_compact(claims(client_id="https://other-pa.example"), KEY, typ="at+jwt"),
            "wrong_client",
            id="client-id-mismatch",
        ),
        pytest.param(
            sign_compact(claims(client_id=None), KEY, typ="at+jwt"),
            "wrong_client",
            id="client-id-missing",
        ),
        pytest.param(
            sign_compact(claims(exp=NOW), KEY, typ="at+jwt"), "expired", id="expired-earlier"
        ),
        pytest.param(
            sign_compact(claims(sub=None), KEY, typ="at+jwt"), "bad_claims", id="sub-missing"
        ),
        pytest.param(sign_compact(claims(sub=""), KEY, typ="at+jwt"), "bad_claims", id="sub-empty"),
        pytest.param(
            sign_compact(claims(grant_id=None), KEY, typ="at+jwt"), "bad_claims", id="no-grant"
        ),
        pytest.param(
            sign_compact(claims(scope=["orders:read"]), KEY, typ="at+jwt"),
            "bad_claims",
            id="scope-array",
        ),
        pytest.param(
            sign_compact(claims(exp=float(NOW + 3600)), KEY, typ="at+jwt"),
            "bad_claims",
            id="exp-float",
        ),
        pytest.param(
            sign_compact(claims(exp=True), KEY, typ="at+jwt"), "bad_claims", id="exp-bool"
        ),
        pytest.param(
            sign_compact(claims(iat=None), KEY, typ="at+jwt"), "bad_claims", id="iat-missing"
        ),
        pytest.param(
            sign_compact(claims(), OTHER_KEY, typ="at+jwt"), "bad_signature", id="other-key"
        ),
        pytest.param(
            sign_compact(claims(), generate_private_jwk("ES256", kid="unknown"), typ="at+jwt"),
            "bad_signature",
            id="unknown-kid",
        ),
        pytest.param(
            sign_compact(claims(), generate_private_jwk("EdDSA", kid="provider-1"), typ="at+jwt"),
            "malformed_token",
            id="EdDSA",
        ),
    ],
)
def test_every_refusal_is_invalid_token_with_a_stable_reason(token: str, reason: str) -> None:
    refused(reason, "Bearer " + token)


def test_hs256_keyed_with_the_public_key_is_refused() -> None:
    header = b64url(json.dumps({"alg": "HS256", "typ": "at+jwt", "kid": "provider-1"}).encode())
    payload = b64url(json.dumps(claims()).encode())
    secret = json.dumps(KEY.public.to_dict()).encode()
    mac = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    refused("malformed_token", f"Bearer {header}.{payload}.{b64url(mac)}")


@pytest.mark.parametrize("signature", ["", "AAAA"])
def test_alg_none_is_refused(signature: str) -> None:
    header = b64url(json.dumps({"alg": "none", "typ": "at+jwt"}).encode())
    payload = b64url(json.dumps(claims()).encode())
    refused("malformed_token", f"Bearer {header}.{payload}.{signature}")


def test_tampered_tokens_are_refused() -> None:
    header, payload, signature = mint().split(".")
    # Another account in the payload, the original signature.
    forged = b64url(json.dumps({**jws_claims(mint()), "sub": "acct-admin"}).encode())
    refused("bad_signature", f"Bearer {header}.{forged}.{signature}")
    # One flipped bit in the first signature byte.
    raw = bytearray(base64.urlsafe_b64decode(signature + "=="))
    raw[0] ^= 0x01
    refused("bad_signature", f"Bearer {header}.{payload}.{b64url(bytes(raw))}")
    # A truncated signature (63 bytes).
    refused("bad_signature", f"Bearer {header}.{payload}.{b64url(bytes(raw[:63]))}")
    # A swapped header: same claims and signature, typ changed to what is expected elsewhere.
    other_header = b64url(json.dumps({**jws_header(mint()), "kid": "x"}).encode())
    refused("bad_signature", f"Bearer {other_header}.{payload}.{signature}")


@pytest.mark.parametrize(
    "header",
    [None, "", "Bearer", "Basic abc", "Bearer a b", "bearer"],
)
def test_malformed_headers_are_refused(header: str | None) -> None:
    refused("malformed_header", header)


@pytest.mark.parametrize("token", ["abc", "a.b", "a.b.c.d", "e30.e30.", "!!.e30.AAAA"])
def test_malformed_tokens_are_refused(token: str) -> None:
    refused("malformed_token", "Bearer " + token)


def test_scheme_is_case_insensitive() -> None:
    delegation = verify_access_token(
        "bearer " + mint(), keys=KEYS, interface_url=INTERFACE, client_id=CLIENT, now=NOW
    )
    assert delegation.account == "acct-42"


# -- args_hash and timestamps ---------------------------------------------------------------------


def test_args_hash_known_answers() -> None:
    # Derived outside Python: printf '%s' '{"confirmation":"K7PQ2M","flight":"SK 318"}' |
    #   openssl dgst -sha256 -binary | base64 | tr '+/' '-_' | tr -d '='
    rebook = {"confirmation": "K7PQ2M", "flight": "SK 318"}
    assert args_hash(rebook) == "gwUdMh3DfSHn_8MOjK0SMa9SuIMrwiFJ6nO0tqVSPI8"
    # Insertion order matters (JSON.stringify, not JCS): the swapped object hashes differently.
    swapped = {"flight": "SK 318", "confirmation": "K7PQ2M"}
    assert args_hash(swapped) == "EeEqnlGRsF_7bC52pexofZbVsWc54uU0Rwe8jHNPU9g"
    # Non-ASCII stays UTF-8 (no \u escapes), also computed with openssl over the raw bytes.
    assert args_hash({"name": "Zoë", "city": "Zürich"}) == (
        "qpFE8UaR21QiiylrPkZmRtGUyPC4hs-OagRZ4DFPow0"
    )


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"confirmation": "K7PQ2M", "flight": "SK 318"},
        {"z": 1, "a": [1, 2.5, None, True], "m": {"y": "ü", "b": "日本"}},
        {"emoji": "🙂", "quote": 'say "hi"\n', "slash": "a/b"},
    ],
)
def test_args_hash_matches_an_independent_computation(arguments: dict[str, Any]) -> None:
    digest = args_hash(arguments)
    assert digest == independent_hash(arguments)
    assert len(digest) == 43
    assert "=" not in digest
    assert "+" not in digest
    assert "/" not in digest


def test_args_hash_is_not_ascii_escaped_or_sorted() -> None:
    arguments = {"b": "é", "a": 1}
    escaped = b64url(hashlib.sha256(json.dumps(arguments, separators=(",", ":")).encode()).digest())
    sorted_keys = independent_hash(dict(sorted(arguments.items())))
    assert args_hash(arguments) not in (escaped, sorted_keys)


@pytest.mark.parametrize(
    ("now", "text"),
    [
        (NOW + 0.123, "2026-09-30T12:00:00.123Z"),
        (NOW, "2026-09-30T12:00:00.000Z"),
        (NOW + 0.001, "2026-09-30T12:00:00.001Z"),
        (NOW + 0.999, "2026-09-30T12:00:00.999Z"),
        (0, "1970-01-01T00:00:00.000Z"),
        (951_782_400.5, "2000-02-29T00:00:00.500Z"),
    ],
)
def test_iso_timestamp_is_javascript_to_iso_string(now: float, text: str) -> None:
    assert iso_timestamp(now) == text


# -- receipts -------------------------------------------------------------------------------------


def test_receipt_claims_order_and_signature() -> None:
    delegation = verify(mint())
    actions = [
        Action(tool="list_orders"),
        Action(tool="cancel_order", args_hash=args_hash({"order": "A-1"})),
    ]
    claims_ = receipt_claims(
        delegation=delegation,
        interface_url=INTERFACE,
        scopes_used=["orders:read", "orders:cancel"],
        actions=actions,
        now=NOW + 0.123,
    )
    assert list(claims_) == ["grantId", "user", "pa", "brand", "scopesUsed", "actions", "ts"]
    assert claims_ == {
        "grantId": "a2agrant_1",
        "user": "acct-42",
        "pa": CLIENT,
        "brand": INTERFACE,
        "scopesUsed": ["orders:read", "orders:cancel"],
        "actions": [
            {"tool": "list_orders"},
            {"tool": "cancel_order", "argsHash": args_hash({"order": "A-1"})},
        ],
        "ts": "2026-09-30T12:00:00.123Z",
    }
    receipt = sign_receipt(claims_, KEY)
    assert list(receipt) == ["jws", "claims"]
    assert receipt["claims"] == claims_
    segments = receipt["jws"].split(".")
    assert len(segments) == 3
    assert all(segments)
    assert jws_header(receipt["jws"]) == {
        "alg": "ES256",
        "typ": "pact-receipt+jws",
        "kid": "provider-1",
    }
    payload = jwt.api_jws.PyJWS().decode(
        receipt["jws"], jwt.PyJWK(KEY.public.to_dict()).key, algorithms=["ES256"]
    )
    # The signed bytes are the compact UTF-8 JSON of the claims, in the reference's order.
    assert payload == json.dumps(claims_, separators=(",", ":"), ensure_ascii=False).encode()
    assert list(json.loads(payload)) == list(claims_)
    assert json.loads(payload) == receipt["claims"]


def test_receipt_actions_carry_args_hash_only_for_writes() -> None:
    assert Action(tool="list_orders").to_claim() == {"tool": "list_orders"}
    assert Action(tool="cancel", args_hash="x").to_claim() == {"tool": "cancel", "argsHash": "x"}


# -- signing keys ---------------------------------------------------------------------------------


def test_the_newest_key_signs_and_all_are_published() -> None:
    old = generate_private_jwk("ES256", kid="old")
    rsa = generate_private_jwk("RS256", kid="rsa")
    new = generate_private_jwk("ES256", kid="new")
    keys = SigningKeys((old, rsa, new))
    assert keys.signer is new
    document = keys.jwks()
    assert [entry["kid"] for entry in document["keys"]] == ["old", "rsa", "new"]
    for entry in document["keys"]:
        assert entry["use"] == "sig"
        assert entry["alg"] in ("ES256", "RS256")
        assert not {"d", "p", "q", "dp", "dq", "qi"} & set(entry)
    assert [k.kid for k in keys.public.keys] == ["old", "rsa", "new"]
    # A token the retired key signed still verifies against the published set.
    assert verify(mint(key=old), keys=keys.public).account == "acct-42"
    assert jws_header(mint(key=keys.signer))["kid"] == "new"


def test_signing_keys_refuse_no_keys_and_other_algorithms() -> None:
    with pytest.raises(ValueError, match="at least one"):
        SigningKeys(())
    with pytest.raises(ValueError, match="ES256 or RS256"):
        SigningKeys((generate_private_jwk("EdDSA"),))


def test_development_key_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    folder = tmp_path / "data" / "keys"
    first = SigningKeys.development(folder)
    files = list(folder.iterdir())
    assert [f.name for f in files] == ["provider-signing-key-es256.jwk"]
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    content = files[0].read_bytes()
    assert json.loads(content)["d"]
    second = SigningKeys.development(folder)
    assert files[0].read_bytes() == content
    assert second.signer.public.to_dict() == first.signer.public.to_dict()
    assert second.signer.kid == first.signer.kid
    # Tokens signed before a restart still verify after it.
    assert verify(mint(key=first.signer), keys=second.public).account == "acct-42"
    rsa = SigningKeys.development(folder, alg="RS256")
    assert rsa.signer.alg == "RS256"
    assert sorted(f.name for f in folder.iterdir()) == [
        "provider-signing-key-es256.jwk",
        "provider-signing-key-rs256.jwk",
    ]


def test_development_key_is_0600_even_with_an_open_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        SigningKeys.development(tmp_path)
    finally:
        os.umask(previous)
    (path,) = tmp_path.iterdir()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def pem(key: PrivateJWK, traditional: bool = False) -> bytes:
    return private_pem(key.key, traditional=traditional)


def test_from_files_reads_jwk_and_pem(tmp_path: Path) -> None:
    jwk_key = generate_private_jwk("ES256", kid="jwk-key")
    pem_key = generate_private_jwk("ES256")
    rsa_key = generate_private_jwk("RS256")
    (tmp_path / "a.jwk").write_text(json.dumps(jwk_key.to_dict()))
    (tmp_path / "b.pem").write_bytes(pem(pem_key))
    (tmp_path / "c.json").write_text("\n  " + json.dumps(rsa_key.to_dict()))
    (tmp_path / "d.key").write_bytes(pem(pem_key, traditional=True))
    keys = SigningKeys.from_files(
        [tmp_path / "a.jwk", str(tmp_path / "b.pem"), tmp_path / "c.json", tmp_path / "d.key"]
    )
    assert [k.public.to_dict() for k in keys.keys] == [
        jwk_key.public.to_dict(),
        pem_key.public.to_dict(),
        rsa_key.public.to_dict(),
        pem_key.public.to_dict(),
    ]
    assert keys.keys[0].kid == "jwk-key"
    # A PEM key's kid is its RFC 7638 thumbprint.
    assert keys.keys[1].kid == pem_key.public.thumbprint
    assert keys.signer.kid == pem_key.public.thumbprint
    assert verify(mint(key=keys.signer), keys=public_key_set([pem_key])).account == "acct-42"


@pytest.mark.parametrize(
    "content", [b"not a key", b"{}", b'{"kty":"EC"}', b"-----BEGIN PRIVATE KEY-----\nxx\n"]
)
def test_from_files_names_the_bad_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.key"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"broken\.key"):
        SigningKeys.from_files([path])


@pytest.mark.parametrize("published", ["jwks", "public jwk"])
def test_a_public_key_file_for_a_signing_key_says_so(tmp_path: Path, published: str) -> None:
    # `pactmw keygen --out key.jwk --jwks jwks.json` writes both side by side: naming the
    # published one says what it is, not that a JWK member is missing.
    key = generate_private_jwk("ES256")
    public = key.public.to_dict()
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [public]} if published == "jwks" else public))
    with pytest.raises(ValueError) as refused:
        SigningKeys.from_files([path])
    said = str(refused.value)
    assert said.startswith(f"{path}: "), said
    what = "a JWK Set (public keys)" if published == "jwks" else "a public JWK"
    assert f"is {what}, not a private key" in said, said


@pytest.mark.parametrize("pasted", ["jwk", "pem"])
def test_a_key_pasted_for_its_path_is_refused_without_showing_it(pasted: str) -> None:
    key = generate_private_jwk("ES256")
    secret = json.dumps(key.to_dict()) if pasted == "jwk" else pem(key).decode()
    with pytest.raises(ValueError) as refused:
        SigningKeys.from_files([secret])
    assert "not its file's path" in str(refused.value)
    assert key.to_dict()["d"] not in str(refused.value)
    assert "PRIVATE" not in str(refused.value)


# -- the Brand login assertion ---------------------------------------------------------------------


def test_mint_login_assertion_claims() -> None:
    brand = generate_private_jwk("ES256", kid="brand-1")
    consent = "https://provider.example/a2a/acme/oauth/consent"
    token = mint_login_assertion(
        key=brand,
        brand_issuer="https://brand.example",
        consent_url=consent + "?user_code=BCDF-GHJK",
        account="sky-4471",
        user_code="BCDF-GHJK",
        email="alex@example.com",
        now=NOW,
    )
    assert jws_header(token) == {"alg": "ES256", "typ": "JWT", "kid": "brand-1"}
    found = jws_claims(token)
    jti = found.pop("jti")
    assert found == {
        "iss": "https://brand.example",
        "aud": consent,
        "sub": "sky-4471",
        "user_code": "BCDF-GHJK",
        "iat": NOW,
        "exp": NOW + 120,
        "email": "alex@example.com",
    }
    assert len(jti) == 22
    assert base64.urlsafe_b64decode(jti + "==")
    plain = mint_login_assertion(
        key=brand,
        brand_issuer="https://brand.example",
        consent_url=consent,
        account="sky-4471",
        user_code="BCDF-GHJK",
        now=NOW,
        lifetime=60,
    )
    second = jws_claims(plain)
    assert "email" not in second
    assert second["exp"] == NOW + 60
    assert second["jti"] != jti
    decoded = jwt.decode(
        plain,
        jwt.PyJWK(brand.public.to_dict()).key,
        algorithms=["ES256"],
        audience=consent,
        issuer="https://brand.example",
        options={"verify_exp": False, "verify_iat": False},
    )
    assert decoded["sub"] == "sky-4471"


def test_development_keys_are_created_once_by_concurrent_processes(tmp_path: Path) -> None:
    """Several workers starting on an empty data_dir all end up with the same key."""
    import subprocess
    import sys

    code = (
        "import sys, json\n"
        "from pactmw.protocols.delegation import SigningKeys\n"
        "keys = SigningKeys.development(sys.argv[1])\n"
        "print(keys.signer.kid)\n"
    )
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path / "keys")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    results = [worker.communicate(timeout=60) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), results
    assert len({out.strip() for out, _ in results}) == 1
    assert [p.name for p in (tmp_path / "keys").iterdir()] == ["provider-signing-key-es256.jwk"]
