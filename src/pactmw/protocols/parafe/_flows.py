"""The Parafé verification flows: what each check needs (broker keys, DID documents,
first-use memory, broker calls), the flows themselves, and their two drivers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from attrs import evolve, field, frozen

from pactmw.core.drive import adrive, drive
from pactmw.core.errors import FetchError, KeyUnavailable
from pactmw.core.jose import HeaderCache
from pactmw.core.jwk import PublicJWK
from pactmw.core.replay import ReplayMemory, remember_until
from pactmw.protocols.parafe import _errors as err
from pactmw.protocols.parafe._broker import KeySource, replay_key
from pactmw.protocols.parafe._card import ScopeRequirement
from pactmw.protocols.parafe._consent import (
    ConsentClaims,
    check_binding,
    check_signature_and_claims,
    check_types,
    parse_token,
    select_key,
)
from pactmw.protocols.parafe._constants import PROOF_REPLAY_WINDOW
from pactmw.protocols.parafe._did import DidDocument, DidUnavailable, agent_id_of
from pactmw.protocols.parafe._errors import ParafeError
from pactmw.protocols.parafe._http import HttpAnswer
from pactmw.protocols.parafe._identity import (
    IdentityCredential,
    check_credential_jwt,
    check_identity_credential,
    key_error,
    sd_jwt_header,
)
from pactmw.protocols.parafe._jwt import parse_iso, sha256_b64url, whole_seconds
from pactmw.protocols.parafe._message import Consent, message_id, read_consent
from pactmw.protocols.parafe._online import (
    VERIFY_PATH,
    OnlineVerification,
    interpret_answer,
    unreachable,
    verify_request,
)
from pactmw.protocols.parafe._proof import KeyBound, ProofClaims, check_proof, initiator_key
from pactmw.protocols.parafe._receipts import (
    ISSUER_REVOKED,
    KEY_FETCH_FAILED,
    KEY_NOT_FOUND,
    MALFORMED,
    ActionReceipt,
    BrokerExpectations,
    IndexAck,
    SessionReceipt,
    broker_jws_header,
    check_action_receipt,
    check_index_ack,
    check_session_receipt,
    decode_receipt,
    receipt_hash,
    receipt_key,
)

# -- what a flow may ask for ---------------------------------------------------------------


@frozen
class NeedBrokerKeys:
    """The broker keys that may verify a JWS naming `kid` with `alg` (or `KeyUnavailable`)."""

    kid: str | None
    alg: str


@frozen
class NeedDidDocument:
    """An agent's DID document (or `DidUnavailable`)."""

    agent_id: str


@frozen
class NeedFirstUse:
    """Whether `key` is used for the first time (the replay memory's answer)."""

    key: str
    now: float
    expires_at: float


@frozen
class NeedBrokerPost:
    """The broker's answer to a POST of `body` to `path` (or `FetchError`)."""

    path: str
    body: Mapping[str, Any] = field(repr=False)


Need = NeedBrokerKeys | NeedDidDocument | NeedFirstUse | NeedBrokerPost
T = TypeVar("T")
Flow = Generator[Need, Any, T]
_IO_ERRORS = (KeyUnavailable, DidUnavailable, FetchError)
#: Statuses below 500 that mean the broker is busy, not that the agent is gone.
_BROKER_TROUBLE = frozenset({408, 429})


# -- results ---------------------------------------------------------------------------------


@frozen
class VerifiedConsent:
    """A message whose consent checked out: act on `action` within `claims`.

    `proof_verified` is False only when the verifier does not require proofs and none came.
    `consent_token` is what an action receipt binds to (`consent_ref` is its hash).
    """

    claims: ConsentClaims
    session_id: str
    consent_token: str = field(repr=False)
    proof_verified: bool
    action: str | None = None
    message_id: str | None = None
    proof: ProofClaims | None = field(default=None, repr=False)
    online: OnlineVerification | None = None

    @property
    def consent(self) -> Consent:
        return Consent(token=self.consent_token, session_id=self.session_id)

    @property
    def consent_ref(self) -> str:
        return sha256_b64url(self.consent_token)


# -- the flows -------------------------------------------------------------------------------


