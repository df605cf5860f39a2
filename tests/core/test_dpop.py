"""RFC 9449 DPoP proofs: the RFC's own vectors, each `security.dpop-*` / `security.token-dpop-*`
mutation of Poppy's conformance ledger, htu normalisation, and replay across processes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pactmw.core.dpop import (
    USE_DPOP_NONCE,
    DpopError,
    DpopProof,
    access_token_hash,
    aspend_dpop_proof,
    check_dpop_proof,
    normalize_htu,
    spend_dpop_proof,
)
from pactmw.core.errors import MalformedInput
from pactmw.core.jwk import generate_private_jwk, thumbprint
from pactmw.core.replay import MemoryReplayMemory, StoreReplayMemory
from pactmw.store import SqliteStore
from tests.support.dpop import MISSING, dpop_proof

# RFC 9449 §4.1, Figure 4: a proof for a token request, and §6.1's `jkt` of its key.
RFC_PROOF = (
    "eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7Imt0eSI6IkVDIiwieCI6Imw4dEZyaHgtMzR0Vj"
    "NoUklDUkRZOXpDa0RscEJoRjQyVVFVZldWQVdCRnMiLCJ5IjoiOVZFNGpmX09rX282NHpiVFRsY3VOSmFqSG10NnY5"
    "VERWclUwQ2R2R1JEQSIsImNydiI6IlAtMjU2In19.eyJqdGkiOiItQndDM0VTYzZhY2MybFRjIiwiaHRtIjoiUE9TVC"
    "IsImh0dSI6Imh0dHBzOi8vc2VydmVyLmV4YW1wbGUuY29tL3Rva2VuIiwiaWF0IjoxNTYyMjYyNjE2fQ.2-GxA6T8lP"
    "4vfrg8v-FdWP0A0zdrj8igiMLvqRMUvwnQg4PtFLbdLXiOSsX0x7NVY-FNyJK70nfbV37xRZT3Lg"
)
RFC_IAT = 1562262616
RFC_JKT = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"
# RFC 9449 §7.1, Figures 12-13: an access token and its `ath`.
RFC_TOKEN = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
RFC_ATH = "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"

NOW = 1_800_000_000.0
KEY = generate_private_jwk("ES256")
OTHER = generate_private_jwk("ES256")
TOKEN_URL = "https://shop.example/poppy/token"
API_URL = "https://api.example/api/orders"
SESSION_TOKEN = "sat_" + "x" * 40


def refused(reason: str, proof: Any, **request: Any) -> DpopError:
    options: dict[str, Any] = {"method": "GET", "url": API_URL, "now": NOW}
    options.update(request)
    with pytest.raises(DpopError) as caught:
        check_dpop_proof(proof, **options)
    assert caught.value.reason == reason
    return caught.value


def resource_proof(**changes: Any) -> str:
    return dpop_proof(KEY, "GET", API_URL, NOW, access_token=SESSION_TOKEN, **changes)


def at_resource(proof: Any, reason: str) -> None:
    err = refused(reason, proof, access_token=SESSION_TOKEN, jkt=KEY_JKT)
    assert err.error == "invalid_dpop_proof"


KEY_JKT = thumbprint(dict(KEY.to_dict()))


# -- the RFC's vectors --------------------------------------------------------------------


def test_rfc9449_figure4_proof_verifies_and_its_thumbprint_is_figure_jkt() -> None:
    proof = check_dpop_proof(
        RFC_PROOF, method="POST", url="https://server.example.com/token", now=RFC_IAT
    )
    assert proof.jti == "-BwC3ESc6acc2lTc"
    assert proof.htm == "POST"
    assert proof.iat == RFC_IAT
    assert proof.thumbprint == RFC_JKT
    check_dpop_proof(
        RFC_PROOF, method="POST", url="https://server.example.com/token", now=RFC_IAT, jkt=RFC_JKT
    )


def test_rfc9449_access_token_hash() -> None:
    assert access_token_hash(RFC_TOKEN) == RFC_ATH


def test_rfc9449_proof_is_refused_outside_its_window() -> None:
    refused("iat", RFC_PROOF, method="POST", url="https://server.example.com/token", now=NOW)


def test_a_good_resource_proof() -> None:
    proof = check_dpop_proof(
        resource_proof(),
        method="GET",
        url=API_URL,
        now=NOW,
        access_token=SESSION_TOKEN,
        jkt=KEY_JKT,
    )
    assert proof.thumbprint == KEY_JKT
    assert proof.replay_expires_at == NOW + 60


# -- the ledger's mutations (fixtures/conformance/security.json) --------------------------


def test_security_dpop_alg_none() -> None:
    at_resource(resource_proof(header={"alg": "none"}), "alg")


def test_security_dpop_wrong_signature() -> None:
    proof = resource_proof()
    head, body, signature = proof.split(".")
    tampered = signature[:-2] + ("AA" if signature[-2:] != "AA" else "BA")
    at_resource(f"{head}.{body}.{tampered}", "signature")


def test_security_dpop_other_key() -> None:
    # A well-made proof by another key: it verifies, but the token is bound to KEY.
    at_resource(dpop_proof(OTHER, "GET", API_URL, NOW, access_token=SESSION_TOKEN), "jkt")


def test_security_dpop_method_mismatch() -> None:
    at_resource(resource_proof(claims={"htm": "POST"}), "htm")


@pytest.mark.parametrize("htm", ["get", "Get", "GET ", " GET", "GET\x00", ["GET"]])
def test_htm_is_the_method_exactly(htm: Any) -> None:
    # HTTP methods are case-sensitive (RFC 9110 §9.1): a proof for `get` is no proof for GET.
    reason = "htm" if isinstance(htm, str) else "claims"
    at_resource(resource_proof(claims={"htm": htm}), reason)


def test_security_dpop_url_mismatch() -> None:
    at_resource(resource_proof(claims={"htu": "https://elsewhere.example/api/orders"}), "htu")


def test_security_dpop_stale() -> None:
    at_resource(resource_proof(claims={"iat": NOW - 300}), "iat")


def test_security_dpop_header_twice() -> None:
    one, two = resource_proof(), resource_proof()
    at_resource([one, two], "header")
    at_resource(f"{one}, {two}", "header")  # two headers joined by a proxy


def checked(proof: str, now: float = NOW) -> DpopProof:
    return check_dpop_proof(
        proof, method="GET", url=API_URL, now=now, access_token=SESSION_TOKEN, jkt=KEY_JKT
    )


def test_security_dpop_replay(tmp_path: Path) -> None:
    # Two handles on one sqlite file stand for two server processes.
    first = StoreReplayMemory(SqliteStore(tmp_path / "s.db"), namespace="dpop")
    second = StoreReplayMemory(SqliteStore(tmp_path / "s.db"), namespace="dpop")
    proof = resource_proof()
    spend_dpop_proof(checked(proof), replay=first, now=NOW)
    with pytest.raises(DpopError) as caught:
        spend_dpop_proof(checked(proof, NOW + 1), replay=second, now=NOW + 1)
    assert caught.value.reason == "replay"
    # A fresh proof by the same key is fine.
    spend_dpop_proof(checked(resource_proof()), replay=second, now=NOW)


@pytest.mark.parametrize("store", [False, True], ids=["memory", "sqlite"])
def test_a_proof_is_remembered_through_the_last_instant_it_is_accepted(
    tmp_path: Path, store: bool
) -> None:
    # `iat` + window is still inside the window (`check_dpop_proof` accepts it), so the
    # record must still hold then: a memory forgets a record once `expires_at <= now`.
    memory = (
        StoreReplayMemory(SqliteStore(tmp_path / "s.db"), namespace="dpop")
        if store
        else MemoryReplayMemory()
    )
    proof = resource_proof()
    spend_dpop_proof(checked(proof), replay=memory, now=NOW)
    last = NOW + 60  # NOW is the proof's iat; 60 s is the default window
    again = checked(proof, last)  # still fresh
    with pytest.raises(DpopError) as caught:
        spend_dpop_proof(again, replay=memory, now=last)
    assert caught.value.reason == "replay"
    # The async driver records the same span.
    other = resource_proof()
    asyncio.run(aspend_dpop_proof(checked(other), replay=memory, now=NOW))
    with pytest.raises(DpopError) as caught:
        asyncio.run(aspend_dpop_proof(checked(other, last), replay=memory, now=last))
    assert caught.value.reason == "replay"


def test_security_dpop_token_hash_mismatch() -> None:
    at_resource(resource_proof(claims={"ath": access_token_hash("another-token")}), "ath")


def test_security_dpop_missing() -> None:
    at_resource(None, "header")
    at_resource([], "header")


def test_security_token_request_without_dpop() -> None:
    refused("header", None, method="POST", url=TOKEN_URL)


def test_security_token_dpop_with_ath() -> None:
    proof = dpop_proof(KEY, "POST", TOKEN_URL, NOW, claims={"ath": access_token_hash("x")})
    refused("ath", proof, method="POST", url=TOKEN_URL)


def test_a_resource_proof_without_ath_is_refused() -> None:
    at_resource(resource_proof(claims={"ath": MISSING}), "ath")


# -- the header and the key (PAP-4.3-20) --------------------------------------------------


@pytest.mark.parametrize("typ", [MISSING, "JWT", "DPoP+JWT", "poppy-browser+jwt"])
def test_typ_must_be_dpop_jwt(typ: Any) -> None:
    at_resource(resource_proof(header={"typ": typ}), "typ")


@pytest.mark.parametrize("alg", ["HS256", "EdDSA", "PS256", None])
def test_only_allowed_algs(alg: Any) -> None:
    at_resource(resource_proof(header={"alg": alg}), "alg")


def test_rs256_header_on_an_ec_key() -> None:
    at_resource(resource_proof(header={"alg": "RS256"}), "signature")


def test_rsa_proof_keys_work() -> None:
    rsa = generate_private_jwk("RS256")
    proof = dpop_proof(rsa, "POST", TOKEN_URL, NOW)
    assert check_dpop_proof(proof, method="POST", url=TOKEN_URL, now=NOW).thumbprint == thumbprint(
        dict(rsa.to_dict())
    )


@pytest.mark.parametrize(
    "jwk",
    [
        MISSING,
        "not-an-object",
        {"kty": "oct", "k": "c2VjcmV0"},
        {"kty": "EC", "crv": "P-384", "x": "AA", "y": "AA"},
    ],
)
def test_jwk_must_be_a_usable_public_key(jwk: Any) -> None:
    at_resource(resource_proof(header={"jwk": jwk}), "jwk")


def test_jwk_with_private_members_is_refused() -> None:
    private = dict(KEY.to_dict())
    assert "d" in private
    at_resource(resource_proof(header={"jwk": private}), "jwk")


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("a.b", "header"),
        ("a.b.c.d", "header"),
        ("", "header"),
        (" ", "header"),
        ("not.a.jws!", "jws"),
        ("e30.e30.", "alg"),
    ],
)
def test_not_a_compact_jws(bad: str, reason: str) -> None:
    assert refused(reason, bad).error == "invalid_dpop_proof"


def test_allowed_algs_are_asymmetric_ones_pactmw_implements() -> None:
    for algs in (frozenset({"HS256"}), frozenset()):
        with pytest.raises(MalformedInput, match="allowed_algs"):
            check_dpop_proof(
                resource_proof(), method="GET", url=API_URL, now=NOW, allowed_algs=algs
            )


# -- the claims ---------------------------------------------------------------------------


@pytest.mark.parametrize("jti", [MISSING, 7, "short", "x" * 257])
def test_jti_is_a_long_enough_string(jti: Any) -> None:
    at_resource(resource_proof(claims={"jti": jti}), "jti")


@pytest.mark.parametrize(
    "changes",
    [
        {"iat": "1800000000"},
        {"iat": True},
        {"iat": MISSING},
        {"iat": 10**400},  # JSON allows it; a float cannot hold it (was an OverflowError)
        {"htu": 5},
        {"htm": MISSING},
    ],
)
def test_required_claims_have_their_types(changes: dict[str, Any]) -> None:
    at_resource(resource_proof(claims=changes), "claims")


def test_iat_window_both_ways() -> None:
    for offset in (-60, 60, 59.5):
        check_dpop_proof(
            resource_proof(claims={"iat": NOW + offset}),
            method="GET",
            url=API_URL,
            now=NOW,
            access_token=SESSION_TOKEN,
        )
    at_resource(resource_proof(claims={"iat": NOW + 61}), "iat")
    at_resource(resource_proof(claims={"iat": NOW - 61}), "iat")


def test_nonce_when_the_server_requires_one() -> None:
    proof = resource_proof(nonce="n-1")
    check: dict[str, Any] = {
        "method": "GET",
        "url": API_URL,
        "now": NOW,
        "access_token": SESSION_TOKEN,
    }
    assert check_dpop_proof(proof, nonce="n-1", **check).nonce == "n-1"
    assert check_dpop_proof(proof, **check).nonce == "n-1"  # carried, not required
    for bad in (resource_proof(nonce="n-0"), resource_proof()):
        err = refused("nonce", bad, nonce="n-1", access_token=SESSION_TOKEN)
        assert err.error == USE_DPOP_NONCE


# -- htu (RFC 9449 §4.3 item 9; RFC 3986 §6.2.2-6.2.3) -----------------------------------


@pytest.mark.parametrize(
    ("sent", "request_url"),
    [
        ("https://api.example/api/orders", "https://api.example/api/orders?page=2#top"),
        ("HTTPS://API.Example:443/api/orders", "https://api.example/api/orders"),
        ("https://api.example/api/%7Eorders", "https://api.example/api/~orders"),
        ("https://api.example/api/a%2fb", "https://api.example/api/a%2Fb"),
        ("https://api.example/api/./x/../orders", "https://api.example/api/orders"),
        ("https://api.example", "https://api.example/"),
        ("https://[::1]:8443/x", "https://[::1]:8443/x"),
    ],
)
def test_htu_equivalent_forms(sent: str, request_url: str) -> None:
    assert normalize_htu(sent) == normalize_htu(request_url)
    proof = dpop_proof(KEY, "POST", sent, NOW)
    check_dpop_proof(proof, method="POST", url=request_url, now=NOW)


@pytest.mark.parametrize(
    "sent",
    [
        "https://api.example/API/orders",
        "http://api.example/api/orders",
        "https://api.example:8443/api/orders",
        "https://api.example/api/orders/",
        "https://api.example/api/a%2Fb",
        "/api/orders",
        "https://user@api.example/api/orders",
        "ftp://api.example/api/orders",
    ],
)
def test_htu_different_resources(sent: str) -> None:
    url = "https://api.example/api/orders" if "a%2F" not in sent else "https://api.example/api/a/b"
    refused("htu", dpop_proof(KEY, "POST", sent, NOW), method="POST", url=url)


def test_normalize_htu_refuses_non_urls() -> None:
    with pytest.raises(MalformedInput):
        normalize_htu("https://api.example:99999/")


# -- the drivers --------------------------------------------------------------------------


def test_memory_replay_and_async_driver(tmp_path: Path) -> None:
    proof = checked(resource_proof())

    async def run() -> None:
        for memory in (MemoryReplayMemory(), StoreReplayMemory(SqliteStore(tmp_path / "a.db"))):
            await aspend_dpop_proof(proof, replay=memory, now=NOW)
            with pytest.raises(DpopError, match="used before"):
                await aspend_dpop_proof(proof, replay=memory, now=NOW)

    asyncio.run(run())


def test_the_sdks_own_proofs_verify() -> None:
    """Interop: a proof made by the Poppy SDK's `JoseDpopProofProvider` passes."""
    from datetime import datetime, timezone

    from cryptography.hazmat.primitives.asymmetric import ec
    from personal_agent_protocol.crypto import DpopKeyMaterial, JoseDpopProofProvider
    from personal_agent_protocol.reactor import DpopProofRequest
    from pydantic import SecretStr

    from pactmw.core.jwk import private_jwk_from_key

    private = ec.generate_private_key(ec.SECP256R1())
    public = {
        k: v
        for k, v in private_jwk_from_key(private, alg="ES256").to_dict().items()
        if k in ("kty", "crv", "x", "y")
    }

    async def material(_: DpopProofRequest) -> DpopKeyMaterial:
        return DpopKeyMaterial(private_key=private, public_jwk=public)

    when = datetime.fromtimestamp(NOW, timezone.utc)
    provider = JoseDpopProofProvider(material, now=lambda: when)
    request = DpopProofRequest(
        method="GET",
        url=API_URL + "?x=1",
        tenant_id="t",
        subject="s",
        issuer="i",
        access_token=SecretStr(SESSION_TOKEN),
    )
    proof = asyncio.run(provider.create(request)).get_secret_value()
    verified = check_dpop_proof(
        proof,
        method="GET",
        url=API_URL,
        now=NOW,
        access_token=SESSION_TOKEN,
        jkt=thumbprint(public),
    )
    assert verified.htu == API_URL
