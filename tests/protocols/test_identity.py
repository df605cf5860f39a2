"""PACT 1.0 personal-agent identity: every check of pact-provider.md §1.1, both ways.

Keys come from a real JWKS server on 127.0.0.1; the wall clock is fixed (`NOW`) and the key
cache's monotonic clock moves only when a test advances it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from cryptography.hazmat.primitives import serialization
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pactmw.core.encoding import b64url_decode, b64url_encode, json_dumps
from pactmw.core.errors import AuthenticationFailed
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from pactmw.core.keys import DiscoveryCache, JwksCache
from pactmw.core.tokencache import VerifiedTokenCache
from pactmw.protocols.identity import (
    AgentRegistry,
    IdentityVerifier,
    MemoryAgentOverrides,
    PersonalAgent,
    RegisteredAgent,
    actor_id_for,
)
from pactmw.store import MemoryStore, SqliteStore
from tests.support.clock import FakeClock
from tests.support.jwks_server import JwksServer, Mode
from tests.support.logs import HOSTILE, assert_logs_tame

NOW = 1_800_000_000
ISS = "https://pa.example"
DISABLED_ISS = ISS + "/disabled-pa"
OVERRIDE_ISS = "https://other-pa.example"
AUD = "http://localhost:3000/a2a"
OVERRIDE_AUD = "urn:provider:custom-audience"
POLICY = FetchPolicy(allow_http_on_loopback=True, timeout=2.0)
_DROP = object()

Verify = Callable[[str | None], PersonalAgent]


# -- keys, server, verifier ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def es_key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="es-1")


@pytest.fixture(scope="module")
def rs_key() -> PrivateJWK:
    return generate_private_jwk("RS256", kid="rs-1")


@pytest.fixture(scope="module")
def ed_key() -> PrivateJWK:
    return generate_private_jwk("EdDSA", kid="ed-1")


@pytest.fixture(scope="module")
def module_server() -> Iterator[JwksServer]:
    with JwksServer() as server:
        yield server


@pytest.fixture
def server(
    module_server: JwksServer, es_key: PrivateJWK, rs_key: PrivateJWK, ed_key: PrivateJWK
) -> JwksServer:
    module_server.reset()
    module_server.set_keys(public_key_set([es_key, rs_key, ed_key]))
    return module_server


@pytest.fixture
def keys_clock() -> FakeClock:
    return FakeClock(5000.0)


@pytest.fixture
def registry(server: JwksServer) -> AgentRegistry:
    return AgentRegistry(
        [
            RegisteredAgent(issuer=ISS, name="Demo PA", jwks_uri=server.url),
            RegisteredAgent(issuer=DISABLED_ISS, jwks_uri=server.url, enabled=False),
            RegisteredAgent(issuer=OVERRIDE_ISS, jwks_uri=server.url, audience=OVERRIDE_AUD),
        ]
    )


@pytest.fixture
def verifier(registry: AgentRegistry, keys_clock: FakeClock) -> IdentityVerifier:
    return IdentityVerifier(
        audience=AUD,
        registry=registry,
        keys=JwksCache(POLICY, clock=keys_clock),
        clock=lambda: NOW,
    )


@pytest.fixture(params=["sync", "async", "cached"])
def verify(request: pytest.FixtureRequest, verifier: IdentityVerifier) -> Verify:
    """The same verifier driven by `verify`, by `averify`, or as the async Provider drives
    it: `cached` first, `averify` when that would wait (every rule runs on each path)."""
    if request.param == "sync":
        return verifier.verify
    if request.param == "cached":
        assert not verifier.registry.may_block
        return lambda header: verifier.cached(header) or asyncio.run(verifier.averify(header))
    return lambda header: asyncio.run(verifier.averify(header))


def claims(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "iss": ISS,
        "sub": "user-4471",
        "aud": AUD,
        "iat": NOW,
        "exp": NOW + 120,
        "jti": "3f1c0e6a",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not _DROP}


def bearer(key: PrivateJWK, body: dict[str, Any] | bytes | None = None, **header: Any) -> str:
    return "Bearer " + sign_compact(
        claims() if body is None else body, key, typ="JWT", extra_header=header or None
    )


def refused(verify: Verify, header: str | None) -> str:
    with pytest.raises(AuthenticationFailed) as info:
        verify(header)
    assert info.value.www_authenticate == 'Bearer realm="a2a"'
    return info.value.reason


# -- accepted -----------------------------------------------------------------------------------


@pytest.mark.parametrize("alg", ["ES256", "RS256"])
def test_valid_token_accepted(
    verify: Verify, server: JwksServer, es_key: PrivateJWK, rs_key: PrivateJWK, alg: str
) -> None:
    key = es_key if alg == "ES256" else rs_key
    agent = verify(bearer(key))
    assert isinstance(agent, PersonalAgent)
    assert agent.issuer == ISS
    assert agent.sub == "user-4471"
    assert agent.name == "Demo PA"
    assert agent.audience == AUD
    assert dict(agent.claims) == claims()
    assert agent.actor_id == actor_id_for(ISS, "user-4471")
    assert server.hits[server.jwks_path] == 1


def test_actor_id_is_the_digest_of_both_issuer_and_sub_every_time() -> None:
    """`actor_id` reuses the ids of recent users: each stays the digest of its own pair."""
    pairs = [(ISS, "jane"), (ISS, "john"), ("https://other.example", "jane"), (ISS, "jane")]
    for _ in range(2):  # the second pass reads the ids computed by the first
        for issuer, sub in pairs:
            agent = PersonalAgent(issuer, sub, "Demo PA", {}, AUD)
            digest = hashlib.sha256(f"{issuer}\n{sub}".encode()).hexdigest()[:37]
            assert agent.actor_id == "pa:" + digest == actor_id_for(issuer, sub)


def test_actor_id_is_pa_plus_37_hex_of_sha256(verify: Verify, es_key: PrivateJWK) -> None:
    agent = verify(bearer(es_key, claims(sub="jane")))
    expected = "pa:" + hashlib.sha256(f"{ISS}\njane".encode()).hexdigest()[:37]
    assert agent.actor_id == expected
    assert len(agent.actor_id) == 40
    other = verify(bearer(es_key, claims(sub="jane", iss=OVERRIDE_ISS, aud=OVERRIDE_AUD)))
    assert other.actor_id != agent.actor_id


def test_claims_are_read_only(verify: Verify, es_key: PrivateJWK) -> None:
    agent = verify(bearer(es_key))
    with pytest.raises(TypeError):
        agent.claims["sub"] = "admin"  # type: ignore[index]


@pytest.mark.parametrize("typ", [None, "JWT"])
def test_typ_absent_or_jwt_accepted(verify: Verify, es_key: PrivateJWK, typ: str | None) -> None:
    token = sign_compact(claims(), es_key, typ=typ)
    assert ("typ" in _header_of(token)) is (typ is not None)
    assert verify("Bearer " + token).sub == "user-4471"


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_bearer_scheme_is_case_insensitive(verify: Verify, es_key: PrivateJWK, scheme: str) -> None:
    token = bearer(es_key).split(" ", 1)[1]
    assert verify(f"{scheme} {token}").sub == "user-4471"


def test_same_token_accepted_three_times(verify: Verify, es_key: PrivateJWK) -> None:
    header = bearer(es_key)
    results = [verify(header) for _ in range(3)]
    assert len({r.actor_id for r in results}) == 1


@pytest.mark.parametrize("alg", ["ES256", "RS256"])
def test_token_without_kid_uses_a_fitting_key(
    verify: Verify, es_key: PrivateJWK, rs_key: PrivateJWK, alg: str
) -> None:
    key = _without_kid(es_key if alg == "ES256" else rs_key)
    token = sign_compact(claims(), key, typ="JWT")
    assert "kid" not in _header_of(token)
    assert verify("Bearer " + token).sub == "user-4471"
    # A JSON null kid reads as no kid too.
    assert verify(bearer(es_key if alg == "ES256" else rs_key, kid=None)).sub == "user-4471"


def test_float_numeric_dates_accepted(verify: Verify, es_key: PrivateJWK) -> None:
    assert verify(bearer(es_key, claims(iat=NOW + 0.5, exp=NOW + 100.25))).sub == "user-4471"


# -- Authorization header -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "missing_token"),
        ("", "missing_token"),
        ("Bearer", "malformed_header"),
        ("Bearer ", "malformed_header"),
        ("Bearer a b", "malformed_header"),
        ("Basic dXNlcjpwYXNz", "malformed_header"),
        ("Token abc", "malformed_header"),
        ("Bearerabc.def.ghi", "malformed_header"),
        ("Bearer not-a-jwt", "malformed_token"),
        ("Bearer a.b.c", "malformed_token"),
        ("Bearer ...", "malformed_token"),
    ],
)
def test_bad_authorization_headers(
    verify: Verify, server: JwksServer, header: str | None, reason: str
) -> None:
    assert refused(verify, header) == reason
    assert server.total_hits == 0


@pytest.mark.parametrize("header", [b"Bearer a.b.c", 5, ["Bearer a.b.c"]])
def test_an_authorization_value_that_is_not_a_string(
    verify: Verify, server: JwksServer, header: Any
) -> None:
    # Found in a custom-server trial: an ASGI server's header values are bytes, and handing
    # one over was a TypeError (AttributeError for other values), not a refusal.
    assert refused(verify, header) == "malformed_header"
    assert server.total_hits == 0


def test_basic_with_a_valid_jwt_refused(verify: Verify, es_key: PrivateJWK) -> None:
    token = bearer(es_key).split(" ", 1)[1]
    assert refused(verify, f"Basic {token}") == "malformed_header"


# -- alg ------------------------------------------------------------------------------------


@pytest.mark.parametrize("alg", ["ES256", "RS256"])
def test_hs256_signed_with_the_public_key_pem_refused_before_any_fetch(
    verify: Verify, server: JwksServer, es_key: PrivateJWK, rs_key: PrivateJWK, alg: str
) -> None:
    # The alg-confusion attack: HMAC keyed with the public key a naive verifier would use.
    key = es_key if alg == "ES256" else rs_key
    pem = key.public.key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = {"alg": "HS256", "typ": "JWT", "kid": key.kid}
    signing_input = _unsigned_parts(header, claims())
    mac = hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()
    assert refused(verify, f"Bearer {signing_input}.{b64url_encode(mac)}") == "unsupported_alg"
    assert server.total_hits == 0


@pytest.mark.parametrize("signature", ["", "c2ln"])
def test_alg_none_refused(verify: Verify, server: JwksServer, signature: str) -> None:
    for alg in ("none", "None", "NONE"):
        token = _unsigned_parts({"alg": alg, "typ": "JWT"}, claims()) + "." + signature
        assert refused(verify, f"Bearer {token}") == "unsupported_alg"
    assert server.total_hits == 0


def test_eddsa_refused_even_with_a_published_key(
    verify: Verify, server: JwksServer, ed_key: PrivateJWK
) -> None:
    assert refused(verify, bearer(ed_key)) == "unsupported_alg"
    assert server.total_hits == 0


@pytest.mark.parametrize("alg", ["PS256", "ES384", "ES512", "RS512", "HS512", "es256", ""])
def test_other_algs_refused(verify: Verify, server: JwksServer, alg: str) -> None:
    token = _unsigned_parts({"alg": alg, "kid": "es-1"}, claims()) + ".c2ln"
    assert refused(verify, f"Bearer {token}") == "unsupported_alg"
    assert server.total_hits == 0


def test_header_algorithm_must_fit_the_key(verify: Verify, rs_key: PrivateJWK) -> None:
    # An ES256 header naming the RSA key's kid: no key fits, whatever the signature.
    token = _unsigned_parts({"alg": "ES256", "kid": "rs-1"}, claims())
    assert refused(verify, f"Bearer {token}.{b64url_encode(b'x' * 64)}") == "unknown_kid"


# -- issuer and registry ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "iss",
    [
        "https://unknown.example",
        ISS + "/",  # exact string match only
        ISS.upper(),
        "",
        _DROP,
        None,
        42,
        [ISS],
    ],
)
def test_unknown_or_missing_issuer(
    verify: Verify, server: JwksServer, es_key: PrivateJWK, iss: object
) -> None:
    assert refused(verify, bearer(es_key, claims(iss=iss))) == "unknown_issuer"
    assert server.total_hits == 0


def test_open_mode_off_refuses_unregistered_issuers_without_discovery(
    server: JwksServer, registry: AgentRegistry, es_key: PrivateJWK
) -> None:
    issuer = server.base_url
    server.set_json("/.well-known/openid-configuration", {"issuer": issuer, "jwks_uri": server.url})
    verifier = IdentityVerifier(
        audience=AUD, registry=registry, keys=JwksCache(POLICY), clock=lambda: NOW
    )
    assert verifier.open_mode is False
    assert refused(verifier.verify, bearer(es_key, claims(iss=issuer))) == "unknown_issuer"
    assert server.total_hits == 0


def test_statically_disabled_issuer(verify: Verify, server: JwksServer, es_key: PrivateJWK) -> None:
    assert refused(verify, bearer(es_key, claims(iss=DISABLED_ISS))) == "disabled_issuer"
    assert server.total_hits == 0


def test_runtime_disable_and_enable(
    verifier: IdentityVerifier, registry: AgentRegistry, es_key: PrivateJWK
) -> None:
    header = bearer(es_key)
    assert verifier.verify(header).issuer == ISS
    registry.disable(ISS)
    assert refused(verifier.verify, header) == "disabled_issuer"
    assert refused(lambda h: asyncio.run(verifier.averify(h)), header) == "disabled_issuer"
    registry.enable(ISS)
    assert verifier.verify(header).issuer == ISS
    # A statically disabled agent can be switched on at runtime too.
    registry.enable(DISABLED_ISS)
    assert verifier.verify(bearer(es_key, claims(iss=DISABLED_ISS))).issuer == DISABLED_ISS


def test_resolver_backed_registry_sync_and_async(server: JwksServer, es_key: PrivateJWK) -> None:
    looked_up: list[str] = []

    def resolve(issuer: str) -> RegisteredAgent | None:
        looked_up.append(issuer)
        return RegisteredAgent(issuer=issuer, jwks_uri=server.url) if issuer == ISS else None

    registry = AgentRegistry(resolver=resolve)
    assert registry.may_block
    verifier = IdentityVerifier(
        audience=AUD, registry=registry, keys=JwksCache(POLICY), clock=lambda: NOW
    )
    assert verifier.verify(bearer(es_key)).issuer == ISS
    assert asyncio.run(verifier.averify(bearer(es_key))).issuer == ISS
    assert refused(verifier.verify, bearer(es_key, claims(iss="https://x.example"))) == (
        "unknown_issuer"
    )
    assert looked_up == [ISS, ISS, "https://x.example"]


def test_inline_jwks_agent(es_key: PrivateJWK, rs_key: PrivateJWK) -> None:
    registry = AgentRegistry([RegisteredAgent(issuer=ISS, jwks=public_key_set([es_key]))])
    verifier = IdentityVerifier(audience=AUD, registry=registry, clock=lambda: NOW)
    assert verifier.verify(bearer(es_key)).sub == "user-4471"
    assert refused(verifier.verify, bearer(rs_key)) == "unknown_kid"
    assert refused(verifier.verify, bearer(generate_private_jwk("ES256", kid="es-1"))) == (
        "bad_signature"
    )


def test_registered_agent_needs_exactly_one_key_source(es_key: PrivateJWK) -> None:
    with pytest.raises(ValueError):
        RegisteredAgent(issuer=ISS)
    with pytest.raises(ValueError):
        RegisteredAgent(issuer=ISS, jwks_uri="https://x", jwks=public_key_set([es_key]))
    with pytest.raises(ValueError):
        IdentityVerifier(audience="", registry=AgentRegistry())


@pytest.mark.parametrize("as_given", ["document", "json text"])
def test_registered_agent_refuses_a_jwks_document_at_construction(
    es_key: PrivateJWK, as_given: str
) -> None:
    # The JWKS as `pactmw keygen --jwks` writes it (json.load of the file, or its text) is what
    # a configuration's `jwks` takes; in Python it once passed here and every token then
    # failed with AttributeError: 'dict' object has no attribute 'candidates'.
    document = {"keys": [es_key.public.to_dict()]}
    jwks: Any = document if as_given == "document" else json.dumps(document)
    with pytest.raises(TypeError) as caught:
        RegisteredAgent(issuer=ISS, jwks=jwks)
    assert str(caught.value) == (
        f"agent {ISS!r}: jwks must be a KeySet, not {type(jwks).__name__}: "
        "read a JWKS document with pactmw.parse_jwks(...)"
    )


# -- signature and keys -------------------------------------------------------------------------


def test_kid_not_in_jwks(verify: Verify, server: JwksServer, es_key: PrivateJWK) -> None:
    stranger = generate_private_jwk("ES256", kid="not-published")
    assert refused(verify, bearer(stranger)) == "unknown_kid"
    assert server.hits[server.jwks_path] == 1


def test_rotated_key_accepted_after_cooldown(
    verify: Verify,
    server: JwksServer,
    keys_clock: FakeClock,
    es_key: PrivateJWK,
    rs_key: PrivateJWK,
) -> None:
    assert verify(bearer(es_key))
    rotated = generate_private_jwk("ES256", kid="es-2")
    server.set_keys(public_key_set([es_key, rs_key, rotated]))
    assert refused(verify, bearer(rotated)) == "unknown_kid"  # within the refetch cooldown
    keys_clock.advance(30)
    assert verify(bearer(rotated)).sub == "user-4471"
    assert server.hits[server.jwks_path] == 2


def test_a_symmetric_key_in_the_jwks_does_not_refuse_the_agents_tokens(
    verify: Verify, server: JwksServer, es_key: PrivateJWK
) -> None:
    # RFC 7517 §5: the `oct` key is ignored (never used to verify) and the ES256 key still is.
    oct_key = {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac-1", "use": "sig"}
    server.set_keys({"keys": [oct_key, {**es_key.public.to_dict(), "use": "sig"}]})
    assert verify(bearer(es_key)).sub == "user-4471"
    hmac_kid = generate_private_jwk("ES256", kid="hmac-1")
    assert refused(verify, bearer(hmac_kid)) == "unknown_kid"


@pytest.mark.parametrize(
    ("key_ops", "accepted"),
    [(["encrypt"], False), (["sign"], False), (["verify"], True), ("verify", True)],
)
def test_a_key_is_used_only_when_its_key_ops_allow_verifying(
    verify: Verify, server: JwksServer, es_key: PrivateJWK, key_ops: Any, accepted: bool
) -> None:
    # RFC 7517 §4.3, read as jose (the Parafé reference's library) reads it: an array must
    # hold "verify"; a `key_ops` that is not an array is ignored. The same rule as `use`.
    server.set_keys({"keys": [{**es_key.public.to_dict(), "key_ops": key_ops}]})
    if accepted:
        assert verify(bearer(es_key)).sub == "user-4471"
    else:
        assert refused(verify, bearer(es_key)) == "unknown_kid"


def test_signature_by_a_stranger_with_a_published_kid(verify: Verify, es_key: PrivateJWK) -> None:
    stranger = generate_private_jwk("ES256", kid="es-1")
    assert refused(verify, bearer(stranger)) == "bad_signature"
    assert refused(verify, "Bearer " + sign_compact(claims(), _without_kid(stranger))) == (
        "bad_signature"
    )


def test_tampered_payload(verify: Verify, es_key: PrivateJWK) -> None:
    head, _, sig = bearer(es_key).split(" ", 1)[1].split(".")
    forged = b64url_encode(json_dumps(claims(sub="admin")))
    assert refused(verify, f"Bearer {head}.{forged}.{sig}") == "bad_signature"


def test_jwk_header_is_not_trusted(verify: Verify) -> None:
    attacker = generate_private_jwk("ES256", kid="es-1")
    header = bearer(attacker, jwk=attacker.public.to_dict(), jku="https://evil.example/jwks")
    assert refused(verify, header) == "bad_signature"


def test_jwks_server_down_with_nothing_cached(
    verify: Verify, server: JwksServer, es_key: PrivateJWK
) -> None:
    server.mode = Mode.DOWN
    assert refused(verify, bearer(es_key)) == "jwks_unavailable"


def test_checks_run_in_the_reference_order(
    verify: Verify, server: JwksServer, es_key: PrivateJWK
) -> None:
    stranger = generate_private_jwk("ES256", kid="es-1")
    expired = claims(iat=NOW - 500, exp=NOW - 400)
    # Signature before claims: an expired token with a bad signature is a bad signature.
    assert refused(verify, bearer(stranger, expired)) == "bad_signature"
    # Issuer before signature, alg before issuer.
    assert refused(verify, bearer(stranger, claims(iss="https://x.example"))) == "unknown_issuer"
    token = _unsigned_parts({"alg": "HS256"}, claims(iss="https://x.example")) + ".c2ln"
    assert refused(verify, f"Bearer {token}") == "unsupported_alg"


# -- audience -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "aud",
    [
        "http://localhost:3000/a2a/brand-1",  # the interface URL is not the audience
        AUD + "/",
        "https://localhost:3000/a2a",
        OVERRIDE_AUD,
        [AUD],  # an array is refused even when it contains the audience
        [AUD, "other"],
        [AUD, AUD],  # duplicates
        [],
        _DROP,
        None,
        "",
        {"aud": AUD},
    ],
)
def test_bad_audience(verify: Verify, es_key: PrivateJWK, aud: object) -> None:
    assert refused(verify, bearer(es_key, claims(aud=aud))) == "bad_audience"


def test_per_agent_audience_override(verify: Verify, es_key: PrivateJWK) -> None:
    agent = verify(bearer(es_key, claims(iss=OVERRIDE_ISS, aud=OVERRIDE_AUD)))
    assert agent.audience == OVERRIDE_AUD
    assert refused(verify, bearer(es_key, claims(iss=OVERRIDE_ISS, aud=AUD))) == "bad_audience"


# -- required claims ----------------------------------------------------------------------------


@pytest.mark.parametrize("sub", [_DROP, "", None, 123, 1.5, True, ["user"], {"id": "user"}])
def test_bad_sub(verify: Verify, es_key: PrivateJWK, sub: object) -> None:
    assert refused(verify, bearer(es_key, claims(sub=sub))) == "bad_claims"


@pytest.mark.parametrize("name", ["iat", "exp"])
@pytest.mark.parametrize("value", [_DROP, None, "1800000000", True, False, [NOW], {"t": NOW}])
def test_iat_and_exp_must_be_numbers(
    verify: Verify, es_key: PrivateJWK, name: str, value: object
) -> None:
    assert refused(verify, bearer(es_key, claims(**{name: value}))) == "bad_claims"


@pytest.mark.parametrize("name", ["iat", "exp", "nbf"])
@pytest.mark.parametrize("literal", ["1" + "0" * 400, "-" + "9" * 400, "1e400", "-1e400"])
def test_out_of_range_numeric_dates_are_refused_not_a_crash(
    verify: Verify, es_key: PrivateJWK, name: str, literal: str
) -> None:
    # Validly signed by a registered agent: the verifier must answer 401, never raise
    # OverflowError (a 500) on a number JSON allows but a float cannot hold.
    body = json_dumps(claims(**{name: _DROP}))[:-1] + f',"{name}":{literal}}}'.encode()
    assert refused(verify, bearer(es_key, body)) == "bad_claims"


def test_sub_that_is_not_unicode_text_is_refused_not_a_crash(
    verify: Verify, es_key: PrivateJWK
) -> None:
    # A lone surrogate escape is valid JSON text but cannot be UTF-8 encoded (actor_id hashes it).
    body = json.dumps(claims(sub="\ud800")).encode()  # ensure_ascii: written as "\ud800"
    assert b"\\ud800" in body
    assert refused(verify, bearer(es_key, body)) == "bad_claims"


# -- time ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("iat", "exp", "reason"),
    [
        (NOW + 31, NOW + 151, "iat_in_future"),  # the suite's case
        (NOW + 30, NOW + 150, None),  # exactly +30 passes
        (NOW - 200, NOW - 100, "expired"),  # the suite's case
        (NOW - 151, NOW - 31, "expired"),
        (NOW - 150, NOW - 30, "expired"),  # exp <= now - 30 is expired
        (NOW - 149, NOW - 29, None),
        (NOW, NOW + 301, "lifetime_too_long"),
        (NOW - 100, NOW + 201, "lifetime_too_long"),
        (NOW, NOW + 300, None),
        (NOW - 100, NOW + 200, None),
        (NOW, NOW, None),
        (NOW + 10, NOW, None),  # exp before iat: lifetime negative, not expired, iat in range
    ],
)
def test_time_checks(
    verify: Verify, es_key: PrivateJWK, iat: int, exp: int, reason: str | None
) -> None:
    header = bearer(es_key, claims(iat=iat, exp=exp))
    if reason is None:
        assert verify(header).sub == "user-4471"
    else:
        assert refused(verify, header) == reason


@pytest.mark.parametrize(
    ("nbf", "reason"),
    [(NOW + 31, "not_yet_valid"), (NOW + 30, None), (NOW - 1000, None), ("soon", "bad_claims")],
)
def test_nbf(verify: Verify, es_key: PrivateJWK, nbf: object, reason: str | None) -> None:
    header = bearer(es_key, claims(nbf=nbf))
    if reason is None:
        assert verify(header).sub == "user-4471"
    else:
        assert refused(verify, header) == reason


def test_jti_is_optional(verify: Verify, es_key: PrivateJWK) -> None:
    assert verify(bearer(es_key, claims(jti=_DROP))).sub == "user-4471"


# -- open mode ----------------------------------------------------------------------------------


@pytest.fixture
def tls_server(es_key: PrivateJWK, monkeypatch: pytest.MonkeyPatch) -> Iterator[JwksServer]:
    with JwksServer(public_key_set([es_key]), tls=True) as tls:
        monkeypatch.setenv("SSL_CERT_FILE", tls.ca_file)
        yield tls


def _open_verifier() -> IdentityVerifier:
    keys = JwksCache(POLICY)
    return IdentityVerifier(
        audience=AUD,
        registry=AgentRegistry(),
        keys=keys,
        open_mode=True,
        discovery=DiscoveryCache(POLICY),
        clock=lambda: NOW,
    )


def test_open_mode_discovers_the_jwks(tls_server: JwksServer, es_key: PrivateJWK) -> None:
    issuer = tls_server.base_url
    tls_server.set_json(
        "/.well-known/openid-configuration", {"issuer": issuer, "jwks_uri": tls_server.url}
    )
    verifier = _open_verifier()
    agent = verifier.verify(bearer(es_key, claims(iss=issuer)))
    assert agent.issuer == issuer
    assert agent.actor_id == actor_id_for(issuer, "user-4471")
    assert asyncio.run(verifier.averify(bearer(es_key, claims(iss=issuer)))).issuer == issuer
    assert tls_server.hits["/.well-known/openid-configuration"] == 1
    assert tls_server.hits[tls_server.jwks_path] == 1
    # Every other check still runs.
    assert refused(verifier.verify, bearer(es_key, claims(iss=issuer, aud="x"))) == "bad_audience"


def test_open_mode_refuses_a_mismatched_discovery_document(
    tls_server: JwksServer, es_key: PrivateJWK
) -> None:
    issuer = tls_server.base_url
    tls_server.set_json(
        "/.well-known/openid-configuration",
        {"issuer": "https://evil.example", "jwks_uri": tls_server.url},
    )
    assert refused(_open_verifier().verify, bearer(es_key, claims(iss=issuer))) == (
        "unknown_issuer"
    )
    assert tls_server.hits[tls_server.jwks_path] == 0


@pytest.mark.parametrize(
    "issuer",
    [
        "http://127.0.0.1:9",
        "https://[::1",
        "https://" + "a" * 64 + ".example",
        "https://a..b",
        "https://10.0.0.1",
        "https://169.254.169.254",
    ],
)
def test_open_mode_with_hostile_issuers_is_a_refusal_not_a_crash(
    es_key: PrivateJWK, issuer: str
) -> None:
    # No signature is needed to reach discovery: these come from anyone on the internet.
    assert refused(_open_verifier().verify, bearer(es_key, claims(iss=issuer))) == (
        "unknown_issuer"
    )


# -- logging ------------------------------------------------------------------------------------


def test_open_mode_logs_a_hostile_issuer_or_jwks_uri_escaped_and_cut_short(
    tls_server: JwksServer, es_key: PrivateJWK, caplog: pytest.LogCaptureFixture
) -> None:
    # In open mode the token's `iss` picks the discovery URL, and the discovered document the
    # JWKS URI: the failures' WARNING lines quote both.
    caplog.set_level(logging.DEBUG, logger="pactmw")
    hostile_issuer = tls_server.base_url + "/" + HOSTILE
    assert refused(_open_verifier().verify, bearer(es_key, claims(iss=hostile_issuer))) == (
        "unknown_issuer"
    )
    issuer = tls_server.base_url
    tls_server.set_json(
        "/.well-known/openid-configuration",
        {"issuer": issuer, "jwks_uri": tls_server.base_url + "/" + HOSTILE},
    )
    assert refused(_open_verifier().verify, bearer(es_key, claims(iss=issuer))) == (
        "jwks_unavailable"
    )
    messages = assert_logs_tame(caplog.records)
    assert any(m.startswith("OIDC discovery failed for https://") for m in messages)
    assert any(m.startswith("JWKS fetch failed: reason=jwks_unavailable uri=") for m in messages)


def test_refusals_are_logged_by_reason_and_tokens_never_logged(
    verify: Verify, server: JwksServer, es_key: PrivateJWK, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    stranger = generate_private_jwk("ES256", kid="unpublished")
    cases = {
        "expired": bearer(es_key, claims(iat=NOW - 500, exp=NOW - 400)),
        "unknown_kid": bearer(stranger),
        "bad_audience": bearer(es_key, claims(aud="nope")),
        "unsupported_alg": "Bearer " + _unsigned_parts({"alg": "HS256"}, claims()) + ".c2ln",
        "malformed_token": "Bearer eyJhbGciOiJFUzI1NiJ9.eyJ.sig",
    }
    for reason, header in cases.items():
        caplog.clear()
        assert refused(verify, header) == reason
        records = [r for r in caplog.records if r.name == "pactmw.identity"]
        assert len(records) == 1
        assert reason in records[0].getMessage()
        token = header.split(" ", 1)[1]
        for part in {token, *token.split(".")} - {""}:
            if len(part) > 8:
                assert part not in caplog.text
    # A failed JWKS fetch is logged too, still without the token.
    server.mode = Mode.FAIL
    caplog.clear()
    header = bearer(es_key)
    verifier = IdentityVerifier(
        audience=AUD,
        registry=AgentRegistry([RegisteredAgent(issuer=ISS, jwks_uri=server.url)]),
        keys=JwksCache(POLICY),
        clock=lambda: NOW,
    )
    assert refused(verifier.verify, header) == "jwks_unavailable"
    assert "jwks_unavailable" in caplog.text
    assert header.split(" ", 1)[1] not in caplog.text
    assert header.split(".")[1] not in caplog.text


def test_acceptance_logs_nothing_sensitive(
    verify: Verify, es_key: PrivateJWK, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    header = bearer(es_key)
    verify(header)
    assert header.split(" ", 1)[1] not in caplog.text
    assert header.split(".")[2] not in caplog.text


# -- properties ---------------------------------------------------------------------------------


_PROPERTY_KEY = generate_private_jwk("ES256", kid="prop")
_PROPERTY_VERIFIER = IdentityVerifier(
    audience=AUD,
    registry=AgentRegistry([RegisteredAgent(issuer=ISS, jwks=public_key_set([_PROPERTY_KEY]))]),
    clock=lambda: NOW,
)


def _outcome(header: str | None) -> None:
    """Verify; the only acceptable outcomes are a PersonalAgent or AuthenticationFailed."""
    try:
        result: object = _PROPERTY_VERIFIER.verify(header)
    except AuthenticationFailed as exc:
        result = exc.reason
    assert isinstance(result, PersonalAgent) or (isinstance(result, str) and result)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.none(), st.text(), st.text().map(lambda t: "Bearer " + t)))
def test_any_authorization_text_is_accepted_or_refused(header: str | None) -> None:
    _outcome(header)


segment = st.one_of(
    st.binary(max_size=120).map(b64url_encode),
    st.text(max_size=40),
    st.sampled_from(["", "e30", "eyJhbGciOiJFUzI1NiJ9", "eyJhbGciOiJSUzI1NiJ9", "bnVsbA"]),
)


@settings(max_examples=300, deadline=None)
@given(segment, segment, segment)
def test_any_three_segment_token_is_accepted_or_refused(a: str, b: str, c: str) -> None:
    _outcome(f"Bearer {a}.{b}.{c}")


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(alphabet=st.characters(codec=None, exclude_categories=())),  # incl. lone surrogates
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
numeric_dates = st.one_of(
    st.integers(min_value=NOW - 400, max_value=NOW + 400),
    st.floats(min_value=NOW - 400, max_value=NOW + 400),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=False),
    json_values,
)
subjects = st.one_of(st.text(alphabet=st.sampled_from("a\ud800\udfffé😀")), st.text(), json_values)
# Mostly well-formed claims, so that the signed tokens get past the early checks and every
# later check (numbers, sub, times, actor_id) meets hostile values.
claim_sets = st.fixed_dictionaries(
    {
        "iss": st.one_of(st.just(ISS), st.just(ISS), json_values),
        "aud": st.one_of(st.just(AUD), st.just(AUD), json_values),
        "sub": subjects,
        "iat": numeric_dates,
        "exp": numeric_dates,
    },
    optional={"nbf": numeric_dates, "jti": json_values, "extra": json_values},
)


hostile_claim = st.one_of(
    st.tuples(st.sampled_from(["iss", "aud", "jti", "extra"]), json_values),
    st.tuples(st.just("sub"), subjects),
    st.tuples(st.sampled_from(["iat", "exp", "nbf"]), numeric_dates),
)


def _signed(body: dict[str, Any], kid: str | None) -> str:
    # ensure_ascii JSON writes lone surrogates as \ud800 escapes; infinite floats are written as
    # an exponent the strict parser reads as inf (it refuses the Infinity literal outright).
    text = json.dumps(body).replace("-Infinity", "-1e400").replace("Infinity", "1e400")
    return "Bearer " + sign_compact(text.encode(), _PROPERTY_KEY, extra_header={"kid": kid})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_claim)
def test_one_hostile_claim_in_a_valid_signed_token(override: tuple[str, Any]) -> None:
    name, value = override
    _outcome(_signed(claims(**{name: value}), "prop"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(claim_sets, st.sampled_from(["prop", None, "other"]))
def test_validly_signed_arbitrary_claims_are_accepted_or_refused(
    body: dict[str, Any], kid: str | None
) -> None:
    _outcome(_signed(body, kid))


class _BlockingOverrides(MemoryAgentOverrides):
    """In-memory switches that claim they may block: the verifier then asks for the agent
    through its generator flow instead of answering in place."""

    may_block = True


_NO_CACHE: VerifiedTokenCache[str, str, str, float, float | None] = VerifiedTokenCache(
    max_entries=0
)


def _twin_verifiers() -> tuple[IdentityVerifier, IdentityVerifier]:
    """The same agents (inline keys; one disabled), checked without I/O and through the flow."""
    agents = [
        RegisteredAgent(issuer=ISS, name="PA", jwks=public_key_set([_PROPERTY_KEY])),
        RegisteredAgent(issuer=DISABLED_ISS, jwks=public_key_set([_PROPERTY_KEY]), enabled=False),
        RegisteredAgent(issuer=OVERRIDE_ISS, jwks=public_key_set([_PROPERTY_KEY]), audience=AUD),
    ]
    # No verified-token cache: every call checks the token afresh.
    in_place = IdentityVerifier(
        audience=AUD, registry=AgentRegistry(agents), clock=lambda: NOW, cache=_NO_CACHE
    )
    flowing = IdentityVerifier(
        audience=AUD,
        registry=AgentRegistry(agents, overrides=_BlockingOverrides()),
        clock=lambda: NOW,
        cache=_NO_CACHE,
    )
    assert not in_place.registry.may_block
    assert flowing.registry.may_block
    return in_place, flowing


_IN_PLACE, _FLOWING = _twin_verifiers()


def _verdict(verify: Verify, header: str) -> object:
    """What a verification ends with, refusals by reason and the issuer they name."""
    try:
        caller = verify(header)
    except AuthenticationFailed as exc:
        return (exc.reason, exc.issuer)
    return (caller.issuer, caller.sub, caller.name, caller.audience, dict(caller.claims))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    claim_sets,
    st.sampled_from([ISS, DISABLED_ISS, OVERRIDE_ISS, "https://x.example"]),
    st.sampled_from(["prop", None, "other"]),
    st.booleans(),
)
def test_the_check_without_io_and_the_flow_agree(
    body: dict[str, Any], issuer: str, kid: str | None, stranger: bool
) -> None:
    """A token that needs no I/O is checked in place, not through the generator flow: every
    outcome, refusal reasons and the issuer they name included, is the flow's."""
    body = {**body, "iss": issuer} if body["iss"] == ISS else body
    text = json.dumps(body).replace("-Infinity", "-1e400").replace("Infinity", "1e400")
    signer = _STRANGER_KEY if stranger else _PROPERTY_KEY
    header = "Bearer " + sign_compact(text.encode(), signer, extra_header={"kid": kid})
    expected = _verdict(_FLOWING.verify, header)
    assert _verdict(_IN_PLACE.verify, header) == expected
    assert _verdict(lambda h: asyncio.run(_IN_PLACE.averify(h)), header) == expected


