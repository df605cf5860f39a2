"""Consent-token verification: the §13 vectors, every single-claim tampering (re-signed with a
test broker key), and the check order of §4 (two failures at once: the earlier one wins)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pactmw.core.encoding import json_dumps
from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.parafe import (
    EXPIRED_CONSENT_TOKEN,
    INVALID_CONSENT_TOKEN,
    INVALID_PROOF,
    MALFORMED_PARAFE_DATA,
    MISSING_PARAFE_EXTENSION,
    SCOPE_VIOLATION,
    WRONG_AUDIENCE,
    ParafeError,
    ParafeVerifier,
    ScopeRequirement,
    StaticBrokerKeys,
    VerifiedConsent,
)
from pactmw.protocols.parafe._errors import iso_time
from tests.parafe.support import (
    DELETE,
    V2,
    Minter,
    decode,
    fixture,
    fixture_now,
    forge_header,
    message,
    sign,
)

NOW = 1_790_741_039.783  # the v2 fixture's "now"
REQUIREMENTS = {
    "place-order": ScopeRequirement(
        permissions=("create_order", "read_menu"),
        minimum_authorization_modality="attested",
        minimum_initiator_proof="pop",
    ),
    "browse": ScopeRequirement(
        permissions=("read_menu",), minimum_authorization_modality="autonomous"
    ),
}


@pytest.fixture
def minter() -> Minter:
    return Minter(NOW)


def verifier(minter: Minter, **options: Any) -> ParafeVerifier:
    options.setdefault("scope_requirements", REQUIREMENTS)
    keys = StaticBrokerKeys(minter.jwks, did_documents=minter.did_documents())
    return ParafeVerifier(agent_id=minter.target_id, keys=keys, clock=lambda: NOW, **options)


def check(
    minter: Minter,
    token: str,
    *,
    proof: str | bool | None = True,
    action: str | None = "create_order",
    session_id: str | None = None,
    **options: Any,
) -> VerifiedConsent:
    if proof is True:
        proof = minter.proof(token)
    msg = message(token, session_id or minter.session_id, proof or None)
    return verifier(minter, **options).verify(msg, action=action)


def code(minter: Minter, token: str, **kwargs: Any) -> str:
    with pytest.raises(ParafeError) as caught:
        check(minter, token, **kwargs)
    return caught.value.code


# -- §13 valid ---------------------------------------------------------------------------------


def test_valid_eddsa_proof_with_mid(minter: Minter) -> None:
    verified = check(minter, minter.token())
    assert verified.proof_verified
    assert verified.claims.scope == "place-order"
    assert verified.claims.target_agent_id == minter.target_id
    assert verified.session_id == minter.session_id


def test_valid_p256_initiator(minter: Minter) -> None:
    minter.initiator = generate_private_jwk("ES256")
    token = minter.token()
    assert decode(minter.proof(token))[0]["alg"] == "ES256"
    assert check(minter, token).proof_verified


def test_valid_proof_without_mid(minter: Minter) -> None:
    token = minter.token()
    assert check(minter, token, proof=minter.proof(token, mid=DELETE)).proof_verified


def test_valid_without_proof_when_not_required(minter: Minter) -> None:
    verified = check(minter, minter.token(), proof=None, require_proof=False)
    assert not verified.proof_verified


def test_valid_with_parties_and_mandate_refs(minter: Minter) -> None:
    parties = {
        "operator": {"type": "org", "id": "prf_org_p"},
        "principal": {"type": "external", "ref": "u-1"},
    }
    refs = [{"family": "checkout", "closed_jwt": "a.b.c", "sd_hash": "h"}]
    token = minter.token(
        initiator_parties=parties, mandate_refs=refs, authorization_modality="verified"
    )
    claims = check(minter, token).claims
    assert claims.initiator_parties == parties
    assert claims.mandate_refs == refs
    assert dict(claims.claims) == decode(token)[1]


def test_valid_modality_above_minimum(minter: Minter) -> None:
    assert check(minter, minter.token(authorization_modality="verified")).proof_verified


def test_valid_exp_one_second_ahead(minter: Minter) -> None:
    # jose's clock is whole seconds: now = 1790741039 here.
    assert check(minter, minter.token(exp=int(NOW) + 1)).proof_verified


def test_valid_without_action_or_requirements(minter: Minter) -> None:
    verified = check(minter, minter.token(scope="any"), action=None, scope_requirements=None)
    assert verified.action is None


def test_valid_async(minter: Minter) -> None:
    token = minter.token()
    msg = message(token, minter.session_id, minter.proof(token))
    verified = asyncio.run(verifier(minter).averify(msg, action="create_order"))
    assert verified.proof_verified


# -- §13 invalid token ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    ["", "garbage", "a.b", "a.b.c.d", "...", "eyJhbGciOiJFUzI1NiJ9.e30.", "x" * 20000, "é.b.c"],
)
def test_not_a_token(minter: Minter, token: str) -> None:
    assert code(minter, token) == INVALID_CONSENT_TOKEN


def test_signed_by_another_key_with_the_same_kid(minter: Minter) -> None:
    impostor = generate_private_jwk("ES256", kid=minter.broker.kid)
    assert code(minter, minter.token(key=impostor)) == INVALID_CONSENT_TOKEN


@pytest.mark.parametrize("kid_in_header", [True, False], ids=["kid", "no-kid"])
def test_two_broker_keys_that_both_fit_are_ambiguous(minter: Minter, kid_in_header: bool) -> None:
    # §4 step 9: jose's local key set refuses more than one candidate, even when the genuine
    # key is among them (a JWKS that lists a second key under the broker's kid must not let
    # either key sign, nor a token without kid pick whichever verifies).
    twin = generate_private_jwk("ES256", kid=minter.broker.kid)
    jwks = {"keys": [*minter.jwks["keys"], {**twin.public.to_dict(), "use": "sig"}]}
    header = {"alg": "ES256", "kid": minter.broker.kid} if kid_in_header else {"alg": "ES256"}
    token = minter.token(header=header)
    keys = StaticBrokerKeys(jwks, did_documents=minter.did_documents())
    ver = ParafeVerifier(agent_id=minter.target_id, keys=keys, clock=lambda: NOW)
    with pytest.raises(ParafeError) as caught:
        ver.verify(message(token, minter.session_id, minter.proof(token)))
    assert caught.value.code == INVALID_CONSENT_TOKEN
    assert "more than one broker key" in str(caught.value)


def test_eddsa_token_by_the_retired_key_is_refused() -> None:
    data = fixture(V2)
    retired = generate_private_jwk("EdDSA", kid="retired-ed")
    minter = Minter(NOW)
    jwks = {
        "keys": [
            *minter.jwks["keys"],
            {**retired.public.to_dict(), "use": "sig", "status": "retired"},
        ]
    }
    token = minter.token(key=retired, header={"alg": "EdDSA", "kid": "retired-ed"})
    keys = StaticBrokerKeys(jwks, did_documents=minter.did_documents())
    ver = ParafeVerifier(agent_id=minter.target_id, keys=keys, clock=lambda: NOW)
    with pytest.raises(ParafeError) as caught:
        ver.verify(message(token, minter.session_id, minter.proof(token)))
    assert caught.value.code == INVALID_CONSENT_TOKEN
    # The real fixture JWKS lists its retired Ed25519 key too; it signs nothing we accept.
    assert [k["status"] for k in data["jwks"]["keys"]] == ["active", "retired"]


def test_a_retired_es256_key_still_verifies() -> None:
    # The JWKS `status` is ignored (§4 step 9, §12 item 12).
    minter = Minter(NOW)
    jwks = {"keys": [{**minter.broker.public.to_dict(), "status": "retired"}]}
    token = minter.token()
    keys = StaticBrokerKeys(jwks, did_documents=minter.did_documents())
    ver = ParafeVerifier(agent_id=minter.target_id, keys=keys, clock=lambda: NOW)
    assert ver.verify(message(token, minter.session_id, minter.proof(token))).proof_verified


def test_key_selection_follows_jose(minter: Minter) -> None:
    token = minter.token()
    entry = minter.broker.public.to_dict()
    keys_doc: dict[str, Any]
    for keys_doc in (
        {"keys": []},
        {"keys": [{**entry, "kid": "other"}]},  # unknown kid
        {"keys": [{**entry, "use": "enc"}]},
        {"keys": [{**entry, "key_ops": ["sign"]}]},
        {"keys": [{**entry, "alg": "ES384"}]},
        {"keys": [entry, {**generate_private_jwk("ES256").public.to_dict(), "kid": entry["kid"]}]},
    ):
        ver = ParafeVerifier(
            agent_id=minter.target_id, keys=StaticBrokerKeys(keys_doc), clock=lambda: NOW
        )
        with pytest.raises(ParafeError) as caught:
            ver.verify_token(token)
        assert caught.value.code == INVALID_CONSENT_TOKEN, keys_doc
    ok = {"keys": [{**entry, "key_ops": ["verify"]}]}
    ParafeVerifier(
        agent_id=minter.target_id, keys=StaticBrokerKeys(ok), clock=lambda: NOW
    ).verify_token(token)
    # A header without a kid is matched against every ES256 key (jose's local key set).
    no_kid = minter.token(header={"alg": "ES256"})
    ParafeVerifier(
        agent_id=minter.target_id, keys=StaticBrokerKeys(ok), clock=lambda: NOW
    ).verify_token(no_kid)


@pytest.mark.parametrize("key_ops", ["verify", "sign", {"verify": True}, None])
def test_key_ops_that_is_not_an_array_is_ignored_as_jose_does(minter: Minter, key_ops: Any) -> None:
    # jose (the reference's library) applies `key_ops` only when it is an array.
    token = minter.token()
    jwks = {"keys": [{**minter.broker.public.to_dict(), "key_ops": key_ops}]}
    ParafeVerifier(
        agent_id=minter.target_id, keys=StaticBrokerKeys(jwks), clock=lambda: NOW
    ).verify_token(token)


def test_a_symmetric_key_beside_the_broker_key_is_ignored(minter: Minter) -> None:
    # RFC 7517 §5; jose never picks an `oct` key for ES256 either.
    token = minter.token()
    oct_key = {"kty": "oct", "k": "c2VjcmV0", "kid": minter.broker.kid}
    jwks = {"keys": [oct_key, *minter.jwks["keys"]]}
    ParafeVerifier(
        agent_id=minter.target_id, keys=StaticBrokerKeys(jwks), clock=lambda: NOW
    ).verify_token(token)


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        (b"not json", "invalid JSON"),
        (b'["parafe-trust-broker"]', "not a JSON object"),
        (b'{"iss":"parafe-trust-broker","iss":"parafe-trust-broker"}', "duplicate key"),
        (b'{"iss":"parafe-trust-broker","exp":NaN}', "NaN"),
    ],
)
def test_a_well_signed_payload_that_is_not_a_json_object_is_not_a_bad_signature(
    minter: Minter, payload: bytes, detail: str
) -> None:
    # The signature verifies; what fails is the claims set (jose: "JWT Claims Set must be a
    # top-level JSON object"), and the message must say so rather than blame the signature.
    token = sign(payload, minter.broker, {"alg": "ES256", "kid": minter.broker.kid})
    with pytest.raises(ParafeError) as caught:
        verifier(minter).verify_token(token)
    assert caught.value.code == INVALID_CONSENT_TOKEN
    assert "signature" not in caught.value.message
    assert "JWT Claims Set must be a top-level JSON object" in caught.value.message
    assert detail in caught.value.message


@pytest.mark.parametrize(
    "header",
    [
        {"alg": "ES256", "kid": "test-broker-kid", "crit": ["exp"], "exp": 1},
        {"alg": "none", "kid": "test-broker-kid"},
        {"alg": "HS256", "kid": "test-broker-kid"},
        {"alg": "RS256", "kid": "test-broker-kid"},
        {"kid": "test-broker-kid"},
        {"alg": "ES256", "kid": 5},
    ],
)
def test_bad_headers(minter: Minter, header: dict[str, Any]) -> None:
    assert code(minter, minter.token(header=header)) == INVALID_CONSENT_TOKEN
    assert code(minter, forge_header(minter.token(), header)) == INVALID_CONSENT_TOKEN


def test_expired_exactly_at_exp(minter: Minter) -> None:
    token = minter.token(exp=int(NOW))
    with pytest.raises(ParafeError) as caught:
        check(minter, token)
    assert caught.value.code == EXPIRED_CONSENT_TOKEN
    assert caught.value.expired_at == int(NOW)
    assert caught.value.message == (
        f"Parafe consent token expired at {iso_time(int(NOW))}. Request a new token from the "
        "Parafe broker."
    )
    assert iso_time(int(NOW)) == "2026-09-30T04:03:59.000Z"


def test_huge_exp_is_infinity_and_valid(minter: Minter) -> None:
    # JSON's 1e400 parses as Infinity, in JavaScript and here: never expired.
    body = json_dumps(minter.claims(exp=123)).replace(b'"exp":123', b'"exp":1e400')
    token = sign(body, minter.broker, {"alg": "ES256", "kid": minter.broker.kid})
    assert check(minter, token).claims.exp == float("inf")
    body = json_dumps(minter.claims(exp=123)).replace(b'"exp":123', b'"exp":-1e400')
    token = sign(body, minter.broker, {"alg": "ES256", "kid": minter.broker.kid})
    with pytest.raises(ParafeError) as caught:
        check(minter, token)
    assert caught.value.code == EXPIRED_CONSENT_TOKEN
    assert "-inf" in caught.value.message


def test_integers_past_the_float_range(minter: Minter) -> None:
    assert code(minter, minter.token(exp=-(10**400))) == EXPIRED_CONSENT_TOKEN
    assert check(minter, minter.token(exp=10**400)).claims.exp == float("inf")
    assert check(minter, minter.token(iat=-(10**400))).proof_verified
    token = minter.token()
    assert code(minter, token, proof=minter.proof(token, iat=10**400)) == INVALID_PROOF
    assert code(minter, token, proof=minter.proof(token, iat=-(10**400))) == INVALID_PROOF


def test_session_mismatch(minter: Minter) -> None:
    assert code(minter, minter.token(), session_id="sess_other") == INVALID_CONSENT_TOKEN


def test_refused_errors_carry_the_consent(minter: Minter) -> None:
    token = minter.token(target_agent_id="prf_agent_other")
    with pytest.raises(ParafeError) as caught:
        check(minter, token)
    assert caught.value.consent is not None
    assert caught.value.consent.token == token
    assert "prf_agent_other" in caught.value.message


# -- every single-claim tampering ------------------------------------------------------------

OK = "ok"
TAMPERED_CLAIMS: list[tuple[str, Any, str]] = [
    ("iss", "someone-else", INVALID_CONSENT_TOKEN),
    ("iss", DELETE, INVALID_CONSENT_TOKEN),
    ("iss", None, INVALID_CONSENT_TOKEN),
    ("iss", ["parafe-trust-broker"], INVALID_CONSENT_TOKEN),
    ("iat", "1790741039", INVALID_CONSENT_TOKEN),
    ("iat", True, INVALID_CONSENT_TOKEN),
    ("iat", DELETE, OK),  # iat is not required
    ("iat", 2_000_000_000, OK),  # nor checked for being in the future
    ("exp", int(NOW), EXPIRED_CONSENT_TOKEN),
    ("exp", int(NOW) - 3600, EXPIRED_CONSENT_TOKEN),
    ("exp", "soon", INVALID_CONSENT_TOKEN),
    ("exp", None, INVALID_CONSENT_TOKEN),
    ("exp", DELETE, OK),  # exp is not required (§12 item 3)
    ("nbf", int(NOW) + 1, INVALID_CONSENT_TOKEN),
    ("nbf", int(NOW), OK),
    ("nbf", "x", INVALID_CONSENT_TOKEN),
    ("ver", 1, OK),  # not checked (§12 item 3)
    ("ver", DELETE, OK),
    ("jti", DELETE, OK),
    ("token_type", "session", INVALID_CONSENT_TOKEN),
    ("token_type", DELETE, INVALID_CONSENT_TOKEN),
    ("token_type", ["consent"], INVALID_CONSENT_TOKEN),
    ("scope", 5, INVALID_CONSENT_TOKEN),
    ("scope", DELETE, INVALID_CONSENT_TOKEN),
    ("scope", "refunds", SCOPE_VIOLATION),  # undeclared
    ("scope", "toString", SCOPE_VIOLATION),
    ("scope", "__proto__", SCOPE_VIOLATION),
    ("scope", "browse", SCOPE_VIOLATION),  # create_order is not in browse
    ("permissions", "create_order", INVALID_CONSENT_TOKEN),
    ("permissions", {"0": "create_order"}, INVALID_CONSENT_TOKEN),
    ("permissions", DELETE, INVALID_CONSENT_TOKEN),
    ("permissions", ["create_order", "issue_refund"], SCOPE_VIOLATION),  # outside the scope
    ("permissions", ["read_menu"], SCOPE_VIOLATION),  # action not permitted
    ("permissions", [], SCOPE_VIOLATION),
    ("permissions", ["create_order", 1], SCOPE_VIOLATION),
    ("exclusions", DELETE, INVALID_CONSENT_TOKEN),  # legacy `excluded` only (§12 item 1)
    ("exclusions", "issue_refund", INVALID_CONSENT_TOKEN),
    ("exclusions", None, INVALID_CONSENT_TOKEN),
    ("exclusions", ["create_order"], SCOPE_VIOLATION),  # excluded action
    ("exclusions", [], OK),
    ("excluded", ["create_order"], OK),  # the legacy claim is ignored
    ("excluded", DELETE, OK),
    ("session_id", "sess_other", INVALID_CONSENT_TOKEN),
    ("session_id", 5, INVALID_CONSENT_TOKEN),
    ("session_id", DELETE, INVALID_CONSENT_TOKEN),
    ("target_agent_id", "prf_agent_other", WRONG_AUDIENCE),
    ("target_agent_id", None, WRONG_AUDIENCE),
    ("target_agent_id", DELETE, WRONG_AUDIENCE),
    ("target_agent_id", ["prf_agent_shop0001"], WRONG_AUDIENCE),
    ("authorization_modality", "autonomous", SCOPE_VIOLATION),  # below the minimum
    ("authorization_modality", "delegated", OK),
    ("authorization_modality", "verified", OK),
    ("authorization_modality", "bogus", SCOPE_VIOLATION),
    ("authorization_modality", ["verified"], SCOPE_VIOLATION),
    ("authorization_modality", DELETE, SCOPE_VIOLATION),
    ("initiator_proof", "credential", SCOPE_VIOLATION),  # minimum_initiator_proof: pop
    ("initiator_proof", DELETE, SCOPE_VIOLATION),
    ("initiator_proof_at", DELETE, OK),
    ("initiator_agent_id", "prf_agent_other", OK),  # `sub` names the initiator
    ("parent_token_id", "tok_parent", OK),
    ("cnf", DELETE, INVALID_PROOF),
    ("cnf", {"jkt": "RkHy1TuGaxUzpIof7aW7T-LRmBGATh8avnFo2bFsuJk"}, INVALID_PROOF),
    ("cnf", {"jkt": ""}, INVALID_PROOF),
    ("cnf", "jkt", INVALID_PROOF),
    ("sub", "prf_agent_stranger", INVALID_PROOF),  # no DID document for that agent
    ("sub", "", INVALID_PROOF),  # names no initiator (`??` does not skip "")
    ("sub", DELETE, OK),  # falls back to initiator_agent_id
    ("aud", "did:web:api.parafe.ai:agents:prf_agent_other", OK),  # not compared (§12 item 4)
    ("aud", DELETE, OK),  # the proof then has no aud either
]


@pytest.mark.parametrize(("claim", "value", "expected"), TAMPERED_CLAIMS)
def test_single_claim_tampering(minter: Minter, claim: str, value: Any, expected: str) -> None:
    token = minter.token(**{claim: value})
    if expected == OK:
        assert check(minter, token).proof_verified
    else:
        assert code(minter, token) == expected


def test_every_claim_of_the_fixture_is_covered() -> None:
    claims = set(decode(fixture(V2)["consent_token"])[1])
    assert claims <= {claim for claim, _, _ in TAMPERED_CLAIMS}


# -- check order: two failures at once, the earlier check wins -------------------------------

ORDER: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    # (label, token claim overrides, check() options, expected)
    ("expired + bad signature", {"exp": int(NOW) - 1}, {"forge": True}, INVALID_CONSENT_TOKEN),
    ("expired + wrong iss", {"exp": int(NOW) - 1, "iss": "x"}, {}, INVALID_CONSENT_TOKEN),
    (
        "nbf future + expired",
        {"exp": int(NOW) - 1, "nbf": int(NOW) + 10},
        {},
        INVALID_CONSENT_TOKEN,
    ),
    ("iat not a number + expired", {"exp": int(NOW) - 1, "iat": "x"}, {}, INVALID_CONSENT_TOKEN),
    (
        "expired + not consent",
        {"exp": int(NOW) - 1, "token_type": "session"},
        {},
        EXPIRED_CONSENT_TOKEN,
    ),
    (
        "expired + no exclusions",
        {"exp": int(NOW) - 1, "exclusions": DELETE},
        {},
        EXPIRED_CONSENT_TOKEN,
    ),
    (
        "expired + wrong agent",
        {"exp": int(NOW) - 1, "target_agent_id": "x"},
        {},
        EXPIRED_CONSENT_TOKEN,
    ),
    ("type guard + wrong agent", {"scope": 1, "target_agent_id": "x"}, {}, INVALID_CONSENT_TOKEN),
    (
        "no exclusions + wrong agent",
        {"exclusions": DELETE, "target_agent_id": "x"},
        {},
        INVALID_CONSENT_TOKEN,
    ),
    (
        "wrong agent + session mismatch",
        {"target_agent_id": "x", "session_id": "s2"},
        {},
        WRONG_AUDIENCE,
    ),
    ("wrong agent + no proof", {"target_agent_id": "x"}, {"proof": None}, WRONG_AUDIENCE),
    (
        "session mismatch + scope",
        {"session_id": "s2", "scope": "refunds"},
        {},
        INVALID_CONSENT_TOKEN,
    ),
    (
        "scope + excluded action",
        {"scope": "refunds", "exclusions": ["create_order"]},
        {},
        SCOPE_VIOLATION,
    ),
    (
        "forbidden action + no proof",
        {"permissions": ["read_menu"]},
        {"proof": None},
        SCOPE_VIOLATION,
    ),
    (
        "excluded action + bad proof",
        {"exclusions": ["create_order"]},
        {"proof": "a.b.c"},
        SCOPE_VIOLATION,
    ),
    (
        "modality + no cnf",
        {"authorization_modality": "autonomous", "cnf": DELETE},
        {},
        SCOPE_VIOLATION,
    ),
    ("no proof + no cnf", {"cnf": DELETE}, {"proof": None}, INVALID_PROOF),
]


@pytest.mark.parametrize(
    ("label", "claims", "options", "expected"), ORDER, ids=[o[0] for o in ORDER]
)
def test_check_order(
    minter: Minter, label: str, claims: dict[str, Any], options: dict[str, Any], expected: str
) -> None:
    token = minter.token(**claims)
    if options.pop("forge", False):
        token = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    proof: Any = options.pop("proof", True)
    session_id = minter.session_id
    assert code(minter, token, proof=proof, session_id=session_id, **options) == expected


def test_malformed_data_beats_everything(minter: Minter) -> None:
    token = minter.token(exp=int(NOW) - 1)
    msg = message(token, minter.session_id, None, action_receipts=["nope"])
    with pytest.raises(ParafeError) as caught:
        verifier(minter).verify(msg, action="create_order")
    assert caught.value.code == MALFORMED_PARAFE_DATA
    assert caught.value.consent is None
    with pytest.raises(ParafeError) as caught:
        verifier(minter).verify({"messageId": "x"}, action="create_order")
    assert caught.value.code == MISSING_PARAFE_EXTENSION


def test_bare_token_checks_only_what_is_given(minter: Minter) -> None:
    ver = verifier(minter, scope_requirements=None)
    foreign = minter.token(target_agent_id="prf_agent_other", session_id="s9")
    ver.verify_token(foreign, check_agent=False)
    with pytest.raises(ParafeError) as caught:
        ver.verify_token(foreign)
    assert caught.value.code == WRONG_AUDIENCE
    with pytest.raises(ParafeError) as caught:
        ver.verify_token(minter.token(), session_id="s9")
    assert caught.value.code == INVALID_CONSENT_TOKEN
    with pytest.raises(ParafeError) as caught:
        ver.verify_token(minter.token(), action="issue_refund")
    assert caught.value.code == SCOPE_VIOLATION
    assert (
        asyncio.run(ver.averify_token(minter.token(), action="create_order")).scope == "place-order"
    )


def test_fixture_token_wrong_agent_and_late() -> None:
    data = fixture(V2)
    now = fixture_now(V2)
    keys = StaticBrokerKeys(data["jwks"])
    token = data["consent_token"]
    with pytest.raises(ParafeError) as caught:
        ParafeVerifier(agent_id="prf_agent_other", keys=keys, clock=lambda: now).verify_token(token)
    assert caught.value.code == WRONG_AUDIENCE
    assert caught.value.message == (
        'Parafe consent token was issued for agent "prf_agent_57ae4cd0", not "prf_agent_other". '
        "An agent must only accept tokens issued for itself."
    )
    late = ParafeVerifier(agent_id="prf_agent_57ae4cd0", keys=keys, clock=lambda: now + 300)
    with pytest.raises(ParafeError) as caught:
        late.verify_token(token)
    assert caught.value.code == EXPIRED_CONSENT_TOKEN
    # One second earlier it was still valid (exp = iat + 300, whole seconds).
    ParafeVerifier(agent_id="prf_agent_57ae4cd0", keys=keys, clock=lambda: now + 299).verify_token(
        token
    )