def token_flow(
    token: str,
    *,
    now: float,
    agent_id: str | None = None,
    session_id: str | None = None,
    action: str | None = None,
    scope_requirements: Mapping[str, ScopeRequirement] | None = None,
    header_cache: HeaderCache | None = None,
) -> Flow[ConsentClaims]:
    """Steps 7-16 of §4 for a bare token; each of the optional checks only when given."""
    jws = parse_token(token, header_cache)
    try:
        candidates = yield NeedBrokerKeys(jws.kid, jws.alg)
    except KeyUnavailable as exc:
        if exc.code == "jwks_unavailable":
            # No keys could be had (the broker down, slow or answering garbage): still the
            # reference's INVALID_CONSENT_TOKEN, but said as an outage (`broker_unavailable`).
            raise err.broker_unavailable(
                "the broker's signing keys could not be fetched", KEY_FETCH_FAILED
            ) from exc
        # An unknown kid, after the one refetch the cache allows: the token names a key the
        # broker does not publish, which is what the reference's advice is for.
        raise err.invalid_token(f"no usable broker key ({exc.code}).") from exc
    claims = check_signature_and_claims(jws, select_key(candidates), now=now)
    consent = check_types(claims)
    check_binding(
        consent,
        agent_id=agent_id,
        session_id=session_id,
        action=action,
        scope_requirements=scope_requirements,
    )
    return consent


def proof_flow(
    proof: str,
    *,
    token: str,
    consent: KeyBound,
    now: float,
    message_id: str | None,
    broker_url: str,
    key: Any = None,
    expected_audience: str | None = None,
) -> Flow[ProofClaims]:
    """§6: the key from `key` or the initiator's DID document, the proof, then replay."""
    if consent.jkt is None:
        raise err.invalid_proof("the consent token is not key-bound (no cnf.jkt)")
    initiator = consent.initiator
    if initiator is None:
        raise err.invalid_proof("the consent token names no initiator")
    if key is None:
        try:
            document: DidDocument = yield NeedDidDocument(initiator)
        except DidUnavailable as exc:
            if exc.status is None:
                raise err.invalid_proof(
                    f"could not fetch the initiator's DID document: {exc}",
                    cause=KEY_FETCH_FAILED,
                ) from exc
            if exc.status in _BROKER_TROUBLE or exc.status >= 500:
                # The reference asks whether the agent is revoked for any status; a broker
                # that is overloaded or failing says nothing about the agent, so this says
                # so (the code stays the reference's INVALID_PROOF).
                raise err.invalid_proof(
                    f"the initiator's DID document is unavailable at {broker_url} "
                    f"({exc.status}): the broker could not serve it; try again later",
                    cause=KEY_FETCH_FAILED,
                ) from exc
            raise err.invalid_proof(
                f"the initiator's DID document is unavailable at {broker_url} ({exc.status}); "
                "is the agent revoked, or registered with another broker?"
            ) from exc
        key = document.first_key()
        if key is None:
            raise err.invalid_proof("the initiator's DID document has no public key")
    checked = check_proof(
        proof,
        token=token,
        consent=consent,
        key=initiator_key(key),
        now=now,
        message_id=message_id,
        expected_audience=expected_audience,
    )
    seconds = whole_seconds(now)
    # Remembered for as long as the proof itself could be accepted: until its `iat` is more
    # than 360 s old (300 s max age + 60 s tolerance), the last such second included. The
    # reference remembers it 360 s from first use, which is shorter for an `iat` up to 60 s
    # ahead, and ends on the last second the proof is still fresh: a token without `exp` (the
    # reference accepts one) or a long-lived one could be used again with the same proof.
    expires_at = max(
        seconds + PROOF_REPLAY_WINDOW, remember_until(checked.iat + PROOF_REPLAY_WINDOW)
    )
    # Recorded only now that every other check passed, so a bad proof burns no jti.
    fresh: bool = yield NeedFirstUse(
        replay_key(initiator, checked.jti), float(seconds), float(expires_at)
    )
    if not fresh:
        raise err.invalid_proof("the proof was already used")
    return checked


def online_flow(
    token: str,
    *,
    action: str,
    session_id: str | None,
    agent_id: str | None,
    proof: str | None,
    broker_url: str,
) -> Flow[OnlineVerification]:
    """§8: ask the broker; an unreachable broker is INVALID_CONSENT_TOKEN."""
    body = verify_request(
        token, action=action, session_id=session_id, agent_id=agent_id, proof=proof
    )
    try:
        answer: HttpAnswer = yield NeedBrokerPost(VERIFY_PATH, body)
    except FetchError as exc:
        raise unreachable(broker_url, str(exc)) from exc
    return interpret_answer(
        answer.status,
        answer.body,
        token=token,
        action=action,
        session_id=body["session_id"],
        agent_id=agent_id,
    )