_STRANGER_KEY = generate_private_jwk("ES256", kid="prop")


# -- helpers ------------------------------------------------------------------------------------


def _unsigned_parts(header: dict[str, Any], body: dict[str, Any]) -> str:
    return f"{b64url_encode(json_dumps(header))}.{b64url_encode(json_dumps(body))}"


def _header_of(token: str) -> dict[str, Any]:
    header: dict[str, Any] = json.loads(b64url_decode(token.split(".")[0]))
    return header


def _without_kid(key: PrivateJWK) -> PrivateJWK:
    return attrs.evolve(key, public=attrs.evolve(key.public, kid=None))


# -- cached: the async Provider's answer without a coroutine -----------------------------------


def test_cached_answers_a_cached_token_and_leaves_the_rest_to_averify(
    verifier: IdentityVerifier, es_key: PrivateJWK
) -> None:
    header = bearer(es_key)
    assert verifier.cached(header) is None  # fresh: the signature is averify's to check
    agent = asyncio.run(verifier.averify(header))
    again = verifier.cached(header)
    assert again is not None
    assert (again.issuer, again.sub, again.name, again.audience, dict(again.claims)) == (
        agent.issuer,
        agent.sub,
        agent.name,
        agent.audience,
        dict(agent.claims),
    )
    assert verifier.cached("Bearer not-a-token") is None  # not cached: averify refuses it
    for malformed, reason in ((None, "missing_token"), ("Basic abc", "malformed_header")):
        with pytest.raises(AuthenticationFailed) as info:
            verifier.cached(malformed)
        assert info.value.reason == reason


