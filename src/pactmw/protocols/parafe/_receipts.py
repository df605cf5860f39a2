"""Checking action receipts, index acknowledgments and session receipts (parafe-verifier.md
§7), and the hashes that link them. Pure.

Checking receipts other agents or the broker signed follows @getparafe/verify (§7.3),
including its error codes (§9.4); signing is `_receipt_signer`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from attrs import field, frozen

from pactmw.core.errors import JoseError, MalformedInput
from pactmw.core.jcs import canonicalize
from pactmw.core.jose import JWS, parse_compact, verify_signature
from pactmw.core.jwk import PublicJWK, import_public_jwk
from pactmw.protocols.parafe._constants import (
    ACTION_ERRORS,
    ACTION_RECEIPT_TYP,
    INDEX_ACK_TYP,
    RECEIPT_CLOCK_TOLERANCE,
    SESSION_RECEIPT_TYP,
)
from pactmw.protocols.parafe._errors import KEY_FETCH_FAILED, ParafeError, receipt_error
from pactmw.protocols.parafe._jwt import (
    EXPIRED,
    NOT_YET_VALID,
    TIME_MESSAGES,
    TIME_OK,
    decode_unverified,
    is_number,
    sha256_b64url,
    strict_equal,
    time_check,
    typ_matches,
    whole_seconds,
)

MALFORMED = "MALFORMED"
INVALID_SIGNATURE = "INVALID_SIGNATURE"
KEY_NOT_FOUND = "KEY_NOT_FOUND"
ISSUER_REVOKED = "ISSUER_REVOKED"
ISSUER_MISMATCH = "ISSUER_MISMATCH"

_ALG_FOR_KTY = {"EC": "ES256", "OKP": "EdDSA"}


# -- hashes (§7.1, §7.4) ---------------------------------------------------------------------


def consent_ref(consent_token: str) -> str:
    """A receipt's `consent_ref` (and a proof's `ath`): base64url(SHA-256(token))."""
    return sha256_b64url(consent_token)


def receipt_hash(jws: str) -> str:
    """How the broker's index names a receipt: base64url(SHA-256(the JWS))."""
    return sha256_b64url(jws)


def entry_hash(seq: int, receipt_hash_value: str, prev: str | None) -> str:
    """An index entry's hash: base64url(SHA-256("<seq>|<receipt_hash>|<prev or empty>"))."""
    return sha256_b64url(f"{seq}|{receipt_hash_value}|{prev or ''}")


def details_hash(details: Any) -> str:
    """The "args hash": base64url(SHA-256(RFC 8785 JSON of `details`))."""
    return sha256_b64url(canonicalize(details))


# -- checking --------------------------------------------------------------------------------


@frozen
class ActionReceipt:
    """An action receipt that checked out (§7.3). `claims` is the verified payload."""

    claims: Mapping[str, Any] = field(repr=False)
    iss: str
    session_id: str
    consent_ref: str
    action: str
    result: str
    error: str | None
    jti: str
    key_id: str | None
    issuer_revoked_at: str | None = None

    @property
    def business_ref(self) -> Any:
        return self.claims.get("business_ref")


@frozen
class IndexAck:
    """The broker's acknowledgment that a receipt was filed at `seq` of a session's chain."""

    claims: Mapping[str, Any] = field(repr=False)
    session_id: Any
    seq: int
    receipt_hash: str
    entry_hash: str
    prev: str | None
    kind: Any
    receipt_iss: Any
    indexed_at: Any


@frozen
class SessionReceipt:
    """A broker-signed session receipt v2 (typ `parafe-session-receipt+jwt`)."""

    claims: Mapping[str, Any] = field(repr=False)
    session_id: Any
    chain_head: Any
    actions: tuple[Any, ...]


def _fail(code: str, detail: str) -> ParafeError:
    return receipt_error(code, detail)


def decode_receipt(jws: str) -> tuple[Mapping[str, Any], dict[str, Any]]:
    """§7.3 step 1: header and payload, unverified; MALFORMED unless both are JSON objects."""
    decoded = decode_unverified(jws)
    if decoded is None:
        raise _fail(MALFORMED, "Not a compact JWS")
    header, payload = decoded
    if header.get("typ") != ACTION_RECEIPT_TYP:
        raise _fail(MALFORMED, f"typ must be {ACTION_RECEIPT_TYP}")
    if not isinstance(payload.get("iss"), str):
        raise _fail(MALFORMED, "iss is required")
    return header, payload


