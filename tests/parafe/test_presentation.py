"""`verify_presentation_proof`: a presentation proof checked on its own (the reference's
`verifyPresentationProof`, parafe-verifier.md §6), with the reference's code, messages and
order, and the same answers as the proof check inside `ParafeVerifier`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pactmw.core.jwk import generate_private_jwk, import_public_jwk
from pactmw.protocols.parafe import (
    INVALID_PROOF,
    ConsentClaims,
    MemoryReplayMemory,
    ParafeError,
    ParafeVerifier,
    ProofClaims,
    StaticBrokerKeys,
    StoreReplayMemory,
    averify_presentation_proof,
    verify_presentation_proof,
)
from pactmw.protocols.parafe._jwt import sha256_b64url
from pactmw.store import MemoryStore
from tests.parafe.support import (
    DELETE,
    NOW,
    PROOF_TAMPERING,
    SECONDS,
    V2,
    V2_AGENT,
    Minter,
    decode,
    did_document,
    fixture,
    fixture_now,
    flip,
    flippable_positions,
    message,
)

PREFIX = "Parafe presentation proof rejected: "


@pytest.fixture
def minter() -> Minter:
    return Minter(NOW)


def v2() -> tuple[dict[str, Any], float, dict[str, Any]]:
    data = fixture(V2)
    return data, fixture_now(V2), decode(data["consent_token"])[1]


def refusal(proof: Any, token: str, claims: Any, **options: Any) -> str:
    """The message of the INVALID_PROOF refusal, without its prefix."""
    options.setdefault("replay", MemoryReplayMemory())
    with pytest.raises(ParafeError) as caught:
        verify_presentation_proof(proof, token, claims, **options)
    assert caught.value.code == INVALID_PROOF
    assert caught.value.message.startswith(PREFIX)
    return caught.value.message[len(PREFIX) :]


def minted(minter: Minter, **options: Any) -> dict[str, Any]:
    """The options for a minted token's proof: its initiator's key, now, a replay memory."""
    return {
        "initiator_key": minter.initiator.public,
        "now": NOW,
        "replay": MemoryReplayMemory(),
        **options,
    }


# -- the broker's proof verifies ---------------------------------------------------------------


def test_the_fixture_proof_verifies_with_the_initiator_key() -> None:
    data, now, claims = v2()
    checked = verify_presentation_proof(
        data["presentation_proof"],
        data["consent_token"],
        claims,
        initiator_key=data["initiator_jwk"],
        message_id="msg-fixture-1",
        expected_audience=data["target_did"],
        replay=MemoryReplayMemory(),
        now=now,
    )
    assert isinstance(checked, ProofClaims)
    assert checked.mid == "msg-fixture-1"
    assert checked.iat == now // 1
    assert len(checked.jti) == 36
    assert checked.claims["ath"] == "UZ_EPkOf86dmQ1l4wHmbj06ix7zTM1Evq2tUnzXqK_4"
    assert checked.claims["aud"] == data["target_did"]


def test_the_fixture_proof_verifies_through_the_did_document() -> None:
    data, now, claims = v2()
    document = did_document(claims["sub"], import_public_jwk(data["initiator_jwk"]))
    keys = StaticBrokerKeys(data["jwks"], did_documents={claims["sub"]: document})
    checked = verify_presentation_proof(
        data["presentation_proof"], data["consent_token"], claims, keys=keys, replay=None, now=now
    )
    assert checked.mid == "msg-fixture-1"


def test_the_fixture_proof_verifies_async() -> None:
    data, now, claims = v2()
    document = did_document(claims["sub"], import_public_jwk(data["initiator_jwk"]))
    keys = StaticBrokerKeys(data["jwks"], did_documents={claims["sub"]: document})
    checked = asyncio.run(
        averify_presentation_proof(
            data["presentation_proof"],
            data["consent_token"],
            claims,
            keys=keys,
            replay=MemoryReplayMemory(),
            now=now,
        )
    )
    assert checked.mid == "msg-fixture-1"


def test_async_with_the_initiator_key_and_a_shared_store(minter: Minter) -> None:
    store = MemoryStore()
    token = minter.token()
    proof = minter.proof(token)
    options = minted(minter, replay=StoreReplayMemory(store))
    checked = asyncio.run(averify_presentation_proof(proof, token, minter.claims(), **options))
    assert checked.mid == "msg-1"
    # Another process on the same store refuses it (the async path, in a worker thread).
    options = minted(minter, replay=StoreReplayMemory(store))
    with pytest.raises(ParafeError) as caught:
        asyncio.run(averify_presentation_proof(proof, token, minter.claims(), **options))
    assert caught.value.message == PREFIX + "the proof was already used"
    store.close()


def test_the_claims_of_verify_token_are_taken_as_they_are() -> None:
    data, now, _ = v2()
    verifier = ParafeVerifier(
        agent_id=V2_AGENT, keys=StaticBrokerKeys(data["jwks"]), clock=lambda: now
    )
    claims = verifier.verify_token(data["consent_token"])
    assert isinstance(claims, ConsentClaims)
    checked = verify_presentation_proof(
        data["presentation_proof"],
        data["consent_token"],
        claims,
        initiator_key=import_public_jwk(data["initiator_jwk"]),
        replay=MemoryReplayMemory(),
        now=now,
    )
    assert checked.mid == "msg-fixture-1"


def test_the_initiator_key_wins_over_the_did_document() -> None:
    data, now, claims = v2()
    keys = StaticBrokerKeys(data["jwks"])  # no DID document: it must not be asked for one
    checked = verify_presentation_proof(
        data["presentation_proof"],
        data["consent_token"],
        claims,
        initiator_key=data["initiator_jwk"],
        keys=keys,
        replay=None,
        now=now,
    )
    assert checked.mid == "msg-fixture-1"


# -- every single-character tampering of the broker's proof ------------------------------------


def test_every_tampered_fixture_proof_is_refused() -> None:
    data, now, claims = v2()
    proof = data["presentation_proof"]
    memory = MemoryReplayMemory()
    options = {"initiator_key": data["initiator_jwk"], "replay": memory, "now": now}
    positions = flippable_positions(proof)
    assert len(positions) > 390
    for index in positions:
        with pytest.raises(ParafeError) as caught:
            verify_presentation_proof(
                flip(proof, index),
                data["consent_token"],
                claims,
                message_id="msg-fixture-1",
                **options,
            )
        assert caught.value.code == INVALID_PROOF, index
    # The untouched proof still verifies: no tampered attempt burned its jti.
    verify_presentation_proof(proof, data["consent_token"], claims, **options)


def test_the_proof_is_refused_for_any_tampered_token() -> None:
    data, now, claims = v2()
    token = data["consent_token"]
    for index in flippable_positions(token)[::7]:
        assert (
            refusal(
                data["presentation_proof"],
                flip(token, index),
                claims,
                initiator_key=data["initiator_jwk"],
                now=now,
            )
            == "the proof is for a different token"
        ), index


# -- each refusal, with the reference's message --------------------------------------------------


def test_wrong_audience() -> None:
    data, now, claims = v2()
    options = {"initiator_key": data["initiator_jwk"], "now": now}
    proof, token = data["presentation_proof"], data["consent_token"]
    other = "did:web:api.parafe.ai:agents:prf_agent_x"
    assert refusal(proof, token, {**claims, "aud": other}, **options) == (
        "the proof is for a different audience"
    )
    assert refusal(proof, token, claims, expected_audience=other, **options) == (
        "the proof is for a different audience"
    )


def test_the_proof_audience_is_compared_with_the_token_audience(minter: Minter) -> None:
    token = minter.token()
    claims = minter.claims()
    proof = minter.proof(token, aud="did:web:api.parafe.ai:agents:prf_agent_x")
    assert refusal(proof, token, claims, **minted(minter)) == (
        "the proof is for a different audience"
    )
    # Neither has an aud: the reference's `undefined === undefined` passes.
    token = minter.token(aud=DELETE)
    proof = minter.proof(token)
    claims = minter.claims(aud=DELETE)
    verify_presentation_proof(proof, token, claims, **minted(minter))


def test_expired_and_early() -> None:
    data, now, claims = v2()
    options = {"initiator_key": data["initiator_jwk"]}
    proof, token = data["presentation_proof"], data["consent_token"]
    # 300 s of age plus 60 s of tolerance; iat is whole seconds.
    verify_presentation_proof(proof, token, claims, now=now + 360, replay=None, **options)
    assert refusal(proof, token, claims, now=now + 361, **options) == (
        '"iat" claim timestamp check failed (too far in the past)'
    )
    verify_presentation_proof(proof, token, claims, now=now - 60, replay=None, **options)
    assert refusal(proof, token, claims, now=now - 62, **options) == (
        '"iat" claim timestamp check failed (it should be in the past)'
    )


def test_a_proof_is_single_use_with_a_replay_memory() -> None:
    data, now, claims = v2()
    memory = MemoryReplayMemory()
    options = {"initiator_key": data["initiator_jwk"], "now": now, "replay": memory}
    proof, token = data["presentation_proof"], data["consent_token"]
    verify_presentation_proof(proof, token, claims, **options)
    assert refusal(proof, token, claims, **options) == "the proof was already used"
    # The memory is shared with ParafeVerifier's check: one proof, one use, either way.
    verifier = ParafeVerifier(
        agent_id=V2_AGENT, keys=StaticBrokerKeys(data["jwks"]), replay=memory, clock=lambda: now
    )
    with pytest.raises(ParafeError) as caught:
        verifier.verify(
            message(token, claims["session_id"], proof, message_id="msg-fixture-1"),
            initiator_key=data["initiator_jwk"],
        )
    assert caught.value.message == PREFIX + "the proof was already used"


def test_without_a_replay_memory_replays_are_the_callers(minter: Minter) -> None:
    token = minter.token()
    proof = minter.proof(token)
    options = minted(minter, replay=None)
    first = verify_presentation_proof(proof, token, minter.claims(), **options)
    again = verify_presentation_proof(proof, token, minter.claims(), **options)
    assert first.jti == again.jti  # what the caller must remember to refuse a replay


def test_the_replay_memory_keeps_a_proof_while_it_is_fresh(minter: Minter) -> None:
    token = minter.token()
    proof = minter.proof(token, iat=SECONDS + 60)
    memory = MemoryReplayMemory()
    options = minted(minter, replay=memory)
    del options["now"]
    verify_presentation_proof(proof, token, minter.claims(), now=NOW, **options)
    # Fresh until its iat is 360 s old (iat 60 s ahead: now + 420), and used for as long;
    # the reference forgot it after 360 s, when the proof was still good for 60 s more.
    for later in (359, 361, 420):
        assert refusal(proof, token, minter.claims(), now=NOW + later, **options) == (
            "the proof was already used"
        )
    assert "too far in the past" in refusal(proof, token, minter.claims(), now=NOW + 421, **options)


def test_wrong_key(minter: Minter) -> None:
    token = minter.token()
    proof = minter.proof(token)
    stranger = generate_private_jwk("EdDSA")
    assert refusal(
        proof, token, minter.claims(), **minted(minter, initiator_key=stranger.public)
    ) == ("the initiator's key is not the one the token is bound to")
    # Claims naming the stranger's key, checked with the initiator's: refused on the key.
    forged = minter.proof(token, key=stranger)
    claims = minter.claims(cnf={"jkt": stranger.public.thumbprint})
    assert refusal(forged, token, claims, **minted(minter)) == (
        "the initiator's key is not the one the token is bound to"
    )
    # Signed by a stranger, checked with the initiator's key: the signature fails.
    assert refusal(forged, token, minter.claims(), **minted(minter)) == (
        "signature verification failed"
    )
    # A P-256 key in the DID document, an EdDSA proof: the alg does not fit the key.
    minter.initiator = generate_private_jwk("ES256")
    token = minter.token()
    proof = minter.proof(token, header={"alg": "EdDSA", "typ": "parafe-pop+jwt"})
    assert refusal(proof, token, minter.claims(), **minted(minter)) == (
        '"alg" (Algorithm) Header Parameter value not allowed'
    )


def test_did_document_of_another_key_unavailable_or_revoked(minter: Minter) -> None:
    token = minter.token()
    proof = minter.proof(token)
    claims = minter.claims()
    other = did_document(minter.initiator_id, generate_private_jwk("EdDSA").public)
    keys = StaticBrokerKeys(minter.jwks, did_documents={minter.initiator_id: other})
    options = {"now": NOW, "keys": keys}
    assert refusal(proof, token, claims, **options) == (
        "the initiator's key is not the one the token is bound to"
    )
    keys = StaticBrokerKeys(minter.jwks, broker_url="https://broker.example/")
    assert refusal(proof, token, claims, now=NOW, keys=keys) == (
        "the initiator's DID document is unavailable at https://broker.example (404); "
        "is the agent revoked, or registered with another broker?"
    )
    revoked = {minter.initiator_id: {"error": "agent_revoked", "revoked_at": "2026-01-01T00:00Z"}}
    keys = StaticBrokerKeys(minter.jwks, revoked=revoked)
    assert "(410)" in refusal(proof, token, claims, now=NOW, keys=keys)
    keys = StaticBrokerKeys(minter.jwks, did_documents={minter.initiator_id: {"id": "x"}})
    assert refusal(proof, token, claims, now=NOW, keys=keys) == (
        "the initiator's DID document has no public key"
    )


@pytest.mark.parametrize(
    ("overrides", "detail"),
    [
        ({"cnf": DELETE}, "the consent token is not key-bound (no cnf.jkt)"),
        ({"cnf": {}}, "the consent token is not key-bound (no cnf.jkt)"),
        ({"cnf": {"jkt": ""}}, "the consent token is not key-bound (no cnf.jkt)"),
        ({"sub": DELETE, "initiator_agent_id": DELETE}, "the consent token names no initiator"),
        ({"sub": None, "initiator_agent_id": None}, "the consent token names no initiator"),
    ],
)
def test_token_claims_missing(minter: Minter, overrides: dict[str, Any], detail: str) -> None:
    token = minter.token()
    claims = minter.claims(**overrides)
    assert refusal(minter.proof(token), token, claims, **minted(minter)) == detail


def test_the_initiator_is_sub_else_initiator_agent_id(minter: Minter) -> None:
    token = minter.token()
    # `sub ?? initiator_agent_id`: the replay key names whichever it is.
    memory = MemoryReplayMemory()
    proof = minter.proof(token)
    claims = minter.claims(sub=None)
    verify_presentation_proof(proof, token, claims, **minted(minter, replay=memory))
    assert refusal(proof, token, minter.claims(sub=DELETE), **minted(minter, replay=memory)) == (
        "the proof was already used"
    )
    # Another initiator name is another replay key (as in the reference).
    verify_presentation_proof(
        proof, token, minter.claims(sub="prf_agent_other"), **minted(minter, replay=memory)
    )


@pytest.mark.parametrize(
    ("overrides", "detail"),
    [
        ({"ath": DELETE}, "the proof is for a different token"),
        ({"aud": DELETE}, "the proof is for a different audience"),
        ({"jti": DELETE}, "the proof needs a random jti"),
        ({"jti": "a" * 15}, "the proof needs a random jti"),
        ({"iat": DELETE}, '"iat" claim must be a number'),
        ({"mid": "msg-2"}, "the proof is for a different message"),
    ],
)
def test_proof_claims_missing_or_wrong(
    minter: Minter, overrides: dict[str, Any], detail: str
) -> None:
    token = minter.token()
    proof = minter.proof(token, **overrides)
    options = minted(minter, message_id="msg-1")
    assert refusal(proof, token, minter.claims(), **options) == detail


def test_mid_is_compared_only_when_both_have_one(minter: Minter) -> None:
    token = minter.token()
    verify_presentation_proof(
        minter.proof(token, mid=DELETE), token, minter.claims(), **minted(minter, message_id="m")
    )
    verify_presentation_proof(
        minter.proof(token, mid="x"), token, minter.claims(), **minted(minter)
    )


def test_not_a_proof(minter: Minter) -> None:
    token = minter.token()
    for proof in (None, 42, b"a.b.c"):
        assert refusal(proof, token, minter.claims(), **minted(minter)) == (
            "Compact JWS must be a string or Uint8Array"
        )
    assert refusal("a.b", token, minter.claims(), **minted(minter)).startswith("not a signed token")


# -- the reference's order: the first failing check decides the message --------------------------


def test_the_checks_run_in_the_reference_order(minter: Minter) -> None:
    token = minter.token()
    stranger = generate_private_jwk("EdDSA").public
    # No cnf.jkt before no initiator before the key.
    claims = minter.claims(cnf=DELETE, sub=DELETE, initiator_agent_id=DELETE)
    assert refusal("junk", token, claims, **minted(minter, initiator_key=stranger)) == (
        "the consent token is not key-bound (no cnf.jkt)"
    )
    claims = minter.claims(sub=DELETE, initiator_agent_id=DELETE)
    assert refusal("junk", token, claims, **minted(minter, initiator_key=stranger)) == (
        "the consent token names no initiator"
    )
    # The key's thumbprint before the proof is even parsed.
    assert refusal("junk", token, minter.claims(), **minted(minter, initiator_key=stranger)) == (
        "the initiator's key is not the one the token is bound to"
    )
    # The signature and typ before the time.
    stale = minter.proof(token, iat=SECONDS - 600, ath=DELETE)
    assert refusal(stale, token, minter.claims(), **minted(minter)) == (
        '"iat" claim timestamp check failed (too far in the past)'
    )
    untyped = minter.proof(token, iat=SECONDS - 600, header={"alg": "EdDSA"})
    assert refusal(untyped, token, minter.claims(), **minted(minter)) == (
        'unexpected "typ" JWT header value'
    )
    # Then ath, aud, expected audience, mid and jti, in that order (@getparafe/verify checks the
    # jti first; the a2a-extension, whose codes these are, last).
    options = minted(minter, message_id="msg-1", expected_audience="did:x")
    every: dict[str, Any] = {"ath": "x", "aud": "did:y", "mid": "msg-2", "jti": "short"}
    expected = [
        ("ath", "the proof is for a different token"),
        ("aud", "the proof is for a different audience"),
        ("expected", "the proof is for a different audience"),
        ("mid", "the proof is for a different message"),
        ("jti", "the proof needs a random jti"),
    ]
    for name, detail in expected:
        proof = minter.proof(token, **every)
        assert refusal(proof, token, minter.claims(), **options) == detail, name
        if name == "aud":
            every["aud"] = minter.claims()["aud"]
        elif name == "expected":
            options["expected_audience"] = minter.claims()["aud"]
        else:
            every.pop(name)
    # Replay last: every earlier refusal above left no jti behind.
    verify_presentation_proof(minter.proof(token, jti="j" * 16), token, minter.claims(), **options)


@pytest.mark.parametrize(
    ("label", "claims", "header", "ok"), PROOF_TAMPERING, ids=[t[0] for t in PROOF_TAMPERING]
)
def test_same_answer_as_parafe_verifier(
    minter: Minter, label: str, claims: dict[str, Any], header: Any, ok: bool
) -> None:
    token = minter.token()
    proof = minter.proof(token, header=header, **claims)
    keys = StaticBrokerKeys(minter.jwks, did_documents=minter.did_documents())
    verifier = ParafeVerifier(agent_id=minter.target_id, keys=keys, clock=lambda: NOW)
    try:
        verifier.verify(message(token, minter.session_id, proof))
        inside = "accepted"
    except ParafeError as exc:
        inside = f"{exc.code}: {exc.message}"
    try:
        verify_presentation_proof(
            proof,
            token,
            minter.claims(),
            keys=keys,
            message_id="msg-1",
            replay=MemoryReplayMemory(),
            now=NOW,
        )
        alone = "accepted"
    except ParafeError as exc:
        alone = f"{exc.code}: {exc.message}"
    assert alone == inside
    assert (alone == "accepted") == ok


# -- misuse is a programming error, not a refusal -------------------------------------------------


def test_a_key_or_a_key_source_is_required(minter: Minter) -> None:
    token = minter.token()
    with pytest.raises(ValueError, match="initiator_key, or keys"):
        verify_presentation_proof(minter.proof(token), token, minter.claims(), replay=None)


def test_claims_and_token_types(minter: Minter) -> None:
    token = minter.token()
    proof = minter.proof(token)
    with pytest.raises(TypeError, match="claims"):
        verify_presentation_proof(proof, token, "claims", **minted(minter))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="token"):
        verify_presentation_proof(proof, None, minter.claims(), **minted(minter))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        verify_presentation_proof(proof, token, minter.claims())  # type: ignore[call-arg]


def test_ath_is_the_consent_ref() -> None:
    data, _, _ = v2()
    assert sha256_b64url(data["consent_token"]) == "UZ_EPkOf86dmQ1l4wHmbj06ix7zTM1Evq2tUnzXqK_4"