def test_cached_reads_a_memory_stores_switch_and_never_a_blocking_registry(
    server: JwksServer, es_key: PrivateJWK, tmp_path: Path
) -> None:
    memory = MemoryStore()
    agents = [RegisteredAgent(issuer=ISS, jwks_uri=server.url)]
    on_loop = IdentityVerifier(
        audience=AUD,
        registry=AgentRegistry(agents, overrides=memory, runtime=memory),
        keys=JwksCache(POLICY),
        clock=lambda: NOW,
    )
    header = bearer(es_key)
    on_loop.verify(header)
    assert on_loop.cached(header) is not None
    memory.set_agent_enabled(ISS, False)  # switched off at runtime: refused at once
    with pytest.raises(AuthenticationFailed) as info:
        on_loop.cached(header)
    assert info.value.reason == "disabled_issuer"
    sqlite = SqliteStore(tmp_path / "state.db")
    try:
        blocking = IdentityVerifier(
            audience=AUD,
            registry=AgentRegistry(agents, overrides=sqlite, runtime=sqlite),
            keys=JwksCache(POLICY),
            clock=lambda: NOW,
        )
        blocking.verify(header)
        assert blocking.cached(header) is None  # its switch is a store read: averify's
    finally:
        sqlite.close()


def test_a_hostile_issuer_or_kid_cannot_forge_hide_or_flood_a_log_line(
    verify: Verify, es_key: PrivateJWK, caplog: pytest.LogCaptureFixture
) -> None:
    # The refusal quotes the unverified token's `iss`: the caller wrote it.
    caplog.set_level(logging.DEBUG)
    for header in (
        bearer(es_key, claims(iss=HOSTILE)),
        bearer(es_key, claims(iss="https://" + HOSTILE)),
        bearer(es_key, kid=HOSTILE),
    ):
        caplog.clear()
        refused(verify, header)
        messages = assert_logs_tame(caplog.records)
        assert any(m.startswith("personal agent refused: reason=") for m in messages)
    # An ordinary value is logged as before.
    caplog.clear()
    refused(verify, bearer(es_key, claims(iss="https://stranger.example")))
    assert "issuer=https://stranger.example brand=-" in caplog.text