def consent_flow(
    message: Any,
    *,
    agent_id: str,
    now: float,
    broker_url: str,
    action: str | None = None,
    scope_requirements: Mapping[str, ScopeRequirement] | None = None,
    require_proof: bool = True,
    initiator_key: Any = None,
    online: bool = False,
    header_cache: HeaderCache | None = None,
) -> Flow[VerifiedConsent]:
    """§4 for a whole A2A message: read the consent, check the token, then the proof, then
    (optionally) ask the broker. The first failing check decides the error; errors raised
    after the consent was read carry it (`error.consent`) for the refusal receipt."""
    consent = read_consent(message)
    mid = message_id(message)
    try:
        claims = yield from token_flow(
            consent.token,
            now=now,
            agent_id=agent_id,
            session_id=consent.session_id,
            action=action,
            scope_requirements=scope_requirements,
            header_cache=header_cache,
        )
        proof: ProofClaims | None = None
        if consent.proof is not None:
            proof = yield from proof_flow(
                consent.proof,
                token=consent.token,
                consent=claims,
                now=now,
                message_id=mid,
                broker_url=broker_url,
                key=initiator_key,
            )
        elif require_proof:
            raise err.invalid_proof(
                "this agent requires a presentation proof with the consent token"
            )
        answer: OnlineVerification | None = None
        if online:
            if action is None:
                raise ValueError("online verification needs the action")
            answer = yield from online_flow(
                consent.token,
                action=action,
                session_id=consent.session_id,
                agent_id=agent_id,
                proof=consent.proof,
                broker_url=broker_url,
            )
            if not answer.valid:
                raise err.invalid_token("the broker does not consider it valid.")
    except ParafeError as exc:
        exc.consent = consent
        raise
    return VerifiedConsent(
        claims=claims,
        session_id=consent.session_id,
        consent_token=consent.token,
        proof_verified=proof is not None,
        action=action,
        message_id=mid,
        proof=proof,
        online=answer,
    )


def _broker_keys(
    kid: str | None, alg: str, refused: Callable[[KeyUnavailable], ParafeError]
) -> Flow[Sequence[PublicJWK]]:
    """The broker keys for a JWS naming `kid`/`alg`; `refused` says what a key lookup that
    failed means for the artifact at hand."""
    try:
        candidates: Sequence[PublicJWK] = yield NeedBrokerKeys(kid, alg)
    except KeyUnavailable as exc:
        raise refused(exc) from exc
    return candidates


# Acknowledgments and session receipts, like credentials (`key_error`): KEY_FETCH_FAILED when
# the broker's JWKS could not be had, KEY_NOT_FOUND for a kid it lacks, as @getparafe/verify's
# verifyIndexAck and verifyReceiptJWS rethrow its key source's KEY_FETCH_FAILED.


def index_ack_flow(ack: str, expect: BrokerExpectations) -> Flow[IndexAck]:
    kid, alg = broker_jws_header(ack)
    candidates = yield from _broker_keys(kid, alg, partial(key_error, subject="acknowledgment"))
    return check_index_ack(ack, candidates, expect)


def session_receipt_flow(receipt: str, expect: BrokerExpectations) -> Flow[SessionReceipt]:
    kid, alg = broker_jws_header(receipt)
    candidates = yield from _broker_keys(kid, alg, partial(key_error, subject="receipt"))
    return check_session_receipt(receipt, candidates, expect)


def action_receipt_flow(
    receipt: str,
    *,
    now: float,
    issuer_key: Any = None,
    expected_session_id: str | None = None,
    consent_token: str | None = None,
    acknowledgment: str | None = None,
) -> Flow[ActionReceipt]:
    """§7.3 (@getparafe/verify `verifyActionReceipt`), with its error codes (§9.4)."""
    header, payload = decode_receipt(receipt)
    iss: str = payload["iss"]
    revoked_at: str | None = None
    if issuer_key is None:
        agent_id = agent_id_of(iss)
        if agent_id is None:
            raise err.receipt_error(MALFORMED, "iss is not a Parafé agent DID; pass issuer_key")
        try:
            document: DidDocument = yield NeedDidDocument(agent_id)
        except DidUnavailable as exc:
            document = _revoked_document(exc)
            revoked_at = document.revoked_at
        if not (isinstance(document.id, str) and document.id == iss):
            raise err.receipt_error(MALFORMED, "The DID document is not the issuer's")
        issuer_key = document.key_for(header.get("kid"))
        if issuer_key is None:
            raise err.receipt_error(KEY_NOT_FOUND, "The issuer's DID document has no such key")
    checked = check_action_receipt(
        receipt,
        header=header,
        key=receipt_key(issuer_key),
        now=now,
        expected_session_id=expected_session_id,
        consent_token=consent_token,
    )
    if revoked_at is None:
        return checked
    # A revoked signer's receipt counts only if the broker indexed it before the revocation:
    # the key may have been stolen, and a receipt's own iat is whatever the signer wrote.
    if acknowledgment is None:
        raise err.receipt_error(
            ISSUER_REVOKED, f"The agent that signed this receipt was revoked at {revoked_at}"
        )
    ack = yield from index_ack_flow(acknowledgment, BrokerExpectations(now))
    if (
        ack.receipt_hash != receipt_hash(receipt)
        or ack.receipt_iss != iss
        or ack.session_id != checked.session_id
    ):
        raise err.receipt_error(MALFORMED, "The acknowledgment is for another receipt")
    indexed = parse_iso(ack.indexed_at)
    revoked = parse_iso(revoked_at)
    if indexed is None or revoked is None or indexed >= revoked:
        raise err.receipt_error(
            ISSUER_REVOKED,
            f"The agent that signed this was revoked at {revoked_at}, and the broker indexed "
            f"this receipt at {ack.indexed_at}, not before.",
        )
    return evolve(checked, issuer_revoked_at=revoked_at)