def receipt_key(jwk: Any) -> PublicJWK:
    """The issuer's key; an unusable JWK fails as the reference's `importJWK` would."""
    if isinstance(jwk, PublicJWK):
        return jwk
    if not isinstance(jwk, Mapping):
        raise _fail(KEY_NOT_FOUND, "The issuer's DID document has no such key")
    try:
        return import_public_jwk(jwk)
    except MalformedInput as exc:
        raise _fail(INVALID_SIGNATURE, f"The issuer's key is unusable ({exc})") from exc


def _verify_jws(jws_text: str, key: PublicJWK, alg: str) -> tuple[JWS, dict[str, Any]]:
    try:
        jws = parse_compact(jws_text, allowed_algs=frozenset({alg}))
    except JoseError as exc:
        if exc.code == "alg_not_allowed":
            raise _fail(INVALID_SIGNATURE, f"The key signs {alg}") from exc
        raise _fail(MALFORMED, str(exc)) from exc
    try:
        verify_signature(jws, key)
    except JoseError as exc:
        raise _fail(INVALID_SIGNATURE, "JWS signature verification failed") from exc
    try:
        return jws, jws.claims()
    except JoseError as exc:
        raise _fail(MALFORMED, str(exc)) from exc


def _time_failure(outcome: str, subject: str) -> ParafeError:
    if outcome == EXPIRED:
        return _fail("EXPIRED", f"The {subject} has expired")
    if outcome == NOT_YET_VALID:
        return _fail("NOT_YET_VALID", f"The {subject} is not valid yet")
    return _fail(MALFORMED, TIME_MESSAGES[outcome])


def check_action_receipt(
    jws_text: str,
    *,
    header: Mapping[str, Any],
    key: PublicJWK,
    now: float,
    expected_session_id: str | None = None,
    consent_token: str | None = None,
) -> ActionReceipt:
    """§7.3 from "header alg must match the key type" on; the caller found `key`."""
    alg = _ALG_FOR_KTY.get(key.kty)
    if alg is None:
        raise _fail(INVALID_SIGNATURE, "The issuer's key is neither P-256 nor Ed25519")
    if header.get("alg") != alg:
        raise _fail(INVALID_SIGNATURE, f"The issuer's key signs {alg}, the receipt says otherwise")
    jws, claims = _verify_jws(jws_text, key, alg)
    seconds = whole_seconds(now)
    outcome = time_check(claims, now=seconds, tolerance=RECEIPT_CLOCK_TOLERANCE)
    if outcome != TIME_OK:
        raise _time_failure(outcome, "receipt")
    if not strict_equal(claims.get("ver"), 1):
        raise _fail(MALFORMED, "Not a v1 action receipt (ver)")
    for name in ("session_id", "consent_ref", "action", "jti"):
        if not isinstance(claims.get(name), str) or not claims[name]:
            raise _fail(MALFORMED, f'Action receipt missing "{name}"')
    iat = claims.get("iat")
    if not is_number(iat):
        raise _fail(MALFORMED, "iat is required")
    if iat > seconds + RECEIPT_CLOCK_TOLERANCE:
        raise _fail(MALFORMED, "iat is in the future")
    result = claims.get("result")
    if result not in ("success", "error") or not isinstance(result, str):
        raise _fail(MALFORMED, "result must be 'success' or 'error'")
    error = claims.get("error")
    if result == "error" and not (isinstance(error, str) and error in ACTION_ERRORS):
        raise _fail(MALFORMED, f"error must be one of {', '.join(sorted(ACTION_ERRORS))}")
    if result == "success" and error is not None:
        raise _fail(MALFORMED, "error must be null on 'success'")
    if expected_session_id is not None and claims["session_id"] != expected_session_id:
        raise _fail(MALFORMED, "The receipt is for another session")
    if consent_token is not None and claims["consent_ref"] != consent_ref(consent_token):
        raise _fail(MALFORMED, "The receipt is bound to another consent token")
    return ActionReceipt(
        claims=MappingProxyType(claims),
        iss=claims["iss"],
        session_id=claims["session_id"],
        consent_ref=claims["consent_ref"],
        action=claims["action"],
        result=result,
        error=error if isinstance(error, str) else None,
        jti=claims["jti"],
        key_id=jws.kid,
    )


