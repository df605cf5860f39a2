"""`AgentSigner`: the PACT §3.2 JWT it signs, the keys it loads, the JWKS it publishes.

Tokens are checked with PyJWT (an independent implementation) and with pactmw's own verifier.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import jwt
import pytest

from pactmw.client import AgentSigner, serve_jwks
from pactmw.core.jwk import generate_private_jwk, parse_jwks
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from tests.support.keys import generate_key, private_pem
from tests.support.parties import ISSUER


def decode(token: str, jwks: dict[str, Any], aud: str = "aud-1") -> tuple[dict[str, Any], Any]:
    header = jwt.get_unverified_header(token)
    key = jwt.PyJWKSet.from_dict(jwks)[header["kid"]]
    claims = jwt.decode(token, key.key, algorithms=["ES256", "RS256"], audience=aud)
    return header, claims


@pytest.mark.parametrize("alg", ["ES256", "RS256"])
def test_sign_makes_a_pact_jwt(alg: str) -> None:
    signer = AgentSigner.generate(issuer=ISSUER, alg=alg, kid="k-1")
    header, claims = decode(signer.sign("user-1", "aud-1"), signer.public_jwks())
    assert header == {"alg": alg, "kid": "k-1", "typ": "JWT"}
    assert set(claims) == {"iss", "sub", "aud", "iat", "exp", "jti"}
    assert (claims["iss"], claims["sub"], claims["aud"]) == (ISSUER, "user-1", "aud-1")
    assert claims["exp"] - claims["iat"] == 120
    assert uuid.UUID(claims["jti"])
    other = decode(signer.sign("user-1", "aud-1", ttl=300), signer.public_jwks())[1]
    assert other["exp"] - other["iat"] == 300
    assert other["jti"] != claims["jti"]


def test_pactmw_verifier_accepts_it() -> None:
    signer = AgentSigner.generate(issuer=ISSUER, kid="k-1")
    registry = AgentRegistry(
        [RegisteredAgent(issuer=ISSUER, jwks=parse_jwks(signer.public_jwks()))]
    )
    verifier = IdentityVerifier(audience="aud-1", registry=registry)
    agent = verifier.verify("Bearer " + signer.for_user("user-1", "aud-1")())
    assert (agent.issuer, agent.sub) == (ISSUER, "user-1")


@pytest.mark.parametrize("ttl", [0, -1, 301, 3600, 1.5, True])
def test_ttl_is_bounded(ttl: Any) -> None:
    signer = AgentSigner.generate(issuer=ISSUER)
    with pytest.raises(ValueError, match="ttl"):
        signer.sign("user-1", "aud-1", ttl=ttl)


def test_injected_clock() -> None:
    key = generate_private_jwk("ES256", kid="k")
    signer = AgentSigner(issuer=ISSUER, key=key, clock=lambda: 1_700_000_000.9)
    claims = jwt.decode(signer.sign("u", "a"), options={"verify_signature": False})
    assert (claims["iat"], claims["exp"]) == (1_700_000_000, 1_700_000_120)


def test_from_jwk_and_pem() -> None:
    original = generate_private_jwk("ES256", kid="from-jwk")
    from_jwk = AgentSigner.from_jwk(json.dumps(original.to_dict()), issuer=ISSUER)
    assert from_jwk.kid == "from-jwk"
    renamed = AgentSigner.from_jwk(original.to_dict(), issuer=ISSUER, kid="renamed")
    assert renamed.kid == "renamed"
    assert renamed.public_jwks()["keys"][0]["kid"] == "renamed"
    without_kid = {k: v for k, v in original.to_dict().items() if k != "kid"}
    thumb = AgentSigner.from_jwk(without_kid, issuer=ISSUER)
    assert thumb.kid == original.public.thumbprint

    pem = private_pem(generate_key("ES256")).decode()
    from_pem = AgentSigner.from_pem(pem, issuer=ISSUER, kid="pem-1")
    header, _ = decode(from_pem.sign("u", "aud-1"), from_pem.public_jwks())
    assert header["kid"] == "pem-1"


def test_from_jwk_takes_the_key_generate_private_jwk_returns() -> None:
    """docs/client.md hands `generate_private_jwk(...)` to the broker; the signer takes it too."""
    original = generate_private_jwk("ES256", kid="generated")
    signer = AgentSigner.from_jwk(original, issuer=ISSUER)
    assert signer.key == original
    assert AgentSigner.from_jwk(original, issuer=ISSUER, kid="other").kid == "other"


def test_refuses_unusable_keys() -> None:
    with pytest.raises(ValueError, match="ES256 or RS256"):
        AgentSigner(issuer=ISSUER, key=generate_private_jwk("EdDSA", kid="e"))
    with pytest.raises(ValueError, match="JWK"):
        AgentSigner.from_jwk({"kty": "oct", "k": "c2VjcmV0"}, issuer=ISSUER)
    with pytest.raises(ValueError):
        AgentSigner.from_pem(b"not a key", issuer=ISSUER)
    with pytest.raises(ValueError, match="issuer"):
        AgentSigner.generate(issuer="")


def test_from_file_and_write_jwks(tmp_path: Path) -> None:
    key = generate_private_jwk("RS256", kid="file-1")
    (tmp_path / "key.jwk").write_text(json.dumps(key.to_dict()))
    signer = AgentSigner.from_file(tmp_path / "key.jwk", issuer=ISSUER)
    with pytest.raises(FileNotFoundError) as missing:
        signer.write_jwks(tmp_path / "public" / "jwks.json")
    assert missing.value.filename == str(tmp_path / "public" / "jwks.json")
    assert not (tmp_path / "public").exists()  # no folder made without parents=True
    written = signer.write_jwks(tmp_path / "public" / "jwks.json", parents=True)
    document = json.loads(written.read_text())
    assert document == signer.public_jwks()
    assert "d" not in document["keys"][0]
    assert document["keys"][0]["use"] == "sig"
    decode(signer.sign("u", "aud-1"), document)


def test_serve_jwks() -> None:
    old = AgentSigner.generate(issuer=ISSUER, kid="old")
    new = AgentSigner.generate(issuer=ISSUER, kid="new")
    with old.serve_jwks() as host:
        with urllib.request.urlopen(host.url, timeout=5) as response:
            assert response.headers["Content-Type"] == "application/json"
            assert json.load(response) == old.public_jwks()
        host.update({"keys": []})
        with urllib.request.urlopen(host.url, timeout=5) as response:
            assert json.load(response) == {"keys": []}
    with serve_jwks([old, new], path="keys.json") as host:
        assert host.url.endswith("/keys.json")
        with urllib.request.urlopen(host.url, timeout=5) as response:
            assert [k["kid"] for k in json.load(response)["keys"]] == ["old", "new"]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b'{"kty": "oct", "k": "c2VjcmV0LWtleS1tYXRlcmlhbA"}', "JWK"),
        (b'{"kty": "EC", "crv": "P-256", "x": "AA", "d": "c2VjcmV0LWtleS1tYXRlcmlhbA"}', "JWK"),
        (b'{"keys": []}', "JWKS"),
        (b"-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA\n", "PEM"),
        (b"", "PEM"),
    ],
)
def test_a_bad_key_file_is_named_in_the_error(tmp_path: Path, content: bytes, said: str) -> None:
    """The error says which file holds the bad key (a platform loads several), and never
    what is in it."""
    path = tmp_path / "agent.key"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=said) as caught:
        AgentSigner.from_file(path, issuer=ISSUER)
    assert str(caught.value).startswith(f"{path}: ")
    assert "c2VjcmV0" not in str(caught.value)