def identity_credential_flow(
    credential: str, expect: BrokerExpectations
) -> Flow[IdentityCredential]:
    """An SD-JWT VC identity credential (@getparafe/verify `verifyIdentityCredential`)."""
    issuer_jwt, kid, disclosures = sd_jwt_header(credential)
    refused = partial(key_error, subject="identity credential")
    candidates = yield from _broker_keys(kid, "ES256", refused)
    return check_identity_credential(issuer_jwt, kid, disclosures, candidates, expect)


def credential_jwt_flow(token: str, expect: BrokerExpectations) -> Flow[IdentityCredential]:
    """A credential JWT (@getparafe/verify `verifyCredentialJWT`)."""
    if not isinstance(token, str):
        raise err.receipt_error(MALFORMED, "Not a compact JWS")
    kid, alg = broker_jws_header(token)
    candidates = yield from _broker_keys(kid, alg, partial(key_error, subject="credential"))
    return check_credential_jwt(token, kid, candidates, expect)


def _revoked_document(exc: DidUnavailable) -> DidDocument:
    """The document a 410 carries for a revoked agent; KEY_FETCH_FAILED for anything else."""
    body = exc.body
    if exc.status == 410 and isinstance(body, Mapping):
        revoked_at = body.get("revoked_at")
        document = body.get("did_document")
        if parse_iso(revoked_at) is not None and isinstance(document, Mapping):
            return DidDocument(document=document, revoked_at=revoked_at)
        raise err.receipt_error(KEY_FETCH_FAILED, "The issuer's DID document is gone (410)")
    if exc.status is None:
        raise err.receipt_error(
            KEY_FETCH_FAILED, f"Could not fetch the issuer's DID document: {exc}"
        )
    raise err.receipt_error(
        KEY_FETCH_FAILED, f"Could not fetch the issuer's DID document ({exc.status})"
    )


# -- the two drivers -------------------------------------------------------------------------


def run(flow: Flow[T], keys: KeySource, replay: ReplayMemory | None = None) -> T:
    """Drive `flow` with blocking I/O."""

    def answer(need: Need) -> Any:
        if isinstance(need, NeedBrokerKeys):
            return keys.broker_keys(need.kid, need.alg)
        if isinstance(need, NeedDidDocument):
            return keys.did_document(need.agent_id)
        if isinstance(need, NeedFirstUse):
            return _replay(replay).first_use(need.key, now=need.now, expires_at=need.expires_at)
        return keys.post(need.path, need.body)

    return drive(flow, answer, catch=_IO_ERRORS)


async def arun(flow: Flow[T], keys: KeySource, replay: ReplayMemory | None = None) -> T:
    """Drive `flow` with non-blocking I/O: cached keys never leave the event loop."""

    async def answer(need: Need) -> Any:
        if isinstance(need, NeedBrokerKeys):
            return await keys.abroker_keys(need.kid, need.alg)
        if isinstance(need, NeedDidDocument):
            return await keys.adid_document(need.agent_id)
        if isinstance(need, NeedFirstUse):
            memory = _replay(replay)
            if memory.may_block:
                return await asyncio.to_thread(
                    memory.first_use, need.key, now=need.now, expires_at=need.expires_at
                )
            return memory.first_use(need.key, now=need.now, expires_at=need.expires_at)
        return await keys.apost(need.path, need.body)

    return await adrive(flow, answer, catch=_IO_ERRORS)


def _replay(replay: ReplayMemory | None) -> ReplayMemory:
    if replay is None:
        raise RuntimeError("this flow needs a replay memory")
    return replay


__all__ = [
    "Flow",
    "Need",
    "NeedBrokerKeys",
    "NeedBrokerPost",
    "NeedDidDocument",
    "NeedFirstUse",
    "VerifiedConsent",
    "action_receipt_flow",
    "arun",
    "consent_flow",
    "credential_jwt_flow",
    "identity_credential_flow",
    "index_ack_flow",
    "online_flow",
    "proof_flow",
    "run",
    "session_receipt_flow",
    "token_flow",
]