def _broker_key(candidates: Sequence[PublicJWK]) -> PublicJWK:
    if not candidates:
        raise _fail(KEY_NOT_FOUND, "No broker key matches the kid")
    if len(candidates) > 1:
        raise _fail(KEY_NOT_FOUND, "More than one broker key matches the kid")
    return candidates[0]


def broker_jws_header(jws_text: str) -> tuple[str, str]:
    """The JWKS `kid` and the `alg` a broker-signed JWS names (ES256 only), as
    @getparafe/verify's `brokerKeyFor` reads them.

    A `kid` that is a DID URL (`did:web:api.parafe.ai#<kid>`, the form the broker's credentials
    use) names the JWKS key of its fragment. A JWS that names no key (no `kid`, an empty one, or
    an empty fragment) is refused with KEY_NOT_FOUND rather than tried against every key: every
    broker JWS has named its key since 2026-09-30, and the reference refuses one that does not.
    An alg other than ES256 is INVALID_SIGNATURE, anything unreadable MALFORMED.
    """
    try:
        jws = parse_compact(jws_text, allowed_algs=frozenset({"ES256"}))
    except JoseError as exc:
        if exc.code == "alg_not_allowed":
            raise _fail(INVALID_SIGNATURE, "Broker artifacts are ES256") from exc
        raise _fail(MALFORMED, str(exc)) from exc
    kid = jws.kid
    if kid is not None and "#" in kid:
        kid = kid.rsplit("#", 1)[1]
    if not kid:
        raise _fail(KEY_NOT_FOUND, "Broker JWS has no kid")
    return kid, jws.alg


@frozen
class BrokerExpectations:
    """What a broker-signed JWS is held to besides its key: the time `now` (epoch seconds)
    with `tolerance` seconds of clock skew, and its `iss` when `expected_issuer` is given."""

    now: float
    tolerance: int = 0
    expected_issuer: str | None = None


def check_broker_jws(
    jws_text: str,
    candidates: Sequence[PublicJWK],
    expect: BrokerExpectations,
    *,
    typ: str | None,
    subject: str,
) -> dict[str, Any]:
    """A broker JWS verified with the one candidate key, then its typ (unless None), issuer
    (when expected) and times, in jose's order."""
    key = _broker_key(candidates)
    jws, claims = _verify_jws(jws_text, key, "ES256")
    if typ is not None and not typ_matches(jws.header, typ):
        raise _fail(MALFORMED, f"typ must be {typ}")
    issuer = expect.expected_issuer
    if issuer is not None and not strict_equal(claims.get("iss"), issuer):
        raise _fail(ISSUER_MISMATCH, f"The {subject} is not from {issuer}")
    outcome = time_check(claims, now=whole_seconds(expect.now), tolerance=expect.tolerance)
    if outcome != TIME_OK:
        raise _time_failure(outcome, subject)
    return claims


def check_index_ack(
    jws_text: str, candidates: Sequence[PublicJWK], expect: BrokerExpectations
) -> IndexAck:
    """An index acknowledgment (§7.4): broker ES256, `ver` 1, and `entry_hash` recomputes."""
    claims = check_broker_jws(
        jws_text, candidates, expect, typ=INDEX_ACK_TYP, subject="acknowledgment"
    )
    if not strict_equal(claims.get("ver"), 1):
        raise _fail(MALFORMED, "Not a v1 index acknowledgment (ver)")
    seq, rhash, ehash = claims.get("seq"), claims.get("receipt_hash"), claims.get("entry_hash")
    if not is_number(seq) or not isinstance(rhash, str) or not isinstance(ehash, str):
        raise _fail(MALFORMED, "Acknowledgment missing seq, receipt_hash or entry_hash")
    prev = claims.get("prev")
    prev_text = prev if isinstance(prev, str) else None
    # JavaScript writes a whole number without ".0": so must the recomputation.
    seq_int = (
        seq
        if isinstance(seq, int)
        else int(seq)
        if math.isfinite(seq) and seq.is_integer()
        else None
    )
    if (
        seq_int is None
        or ehash != entry_hash(seq_int, rhash, prev_text)
        or (prev is not None and prev_text is None)
    ):
        raise _fail(MALFORMED, "entry_hash does not recompute from seq, receipt_hash and prev")
    return IndexAck(
        claims=MappingProxyType(claims),
        session_id=claims.get("session_id"),
        seq=seq_int,
        receipt_hash=rhash,
        entry_hash=ehash,
        prev=prev_text,
        kind=claims.get("kind"),
        receipt_iss=claims.get("receipt_iss"),
        indexed_at=claims.get("indexed_at"),
    )


