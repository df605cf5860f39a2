"""Presentation proofs (parafe-verifier.md §6, §13 "Invalid proof"), replay memory, and the
calling agent's side (`ConsentPresenter`)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.parafe import (
    EXTENSION_URI,
    INVALID_CONSENT_TOKEN,
    INVALID_PROOF,
    ConsentPresenter,
    MemoryReplayMemory,
    ParafeError,
    ParafeVerifier,
    StaticBrokerKeys,
    StoreReplayMemory,
    create_presentation_proof,
    read_consent,
)
from pactmw.store import MemoryStore, SqliteStore
from tests.parafe.support import (
    DELETE,
    NOW,
    PROOF_TAMPERING,
    SECONDS,
    Minter,
    decode,
    did_document,
    message,
    sign,
)


@pytest.fixture
def minter() -> Minter:
    return Minter(NOW)


def verifier(minter: Minter, *, documents: Any = None, **options: Any) -> ParafeVerifier:
    keys = StaticBrokerKeys(
        minter.jwks,
        did_documents=minter.did_documents() if documents is None else documents,
        revoked=options.pop("revoked", None),
    )
    return ParafeVerifier(agent_id=minter.target_id, keys=keys, clock=lambda: NOW, **options)


def proof_code(
    minter: Minter, proof: str | None, *, token: str | None = None, **options: Any
) -> str:
    token = token or minter.token()
    with pytest.raises(ParafeError) as caught:
        verifier(minter, **options).verify(
            message(token, minter.session_id, proof), action="create_order"
        )
    return caught.value.code


def accepted(minter: Minter, token: str, proof: str, **options: Any) -> bool:
    return (
        verifier(minter, **options)
        .verify(message(token, minter.session_id, proof), action="create_order")
        .proof_verified
    )


# -- §13 "Invalid proof" and the single-claim tampering of a proof ----------------------------


@pytest.mark.parametrize(
    ("label", "claims", "header", "ok"), PROOF_TAMPERING, ids=[t[0] for t in PROOF_TAMPERING]
)
def test_proof_tampering(
    minter: Minter, label: str, claims: dict[str, Any], header: Any, ok: bool
) -> None:
    token = minter.token()
    proof = minter.proof(token, header=header, **claims)
    if ok:
        assert accepted(minter, token, proof)
    else:
        assert proof_code(minter, proof, token=token) == INVALID_PROOF


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        (b"not json", "invalid JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"jti":"a","jti":"b"}', "duplicate key"),
    ],
)
def test_a_well_signed_proof_whose_payload_is_not_a_json_object_says_so(
    minter: Minter, payload: bytes, detail: str
) -> None:
    token = minter.token()
    proof = sign(payload, minter.initiator, {"alg": "EdDSA", "typ": "parafe-pop+jwt"})
    with pytest.raises(ParafeError) as caught:
        verifier(minter).verify(message(token, minter.session_id, proof), action="create_order")
    assert caught.value.code == INVALID_PROOF
    assert "not a signed token" not in caught.value.message
    assert "JWT Claims Set must be a top-level JSON object" in caught.value.message
    assert detail in caught.value.message


def test_no_proof_is_refused_by_default(minter: Minter) -> None:
    with pytest.raises(ParafeError) as caught:
        verifier(minter).verify(message(minter.token(), minter.session_id), action="create_order")
    assert caught.value.code == INVALID_PROOF
    assert "requires a presentation proof" in caught.value.message


def test_a_proof_is_checked_even_when_not_required(minter: Minter) -> None:
    token = minter.token()
    proof = minter.proof(token, mid="other")
    assert proof_code(minter, proof, token=token, require_proof=False) == INVALID_PROOF


def test_signed_by_a_stranger(minter: Minter) -> None:
    token = minter.token()
    for alg in ("EdDSA", "ES256"):
        stranger = generate_private_jwk(alg)
        proof = minter.proof(token, key=stranger, header={"alg": "EdDSA", "typ": "parafe-pop+jwt"})
        assert proof_code(minter, proof, token=token) == INVALID_PROOF


def test_the_same_proof_twice(minter: Minter) -> None:
    token = minter.token()
    proof = minter.proof(token)
    ver = verifier(minter)
    ver.verify(message(token, minter.session_id, proof), action="create_order")
    with pytest.raises(ParafeError) as caught:
        ver.verify(message(token, minter.session_id, proof), action="create_order")
    assert caught.value.code == INVALID_PROOF
    assert caught.value.message.endswith("the proof was already used")
    # A fresh proof for the same token is fine.
    ver.verify(message(token, minter.session_id, minter.proof(token)), action="create_order")


def test_a_refused_proof_burns_no_jti(minter: Minter) -> None:
    token = minter.token()
    proof = minter.proof(token)
    ver = verifier(minter)
    with pytest.raises(ParafeError):
        ver.verify(message(token, minter.session_id, proof, message_id="other"))
    ver.verify(message(token, minter.session_id, proof), action="create_order")


def test_the_proof_is_checked_without_a_message_id(minter: Minter) -> None:
    token = minter.token()
    proof = minter.proof(token, mid="anything")
    # The message has no messageId: `mid` is not compared.
    verifier(minter).verify(message(token, minter.session_id, proof, message_id=None))


def test_token_not_key_bound(minter: Minter) -> None:
    token = minter.token(cnf=DELETE)
    assert proof_code(minter, minter.proof(token), token=token) == INVALID_PROOF


@pytest.mark.parametrize(
    "document",
    [
        {"id": "did:x"},  # no verificationMethod
        {"verificationMethod": []},
        {"verificationMethod": "nope"},
        {"verificationMethod": [None]},
        {"verificationMethod": [{"id": "x"}]},  # no publicKeyJwk
        {"verificationMethod": [{"publicKeyJwk": "not a jwk"}]},
        {"verificationMethod": [{"publicKeyJwk": {"kty": "OKP", "crv": "Ed25519"}}]},  # no x
        {"verificationMethod": [{"publicKeyJwk": {"kty": "OKP", "crv": "X25519", "x": "AAAA"}}]},
        {
            "verificationMethod": [
                {"publicKeyJwk": {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}}
            ]
        },
        {"verificationMethod": [{"publicKeyJwk": {"kty": "RSA", "n": "AQAB", "e": "AQAB"}}]},
        {"verificationMethod": [{"publicKeyJwk": {"kty": "oct", "k": "c2VjcmV0"}}]},
    ],
)
def test_malformed_did_documents_are_invalid_proof(minter: Minter, document: Any) -> None:
    documents = {minter.initiator_id: document}
    token = minter.token()
    assert (
        proof_code(minter, minter.proof(token), token=token, documents=documents) == INVALID_PROOF
    )


def test_did_key_of_another_agent(minter: Minter) -> None:
    other = generate_private_jwk("EdDSA")
    documents = {minter.initiator_id: did_document(minter.initiator_id, other.public)}
    token = minter.token()
    assert (
        proof_code(minter, minter.proof(token), token=token, documents=documents) == INVALID_PROOF
    )


def test_did_document_takes_the_first_method(minter: Minter) -> None:
    document = did_document(minter.initiator_id, minter.initiator.public)
    other = did_document(minter.initiator_id, generate_private_jwk("EdDSA").public)
    # The reference takes verificationMethod[0] without matching its id.
    document["verificationMethod"][0]["id"] = "did:web:elsewhere#keys-9"
    document["verificationMethod"].append(other["verificationMethod"][0])
    token = minter.token()
    assert accepted(minter, token, minter.proof(token), documents={minter.initiator_id: document})
    document["verificationMethod"].reverse()
    assert (
        proof_code(
            minter, minter.proof(token), token=token, documents={minter.initiator_id: document}
        )
        == INVALID_PROOF
    )


def test_did_document_missing_or_revoked(minter: Minter) -> None:
    token = minter.token()
    assert proof_code(minter, minter.proof(token), token=token, documents={}) == INVALID_PROOF
    revoked = {
        minter.initiator_id: {"error": "agent_revoked", "revoked_at": "2026-01-01T00:00:00Z"}
    }
    code = proof_code(minter, minter.proof(token), token=token, revoked=revoked)
    assert code == INVALID_PROOF


def test_initiator_key_option_skips_the_did_document(minter: Minter) -> None:
    token = minter.token()
    ver = verifier(minter, documents={})
    msg = message(token, minter.session_id, minter.proof(token))
    assert ver.verify(msg, initiator_key=minter.initiator.public).proof_verified
    msg = message(token, minter.session_id, minter.proof(token))
    assert ver.verify(msg, initiator_key=dict(minter.initiator.public.members)).proof_verified
    with pytest.raises(ParafeError) as caught:
        ver.verify(
            message(token, minter.session_id, minter.proof(token)),
            initiator_key={**minter.initiator.public.members, "d": "secret"},
        )
    assert caught.value.code == INVALID_PROOF


# -- replay memory ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("iat", "lifetime", "later"),
    [
        (0, None, 360),  # the last second a proof of now is fresh (360 - 60 s = its max age)
        (60, None, 361),  # iat 60 s ahead (the tolerance): fresh until now + 420
        (60, None, 420),
        (60, 900, 400),  # a token that outlives the reference's 360 s replay memory
    ],
)
def test_a_proof_is_remembered_as_long_as_it_could_be_accepted(
    minter: Minter, iat: int, lifetime: int | None, later: int
) -> None:
    clock = [NOW]
    keys = StaticBrokerKeys(minter.jwks, did_documents=minter.did_documents())
    ver = ParafeVerifier(
        agent_id=minter.target_id,
        keys=keys,
        replay=MemoryReplayMemory(),
        clock=lambda: clock[0],
    )
    # No exp (the reference does not require one) or a long one: only the replay memory
    # stands between a captured proof and its second use.
    token = minter.token(exp=DELETE if lifetime is None else SECONDS + lifetime)
    proof = minter.proof(token, iat=SECONDS + iat)
    ver.verify(message(token, minter.session_id, proof))
    clock[0] = NOW + later
    with pytest.raises(ParafeError) as caught:
        ver.verify(message(token, minter.session_id, proof))
    assert caught.value.code == INVALID_PROOF
    assert caught.value.message.endswith("the proof was already used")


def test_memory_replay_purges_when_full() -> None:
    memory = MemoryReplayMemory(max_entries=3)
    for i in range(5):
        assert memory.first_use(f"k{i}", now=0, expires_at=10)
    assert memory.first_use("late", now=20, expires_at=30)  # purges the expired ones
    assert not memory.first_use("late", now=21, expires_at=31)
    assert memory.first_use("k0", now=21, expires_at=31)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_store_replay_memory_is_shared(minter: Minter, tmp_path: Path, backend: str) -> None:
    if backend == "memory":
        store = MemoryStore()
        stores: list[Any] = [store, store]
    else:
        stores = [SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db")]  # two "processes"
    keys = StaticBrokerKeys(minter.jwks, did_documents=minter.did_documents())
    first, second = (
        ParafeVerifier(
            agent_id=minter.target_id,
            keys=keys,
            replay=StoreReplayMemory(store),
            clock=lambda: NOW,
        )
        for store in stores
    )
    token = minter.token()
    # A jti no store could keep verbatim: it is stored as a digest.
    proof = minter.proof(token, jti="\x00\ud800" + "j" * 20)
    first.verify(message(token, minter.session_id, proof))
    with pytest.raises(ParafeError) as caught:
        second.verify(message(token, minter.session_id, proof))
    assert caught.value.code == INVALID_PROOF
    again = minter.proof(token)
    assert asyncio.run(second.averify(message(token, minter.session_id, again))).proof_verified
    for store in stores:
        store.close()


def test_concurrent_replays_one_wins(minter: Minter) -> None:
    token = minter.token()
    proof = minter.proof(token)
    ver = verifier(minter)
    results: list[str] = []

    def attempt() -> None:
        try:
            ver.verify(message(token, minter.session_id, proof))
            results.append("ok")
        except ParafeError as exc:
            results.append(exc.code)

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["INVALID_PROOF"] * 7 + ["ok"]


# -- the calling agent's side -----------------------------------------------------------------


@pytest.mark.parametrize("alg", ["EdDSA", "ES256"])
def test_presenter_attaches_a_fresh_proof_per_message(minter: Minter, alg: str) -> None:
    minter.initiator = generate_private_jwk(alg, kid="my-kid")
    token = minter.token()
    presenter = ConsentPresenter(
        token=token, session_id=minter.session_id, key=minter.initiator, clock=lambda: NOW
    )
    ver = verifier(minter)
    for n in range(3):
        original = {"messageId": f"m-{n}", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        sent = presenter.attach(original)
        assert "metadata" not in original
        assert sent["extensions"] == [EXTENSION_URI]
        consent = read_consent(sent)
        assert consent.token == token
        assert consent.proof is not None
        header, claims = decode(consent.proof)
        assert header == {"alg": alg, "typ": "parafe-pop+jwt"}  # no kid
        assert set(claims) == {"ath", "aud", "jti", "mid", "iat"}
        assert claims["mid"] == f"m-{n}"
        assert claims["iat"] == SECONDS
        assert len(claims["jti"]) == 36
        assert ver.verify(sent, action="create_order").proof_verified
    data = presenter.data()
    assert "mid" not in decode(data["consent"]["proof"])[1]


def test_no_proof_for_a_token_without_audience(minter: Minter) -> None:
    with pytest.raises(ParafeError) as caught:
        create_presentation_proof(minter.token(aud=DELETE), minter.initiator, now=NOW)
    assert caught.value.code == INVALID_CONSENT_TOKEN
    with pytest.raises(ValueError, match="Ed25519 or P-256"):
        ConsentPresenter(
            token="a.b.c", session_id="s", key=generate_private_jwk("RS256"), clock=lambda: NOW
        )
