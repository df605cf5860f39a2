"""Identity credentials as SD-JWT VCs (@getparafe/verify `verifyIdentityCredential`) and as
credential JWTs (`verifyCredentialJWT`): the broker fixtures' known answers, tampering, and
each refusal with its code."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pactmw.core.encoding import b64url_decode, b64url_encode
from pactmw.core.errors import KeyUnavailable, MalformedInput
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, thumbprint
from pactmw.protocols.parafe import (
    IDENTITY_VCT,
    BrokerKeys,
    IdentityCredential,
    ParafeError,
    StaticBrokerKeys,
    averify_credential_jwt,
    averify_identity_credential,
    verify_credential_jwt,
    verify_identity_credential,
)
from pactmw.protocols.parafe._jwt import sha256_b64url
from tests.parafe.fake_broker import FakeBroker, unreachable_url
from tests.parafe.support import (
    DELETE,
    OPERATOR,
    V2,
    decode,
    fixture,
    fixture_now,
    flip,
    flippable_positions,
    sign,
)
from tests.support.clock import FakeClock

NOW = 1_790_747_151.0
BROKER_DID = "did:web:api.parafe.ai"


def refused(credential: str, keys: Any, **options: Any) -> str:
    options.setdefault("now", NOW)
    with pytest.raises(ParafeError) as caught:
        verify_identity_credential(credential, keys, **options)
    return caught.value.code


# -- the fixtures: known answers -------------------------------------------------------------


def fixture_keys(name: str) -> StaticBrokerKeys:
    return StaticBrokerKeys(fixture(name)["jwks"])


def test_v2_fixture_credential_verifies_with_its_disclosures() -> None:
    data = fixture(V2)
    checked = verify_identity_credential(
        data["credential_sd_jwt"], fixture_keys(V2), now=fixture_now(V2)
    )
    assert isinstance(checked, IdentityCredential)
    assert checked.format == "sd-jwt"
    assert checked.key_id == "aSWWor4s_GVEzOXRVI7XqMcEzj5WYpGpzqoaORAmpPI"
    assert checked.disclosed == ("owner", "owner_id")
    assert checked.claims["owner"] == "Fixture Owner"
    assert checked.claims["owner_id"] == "prf_user_7fb1a9376b"
    assert checked.claims["vct"] == IDENTITY_VCT
    assert checked.sub == "did:web:api.parafe.ai:agents:prf_agent_51cd5551"
    assert checked.agent_id == "prf_agent_51cd5551"
    assert checked.claims["agent_name"] == "fixture-customer"
    assert checked.claims["owner_type"] == "personal"
    assert "_sd" not in checked.claims
    assert "_sd_alg" not in checked.claims
    # cnf.jwk is the initiator's key: its thumbprint is the consent token's cnf.jkt.
    assert checked.cnf_jwk is not None
    assert thumbprint(checked.cnf_jwk) == decode(data["consent_token"])[1]["cnf"]["jkt"]
    assert thumbprint(checked.cnf_jwk) == thumbprint(data["initiator_jwk"])


def test_operator_fixture_credential_verifies_with_its_disclosures() -> None:
    data = fixture(OPERATOR)
    checked = verify_identity_credential(
        data["credential_sd_jwt"], fixture_keys(OPERATOR), now=fixture_now(OPERATOR)
    )
    assert checked.key_id == "UjuXQdmwqbjLIDfcB2hmGdWysN4shl36pTTP9J1CYTg"
    assert checked.disclosed == ("principal_name", "principal_ref")
    assert checked.claims["principal_name"] == "Fixture User"
    assert checked.claims["principal_ref"] == "user-fx1"
    assert checked.claims["principal_type"] == "external"
    assert checked.claims["operator_id"] == "prf_org_test_e477dac592"
    assert checked.agent_id == "prf_agent_f2193a80"
    assert checked.cnf_jwk is not None
    assert thumbprint(checked.cnf_jwk) == thumbprint(data["initiator_jwk"])


def test_async_verifies_the_same() -> None:
    data = fixture(V2)
    checked = asyncio.run(
        averify_identity_credential(
            data["credential_sd_jwt"], fixture_keys(V2), now=fixture_now(V2)
        )
    )
    assert checked.disclosed == ("owner", "owner_id")


def test_expected_issuer_is_checked_only_when_given() -> None:
    data = fixture(V2)
    now = fixture_now(V2)
    keys = fixture_keys(V2)
    verify_identity_credential(data["credential_sd_jwt"], keys, now=now, expected_issuer=BROKER_DID)
    assert (
        refused(data["credential_sd_jwt"], keys, now=now, expected_issuer="did:web:other")
        == "ISSUER_MISMATCH"
    )


def test_fixture_expires_at_its_exp_with_no_tolerance_by_default() -> None:
    data = fixture(V2)
    exp = decode(data["credential_sd_jwt"].split("~")[0])[1]["exp"]
    keys = fixture_keys(V2)
    verify_identity_credential(data["credential_sd_jwt"], keys, now=exp - 1)
    assert refused(data["credential_sd_jwt"], keys, now=exp) == "EXPIRED"
    verify_identity_credential(data["credential_sd_jwt"], keys, now=exp, clock_tolerance=1)


# -- tampering with the fixtures -------------------------------------------------------------


@pytest.mark.parametrize("name", [V2, OPERATOR])
def test_every_single_byte_tamper_of_the_issuer_jwt_is_refused(name: str) -> None:
    data = fixture(name)
    keys, now = fixture_keys(name), fixture_now(name)
    credential = data["credential_sd_jwt"]
    jwt = credential.split("~")[0]
    rest = credential[len(jwt) :]
    header_end = jwt.index(".")
    for index in flippable_positions(jwt):
        tampered = flip(jwt, index)
        code = refused(tampered + rest, keys, now=now)
        segment = tampered.split(".")[
            0 if index < header_end else 1 if index < jwt.rindex(".") else 2
        ]
        if index < header_end:
            # An unreadable header, another kid, or a header the signature does not cover.
            assert code in ("MALFORMED", "KEY_NOT_FOUND", "INVALID_SIGNATURE"), index
        elif _strict_b64(segment):
            assert code == "INVALID_SIGNATURE", index
        else:
            assert code == "MALFORMED", index


def _strict_b64(segment: str) -> bool:
    try:
        b64url_decode(segment)
    except MalformedInput:
        return False
    return True


@pytest.mark.parametrize("name", [V2, OPERATOR])
def test_every_single_byte_tamper_of_each_disclosure_is_refused(name: str) -> None:
    data = fixture(name)
    keys, now = fixture_keys(name), fixture_now(name)
    parts = data["credential_sd_jwt"].split("~")
    disclosures = parts[1:-1]
    assert len(disclosures) == 2
    for which, disclosure in enumerate(disclosures):
        for index in range(len(disclosure)):
            changed = list(parts)
            changed[1 + which] = flip(disclosure, index)
            assert refused("~".join(changed), keys, now=now) == "INVALID_SIGNATURE", (which, index)


def test_leaving_disclosures_out_verifies_without_them() -> None:
    data = fixture(V2)
    jwt = data["credential_sd_jwt"].split("~")[0]
    checked = verify_identity_credential(jwt + "~", fixture_keys(V2), now=fixture_now(V2))
    assert checked.disclosed == ()
    assert "owner" not in checked.claims


def test_a_trailing_key_binding_jwt_is_not_checked() -> None:
    data = fixture(V2)
    checked = verify_identity_credential(
        data["credential_sd_jwt"] + "not.a.kbjwt", fixture_keys(V2), now=fixture_now(V2)
    )
    assert checked.disclosed == ("owner", "owner_id")


@pytest.mark.parametrize("credential", ["", "~", "abc", "~WyJ4Il0~", 42, None])
def test_not_an_sd_jwt_is_malformed(credential: Any) -> None:
    assert refused(credential, fixture_keys(V2)) == "MALFORMED"


# -- minted credentials: one check at a time -------------------------------------------------


def disclosure(salt: str, name: str, value: Any) -> str:
    return b64url_encode(json.dumps([salt, name, value]).encode())


class Issuer:
    """A throwaway broker issuing identity credentials."""

    def __init__(self) -> None:
        self.key = generate_private_jwk("ES256", kid="cred-test-kid")
        self.keys = StaticBrokerKeys({"keys": [self.key.public.to_dict()]})

    def issue(
        self,
        disclosures: list[str] | None = None,
        *,
        committed: list[str] | None = None,
        header: dict[str, Any] | None = None,
        key: PrivateJWK | None = None,
        **overrides: Any,
    ) -> str:
        disclosures = (
            [disclosure("c2FsdDE", "owner", "Ada"), disclosure("c2FsdDI", "owner_id", "prf_user_1")]
            if disclosures is None
            else disclosures
        )
        claims: dict[str, Any] = {
            "vct": IDENTITY_VCT,
            "sub": "did:web:api.parafe.ai:agents:prf_agent_ada00001",
            "agent_id": "prf_agent_ada00001",
            "identity_assurance": "registered",
            "verification_tier": "unverified",
            "_sd_alg": "sha-256",
            "_sd": [sha256_b64url(d) for d in disclosures] if committed is None else committed,
            "iss": BROKER_DID,
            "iat": int(NOW) - 10,
            "exp": int(NOW) + 1000,
        }
        for name, value in overrides.items():
            if value is DELETE:
                claims.pop(name, None)
            else:
                claims[name] = value
        head = (
            {"alg": "ES256", "kid": f"{BROKER_DID}#{self.key.kid}", "typ": "dc+sd-jwt"}
            if header is None
            else header
        )
        return "~".join([sign(claims, key or self.key, head), *disclosures, ""])


def test_a_minted_credential_verifies() -> None:
    issuer = Issuer()
    checked = verify_identity_credential(issuer.issue(), issuer.keys, now=NOW)
    assert dict(checked.claims)["owner"] == "Ada"
    assert checked.key_id == "cred-test-kid"


def test_the_did_before_the_kid_fragment_is_not_checked() -> None:
    issuer = Issuer()
    header = {"alg": "ES256", "kid": f"did:web:other#{issuer.key.kid}", "typ": "dc+sd-jwt"}
    verify_identity_credential(issuer.issue(header=header), issuer.keys, now=NOW)


def test_a_disclosure_not_in_sd_is_an_invalid_signature() -> None:
    issuer = Issuer()
    stray = disclosure("c2FsdDM", "nickname", "Countess")
    committed = [sha256_b64url(disclosure("c2FsdDE", "owner", "Ada"))]
    credential = issuer.issue([disclosure("c2FsdDE", "owner", "Ada"), stray], committed=committed)
    assert refused(credential, issuer.keys) == "INVALID_SIGNATURE"


def test_no_sd_at_all_refuses_any_disclosure() -> None:
    issuer = Issuer()
    credential = issuer.issue(_sd=DELETE)
    assert refused(credential, issuer.keys) == "INVALID_SIGNATURE"


@pytest.mark.parametrize("name", ["agent_id", "vct", "iss", "toString", "__proto__"])
def test_a_disclosure_that_would_replace_a_claim_is_malformed(name: str) -> None:
    issuer = Issuer()
    credential = issuer.issue([disclosure("c2FsdDE", name, "impostor")])
    assert refused(credential, issuer.keys) == "MALFORMED"


def test_the_same_claim_disclosed_twice_is_malformed() -> None:
    issuer = Issuer()
    credential = issuer.issue(
        [disclosure("c2FsdDE", "owner", "Ada"), disclosure("c2FsdDI", "owner", "Eve")]
    )
    assert refused(credential, issuer.keys) == "MALFORMED"


@pytest.mark.parametrize(
    "raw",
    [
        b'["salt","owner"]',
        b'["salt",1,"x"]',
        b'{"salt":"owner"}',
        b'["salt","owner","x","extra"]',
        b"not json",
    ],
)
def test_a_committed_disclosure_that_is_not_salt_name_value_is_malformed(raw: bytes) -> None:
    issuer = Issuer()
    credential = issuer.issue([b64url_encode(raw)])
    assert refused(credential, issuer.keys) == "MALFORMED"


@pytest.mark.parametrize("vct", ["https://parafe.ai/vct/agent-identity/2", "", None, ["x"], DELETE])
def test_wrong_vct_is_malformed(vct: Any) -> None:
    issuer = Issuer()
    assert refused(issuer.issue(vct=vct), issuer.keys) == "MALFORMED"


@pytest.mark.parametrize("sd_alg", ["sha-512", "SHA-256", None, 1])
def test_wrong_sd_alg_is_malformed(sd_alg: Any) -> None:
    issuer = Issuer()
    assert refused(issuer.issue(_sd_alg=sd_alg), issuer.keys) == "MALFORMED"


def test_no_sd_alg_means_sha_256() -> None:
    issuer = Issuer()
    verify_identity_credential(issuer.issue(_sd_alg=DELETE), issuer.keys, now=NOW)


@pytest.mark.parametrize("typ", ["JWT", "vc+sd-jwt", "parafe-session-receipt+jwt", None])
def test_wrong_typ_is_malformed(typ: str | None) -> None:
    issuer = Issuer()
    header: dict[str, Any] = {"alg": "ES256", "kid": f"{BROKER_DID}#{issuer.key.kid}"}
    if typ is not None:
        header["typ"] = typ
    assert refused(issuer.issue(header=header), issuer.keys) == "MALFORMED"


def test_typ_is_compared_as_jose_does() -> None:
    issuer = Issuer()
    header = {
        "alg": "ES256",
        "kid": f"{BROKER_DID}#{issuer.key.kid}",
        "typ": "application/DC+SD-JWT",
    }
    verify_identity_credential(issuer.issue(header=header), issuer.keys, now=NOW)


@pytest.mark.parametrize("kid", [None, "", f"{BROKER_DID}#"])
def test_no_kid_is_key_not_found(kid: str | None) -> None:
    issuer = Issuer()
    header: dict[str, Any] = {"alg": "ES256", "typ": "dc+sd-jwt"}
    if kid is not None:
        header["kid"] = kid
    assert refused(issuer.issue(header=header), issuer.keys) == "KEY_NOT_FOUND"


def test_unknown_kid_is_key_not_found() -> None:
    issuer = Issuer()
    header = {"alg": "ES256", "kid": f"{BROKER_DID}#someone-else", "typ": "dc+sd-jwt"}
    assert refused(issuer.issue(header=header), issuer.keys) == "KEY_NOT_FOUND"


def test_signed_by_another_key_with_the_same_kid_is_an_invalid_signature() -> None:
    issuer = Issuer()
    stranger = generate_private_jwk("ES256", kid=issuer.key.kid)
    assert refused(issuer.issue(key=stranger), issuer.keys) == "INVALID_SIGNATURE"


def test_eddsa_is_refused() -> None:
    issuer = Issuer()
    ed = generate_private_jwk("EdDSA", kid="cred-ed-kid")
    header = {"alg": "EdDSA", "kid": f"{BROKER_DID}#cred-ed-kid", "typ": "dc+sd-jwt"}
    keys = StaticBrokerKeys({"keys": [issuer.key.public.to_dict(), ed.public.to_dict()]})
    assert refused(issuer.issue(header=header, key=ed), keys) == "INVALID_SIGNATURE"


def test_expired_and_not_yet_valid() -> None:
    issuer = Issuer()
    assert refused(issuer.issue(exp=int(NOW)), issuer.keys) == "EXPIRED"
    assert refused(issuer.issue(exp=int(NOW) - 100), issuer.keys) == "EXPIRED"
    assert refused(issuer.issue(nbf=int(NOW) + 5), issuer.keys) == "NOT_YET_VALID"
    verify_identity_credential(
        issuer.issue(exp=int(NOW) - 3), issuer.keys, now=NOW, clock_tolerance=5
    )


def test_expiry_is_checked_after_the_signature() -> None:
    issuer = Issuer()
    stranger = generate_private_jwk("ES256", kid=issuer.key.kid)
    credential = issuer.issue(key=stranger, exp=int(NOW) - 100)
    assert refused(credential, issuer.keys) == "INVALID_SIGNATURE"


def test_a_bad_clock_tolerance_is_a_programming_error() -> None:
    issuer = Issuer()
    with pytest.raises(ValueError):
        verify_identity_credential(issuer.issue(), issuer.keys, now=NOW, clock_tolerance=-1)
    with pytest.raises(TypeError):
        verify_identity_credential(issuer.issue(), issuer.keys, now=NOW, clock_tolerance=1.5)  # type: ignore[arg-type]


class _Unreachable(StaticBrokerKeys):
    def broker_keys(self, kid: str | None, alg: str) -> Any:
        raise KeyUnavailable("jwks_unavailable", "no keys could be fetched")


def test_a_jwks_that_cannot_be_fetched_is_key_fetch_failed() -> None:
    issuer = Issuer()
    assert refused(issuer.issue(), _Unreachable({"keys": []})) == "KEY_FETCH_FAILED"


# -- with BrokerKeys over HTTP ---------------------------------------------------------------

POLICY = FetchPolicy(allow_http_on_loopback=True, timeout=2.0)


def test_broker_keys_refetch_once_for_a_rotated_kid() -> None:
    issuer = Issuer()
    clock = FakeClock(1000.0)
    with FakeBroker() as broker:
        broker.jwks = {"keys": [issuer.key.public.to_dict()]}
        keys = BrokerKeys(broker.url, fetch_policy=POLICY, clock=clock)
        verify_identity_credential(issuer.issue(), keys, now=NOW)
        rotated = generate_private_jwk("ES256", kid="rotated")
        broker.jwks = {"keys": [issuer.key.public.to_dict(), rotated.public.to_dict()]}
        header = {"alg": "ES256", "kid": f"{BROKER_DID}#rotated", "typ": "dc+sd-jwt"}
        clock.advance(61)
        checked = asyncio.run(
            averify_identity_credential(issuer.issue(header=header, key=rotated), keys, now=NOW)
        )
        assert checked.key_id == "rotated"
        assert broker.hits["/.well-known/jwks.json"] == 2
        never = {"alg": "ES256", "kid": f"{BROKER_DID}#never", "typ": "dc+sd-jwt"}
        assert refused(issuer.issue(header=never), keys) == "KEY_NOT_FOUND"


def test_an_unreachable_broker_is_key_fetch_failed() -> None:
    issuer = Issuer()
    keys = BrokerKeys(unreachable_url(), fetch_policy=POLICY)
    assert refused(issuer.issue(), keys) == "KEY_FETCH_FAILED"


# -- the credential JWT form (verifyCredentialJWT) -------------------------------------------


def test_v2_fixture_credential_jwt_verifies() -> None:
    data = fixture(V2)
    checked = verify_credential_jwt(data["credential_jwt"], fixture_keys(V2), now=fixture_now(V2))
    assert checked.format == "jwt"
    assert checked.disclosed == ()
    assert checked.key_id == "aSWWor4s_GVEzOXRVI7XqMcEzj5WYpGpzqoaORAmpPI"
    assert checked.sub == "prf_agent_51cd5551"
    assert checked.claims["name"] == "fixture-customer"
    assert checked.claims["owner"] == "Fixture Owner"
    assert checked.claims["owner_id"] == "prf_user_7fb1a9376b"
    assert checked.claims["pub_key_thumbprint"] == (
        "274cc5607e7bdb2a35dea718588aa09ea47607f0531653dc26e01ed26e0a29da"
    )
    assert checked.cnf_jwk is None


def test_operator_fixture_credential_jwt_verifies() -> None:
    data = fixture(OPERATOR)
    checked = asyncio.run(
        averify_credential_jwt(
            data["credential_jwt"], fixture_keys(OPERATOR), now=fixture_now(OPERATOR)
        )
    )
    assert checked.sub == "prf_agent_f2193a80"
    assert checked.claims["principal_name"] == "Fixture User"
    assert checked.claims["principal_ref"] == "user-fx1"
    assert checked.claims["operator_id"] == "prf_org_test_e477dac592"


def jwt_refused(token: Any, keys: Any, **options: Any) -> str:
    options.setdefault("now", NOW)
    with pytest.raises(ParafeError) as caught:
        verify_credential_jwt(token, keys, **options)
    return caught.value.code


def test_every_single_byte_tamper_of_the_credential_jwt_is_refused() -> None:
    data = fixture(V2)
    keys, now = fixture_keys(V2), fixture_now(V2)
    token = data["credential_jwt"]
    header_end = token.index(".")
    for index in flippable_positions(token):
        code = jwt_refused(flip(token, index), keys, now=now)
        if index < header_end:
            assert code in ("MALFORMED", "KEY_NOT_FOUND", "INVALID_SIGNATURE"), index
        else:
            assert code in ("INVALID_SIGNATURE", "MALFORMED"), index
            segment = flip(token, index).split(".")[1 if index < token.rindex(".") else 2]
            assert (code == "INVALID_SIGNATURE") == _strict_b64(segment), index


def credential_claims(**overrides: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "sub": "prf_agent_ada00001",
        "name": "ada",
        "identity_assurance": "registered",
        "verification_tier": "unverified",
        "pub_key_thumbprint": "ab" * 32,
        "iat": int(NOW) - 10,
        "exp": int(NOW) + 1000,
        "iss": "parafe-trust-broker",
    }
    for name, value in overrides.items():
        if value is DELETE:
            claims.pop(name, None)
        else:
            claims[name] = value
    return claims


def credential_jwt(issuer: Issuer, header: dict[str, Any] | None = None, **overrides: Any) -> str:
    head = {"alg": "ES256", "kid": issuer.key.kid} if header is None else header
    return sign(credential_claims(**overrides), issuer.key, head)


def test_a_minted_credential_jwt_verifies_with_a_plain_or_did_url_kid() -> None:
    issuer = Issuer()
    verify_credential_jwt(credential_jwt(issuer), issuer.keys, now=NOW)
    header = {"alg": "ES256", "kid": f"{BROKER_DID}#{issuer.key.kid}"}
    verify_credential_jwt(credential_jwt(issuer, header), issuer.keys, now=NOW)


def test_a_consent_token_is_the_wrong_artifact_type() -> None:
    issuer = Issuer()
    token = credential_jwt(issuer, token_type="consent")
    assert jwt_refused(token, issuer.keys) == "WRONG_ARTIFACT_TYPE"


@pytest.mark.parametrize(
    "name",
    ["sub", "name", "identity_assurance", "verification_tier", "pub_key_thumbprint", "iat", "exp"],
)
@pytest.mark.parametrize("value", [DELETE, None])
def test_a_missing_required_claim_is_malformed(name: str, value: Any) -> None:
    issuer = Issuer()
    assert jwt_refused(credential_jwt(issuer, **{name: value}), issuer.keys) == "MALFORMED"


@pytest.mark.parametrize("name", ["sub", "pub_key_thumbprint"])
def test_sub_and_thumbprint_must_be_strings(name: str) -> None:
    issuer = Issuer()
    overrides: dict[str, Any] = {name: 7}
    assert jwt_refused(credential_jwt(issuer, **overrides), issuer.keys) == "MALFORMED"


@pytest.mark.parametrize("iss", ["did:web:api.parafe.ai", None, DELETE])
def test_the_issuer_must_be_the_broker(iss: Any) -> None:
    issuer = Issuer()
    assert jwt_refused(credential_jwt(issuer, iss=iss), issuer.keys) == "ISSUER_MISMATCH"


def test_another_expected_issuer() -> None:
    issuer = Issuer()
    token = credential_jwt(issuer, iss="other-broker")
    verify_credential_jwt(token, issuer.keys, now=NOW, expected_issuer="other-broker")


def test_credential_jwt_times_and_keys() -> None:
    issuer = Issuer()
    assert jwt_refused(credential_jwt(issuer, exp=int(NOW)), issuer.keys) == "EXPIRED"
    assert jwt_refused(credential_jwt(issuer, nbf=int(NOW) + 5), issuer.keys) == "NOT_YET_VALID"
    no_kid = credential_jwt(issuer, {"alg": "ES256"})
    assert jwt_refused(no_kid, issuer.keys) == "KEY_NOT_FOUND"
    unknown = credential_jwt(issuer, {"alg": "ES256", "kid": "someone-else"})
    assert jwt_refused(unknown, issuer.keys) == "KEY_NOT_FOUND"
    assert jwt_refused(credential_jwt(issuer), _Unreachable({"keys": []})) == "KEY_FETCH_FAILED"
    assert jwt_refused("not-a-jwt", issuer.keys) == "MALFORMED"
    assert jwt_refused(None, issuer.keys) == "MALFORMED"


def test_a_credential_jwt_signed_with_the_retired_eddsa_key_is_refused() -> None:
    # The reference refuses EdDSA broker tokens since 2026-10-09 (the key is retired).
    ed = generate_private_jwk("EdDSA", kid="retired-ed")
    keys = StaticBrokerKeys({"keys": [ed.public.to_dict()]})
    token = sign(credential_claims(), ed, {"alg": "EdDSA", "kid": "retired-ed"})
    assert jwt_refused(token, keys) == "INVALID_SIGNATURE"


def test_the_sd_jwt_and_the_jwt_are_not_interchangeable() -> None:
    data = fixture(V2)
    keys, now = fixture_keys(V2), fixture_now(V2)
    # The SD-JWT's issuer JWT is from did:web:api.parafe.ai, not parafe-trust-broker.
    issuer_jwt = data["credential_sd_jwt"].split("~")[0]
    assert jwt_refused(issuer_jwt, keys, now=now) == "ISSUER_MISMATCH"
    # The credential JWT has no typ dc+sd-jwt.
    assert refused(data["credential_jwt"] + "~", keys, now=now) == "MALFORMED"
