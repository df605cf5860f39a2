"""A presentation proof checked on its own: the reference's `verifyPresentationProof`.

`ParafeVerifier` checks the proof a message carries after the token. An agent that verified
the token some other way (online, or with its own code) checks the proof with
`verify_presentation_proof` instead. This runs the same flow (`proof_flow`, so the same
checks, order and messages, §6) with the same drivers (`run`, `arun`). It is not a second
implementation.

It differs from the reference in two places:
- Replay memory is the caller's choice (`replay`). The reference keeps a per-process memory
  you cannot turn off. @getparafe/verify keeps none. `replay=None` checks no replay, so
  refusing a repeated `ProofClaims.jti` is then up to you.
- `expected_audience` is optional, as in @getparafe/verify. When given, the proof's `aud`
  must also equal it, checked right after the token's `aud`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from attrs import field, frozen

from pactmw.core.jwk import PublicJWK
from pactmw.core.replay import ReplayMemory
from pactmw.protocols.parafe._broker import KeySource
from pactmw.protocols.parafe._consent import ConsentClaims
from pactmw.protocols.parafe._did import DidDocument
from pactmw.protocols.parafe._flows import Flow, arun, proof_flow, run
from pactmw.protocols.parafe._http import HttpAnswer
from pactmw.protocols.parafe._proof import KeyBound, ProofClaims


@frozen
class _TokenClaims:
    """A plain mapping of consent-token claims, read the way `ConsentClaims` reads them.

    The `jkt` and `initiator` properties are `ConsentClaims`'s own, so there is one reading.
    """

    claims: Mapping[str, Any] = field(repr=False)

    jkt = ConsentClaims.jkt
    initiator = ConsentClaims.initiator


class _AnyFirstUse:
    """With `replay=None`, every proof counts as used for the first time."""

    may_block = False

    def first_use(self, key: str, *, now: float, expires_at: float) -> bool:
        return True


class _GivenKeyOnly:
    """The key source when the caller gave the initiator's key. The flow never asks it for
    anything: `proof_flow` fetches no DID document when it has a key."""

    broker_url = ""

    def broker_keys(self, kid: str | None, alg: str) -> tuple[PublicJWK, ...]:
        raise _unused()

    async def abroker_keys(self, kid: str | None, alg: str) -> tuple[PublicJWK, ...]:
        raise _unused()

    def did_document(self, agent_id: str) -> DidDocument:
        raise _unused()

    async def adid_document(self, agent_id: str) -> DidDocument:
        raise _unused()

    def post(self, path: str, body: Mapping[str, Any]) -> HttpAnswer:
        raise _unused()

    async def apost(self, path: str, body: Mapping[str, Any]) -> HttpAnswer:
        raise _unused()


def _unused() -> AssertionError:
    return AssertionError("a proof check given initiator_key needs no key source")


def _bound(claims: ConsentClaims | Mapping[str, Any]) -> KeyBound:
    if isinstance(claims, ConsentClaims):
        return claims
    if isinstance(claims, Mapping):
        return _TokenClaims(claims)
    raise TypeError("claims must be the consent token's claims (ConsentClaims or a mapping)")


def _prepare(
    proof: Any,
    token: str,
    claims: ConsentClaims | Mapping[str, Any],
    replay: ReplayMemory | None,
    initiator_key: PublicJWK | Mapping[str, Any] | None,
    keys: KeySource | None,
    message_id: str | None,
    expected_audience: str | None,
    now: float | None,
) -> tuple[Flow[ProofClaims], KeySource, ReplayMemory]:
    """The flow and what drives it (the key source, the replay memory), in the order of the
    public functions' parameters; they differ only in how they run it."""
    if not isinstance(token, str):
        raise TypeError("token must be the consent token (a compact JWS string)")
    if initiator_key is None and keys is None:
        raise ValueError(
            "pass initiator_key, or keys (BrokerKeys) to read it from the initiator's DID document"
        )
    source: KeySource = keys if keys is not None else _GivenKeyOnly()
    flow = proof_flow(
        proof,
        token=token,
        consent=_bound(claims),
        now=time.time() if now is None else now,
        message_id=message_id,
        broker_url=source.broker_url,
        key=initiator_key,
        expected_audience=expected_audience,
    )
    return flow, source, replay if replay is not None else _AnyFirstUse()


def verify_presentation_proof(
    proof: str,
    token: str,
    claims: ConsentClaims | Mapping[str, Any],
    *,
    replay: ReplayMemory | None,
    initiator_key: PublicJWK | Mapping[str, Any] | None = None,
    keys: KeySource | None = None,
    message_id: str | None = None,
    expected_audience: str | None = None,
    now: float | None = None,
) -> ProofClaims:
    """Check the presentation proof that came with a consent token (§6), on its own.

    `token` is the consent token as it was sent, and `claims` its claims (`ConsentClaims`,
    or the payload as a mapping). Verify the token first: the proof is checked against the
    token's `cnf.jkt`, `sub` (or `initiator_agent_id`) and `aud`, and is worth no more than
    they are. The initiator's key is `initiator_key`, or the first key of its DID document
    from `keys` (cached by `BrokerKeys`). `message_id` is compared with the proof's `mid`
    when both are present. `replay` is required: a `ReplayMemory` makes each proof
    single-use for 360 s, and `None` leaves replays to the caller. `now` is epoch seconds
    (default: the clock).

    Blocking when a DID document must be fetched. Returns the proof's claims. Raises
    `ParafeError(INVALID_PROOF)` with the reference's message for the first failing check.
    """
    prepared = _prepare(
        proof, token, claims, replay, initiator_key, keys, message_id, expected_audience, now
    )
    return run(*prepared)


async def averify_presentation_proof(
    proof: str,
    token: str,
    claims: ConsentClaims | Mapping[str, Any],
    *,
    replay: ReplayMemory | None,
    initiator_key: PublicJWK | Mapping[str, Any] | None = None,
    keys: KeySource | None = None,
    message_id: str | None = None,
    expected_audience: str | None = None,
    now: float | None = None,
) -> ProofClaims:
    """Async `verify_presentation_proof`."""
    prepared = _prepare(
        proof, token, claims, replay, initiator_key, keys, message_id, expected_audience, now
    )
    return await arun(*prepared)


__all__ = ["averify_presentation_proof", "verify_presentation_proof"]