def check_session_receipt(
    jws_text: str, candidates: Sequence[PublicJWK], expect: BrokerExpectations
) -> SessionReceipt:
    """A session receipt v2: broker ES256, typ `parafe-session-receipt+jwt`, `ver` 2, and the
    members every receipt has."""
    claims = check_broker_jws(
        jws_text, candidates, expect, typ=SESSION_RECEIPT_TYP, subject="session receipt"
    )
    if not strict_equal(claims.get("ver"), 2):
        raise _fail(MALFORMED, "Not a v2 session receipt (ver)")
    for name in ("receipt_id", "session_id", "participants", "consent_tokens", "session"):
        if claims.get(name) is None:
            raise _fail(MALFORMED, f'Receipt missing "{name}"')
    actions = claims.get("actions")
    return SessionReceipt(
        claims=MappingProxyType(claims),
        session_id=claims.get("session_id"),
        chain_head=claims.get("chain_head"),
        actions=tuple(actions) if isinstance(actions, list) else (),
    )


def check_session_index(
    session: SessionReceipt,
    *,
    receipts: Iterable[str] = (),
    acknowledgments: Iterable[IndexAck] = (),
) -> str | None:
    """Check a verified session receipt's index: `actions` recompute to `chain_head`, every
    receipt you hold is listed, every (verified) acknowledgment matches its entry.

    Returns the chain head; raises `ParafeError(MALFORMED)` otherwise.
    """
    chain: list[str] = []
    prev: str | None = None
    for index, action in enumerate(session.actions):
        seq = action.get("seq") if isinstance(action, Mapping) else None
        rhash = action.get("receipt_hash") if isinstance(action, Mapping) else None
        if not strict_equal(seq, index + 1) or not isinstance(rhash, str):
            raise _fail(MALFORMED, f"actions[{index}] is not entry {index + 1}")
        prev = entry_hash(index + 1, rhash, prev)
        chain.append(prev)
    if not strict_equal(session.chain_head, prev):
        raise _fail(MALFORMED, "chain_head does not recompute from actions")
    listed = {a.get("receipt_hash") for a in session.actions if isinstance(a, Mapping)}
    missing = [r for r in receipts if receipt_hash(r) not in listed]
    if missing:
        raise _fail(MALFORMED, f"{len(missing)} receipt(s) not listed on the session receipt")
    for ack in acknowledgments:
        if not strict_equal(ack.session_id, session.session_id):
            raise _fail(MALFORMED, f"Acknowledgment {ack.seq} is for another session")
        entry = session.actions[ack.seq - 1] if 1 <= ack.seq <= len(session.actions) else None
        if (
            not isinstance(entry, Mapping)
            or entry.get("receipt_hash") != ack.receipt_hash
            or not strict_equal(entry.get("kind"), ack.kind)
            or chain[ack.seq - 1] != ack.entry_hash
        ):
            raise _fail(MALFORMED, f"Acknowledgment {ack.seq} does not match its entry")
    return prev


__all__ = [
    "INVALID_SIGNATURE",
    "ISSUER_MISMATCH",
    "ISSUER_REVOKED",
    "KEY_FETCH_FAILED",
    "KEY_NOT_FOUND",
    "MALFORMED",
    "ActionReceipt",
    "BrokerExpectations",
    "IndexAck",
    "SessionReceipt",
    "broker_jws_header",
    "check_action_receipt",
    "check_broker_jws",
    "check_index_ack",
    "check_session_index",
    "check_session_receipt",
    "consent_ref",
    "decode_receipt",
    "details_hash",
    "entry_hash",
    "receipt_hash",
    "receipt_key",
]
