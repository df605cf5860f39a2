"""The fake broker of tests/parafe, extended for the integration tests.

`IssuingBroker` is `tests.parafe.fake_broker.FakeBroker` (JWKS, DID documents, online
verification) plus, for these tests only:

- token issuance in process (`issue`): consent tokens signed with the broker's own ES256 key,
  shaped like the broker's (parafe-verifier.md §3); session receipts likewise;
- `POST /sessions/{id}/action-receipts`: receipt filing (§7.4). It records the request (the
  `Authorization` and `Parafe-PoP` headers too) and answers 201 with the broker-signed index
  acknowledgment (typ `parafe-index-ack+jwt`, the claims of §7.4, `kind` as filed, the
  session's hash chain), or 409 `duplicate_receipt` with the original acknowledgment for a
  receipt filed before; `filing_answer` can force another answer;
- `POST /test/handshake/complete`: a TEST-ONLY stand-in for the broker's handshake
  completion, whose wire format the reference does not give. Its body and answer are made up
  for the tests (`{handshake_id, challenge}` -> `{session_id, consent_token}`) and are not
  Parafé's;
- `POST /handshake/complete`: the broker's handshake completion, in the reference SDK's wire
  format (`completeHandshake`): `{handshake_id, target_credential, challenge_response}`, the
  response checked against the target's registered key, answered `{handshake_id, session:
  {session_id}, consent_token: {token, session_id, ...}}` or a `{error, message}` refusal.
  Handshakes are opened in process (`open_handshake`); `handshake_answer` can force an answer,
  and `handshake_failures` (status, body, headers) answers, or `DROP` (the connection closed
  without an answer), are served first, one a request.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK, PublicJWK, generate_private_jwk
from pactmw.protocols.parafe import agent_did, entry_hash, receipt_hash
from tests.parafe.fake_broker import FakeBroker, _Handler
from tests.parafe.support import did_document

FILING_PREFIX = "/sessions/"
FILING_SUFFIX = "/action-receipts"
TEST_HANDSHAKE_PATH = "/test/handshake/complete"
HANDSHAKE_PATH = "/handshake/complete"
#: A scripted failure: close the connection without answering.
DROP = "drop"

Scripted = tuple[int, Any, dict[str, str]] | str


class IssuingBroker(FakeBroker):
    """See the module docstring."""

    def __init__(self) -> None:
        self.key: PrivateJWK = generate_private_jwk("ES256")
        super().__init__(
            jwks={"keys": [{**self.key.public.to_dict(), "use": "sig", "status": "active"}]}
        )
        self.filed: list[dict[str, Any]] = []
        self.filing_answer: Callable[[dict[str, Any]], tuple[int, Any] | None] | None = None
        #: handshake_id -> what the test handshake endpoint issues for it.
        self.pending_handshakes: dict[str, dict[str, Any]] = {}
        self.handshake_requests: list[dict[str, Any]] = []
        self._filing_lock = threading.Lock()
        #: agent id -> registered key / credential (for `POST /handshake/complete`).
        self.agent_keys: dict[str, PublicJWK] = {}
        self.credentials: dict[str, str] = {}
        #: handshake_id -> the opened handshake (see `open_handshake`).
        self.handshakes: dict[str, dict[str, Any]] = {}
        self.complete_requests: list[dict[str, Any]] = []
        self.handshake_answer: tuple[int, Any] | None = None
        self.handshake_failures: list[Scripted] = []
        #: session id -> the acknowledgments of its index, in order.
        self.index: dict[str, list[dict[str, Any]]] = {}

    def register(self, agent_id: str, key: PublicJWK, credential: str | None = None) -> None:
        """Serve the agent's DID document (the key it registered); remember its credential."""
        self.add_agent(agent_id, did_document(agent_id, key))
        self.agent_keys[agent_id] = key
        if credential is not None:
            self.credentials[agent_id] = credential

    def open_handshake(self, **issue: Any) -> dict[str, str]:
        """What `POST /handshake/initiate` does, in process: a handshake whose completion will
        issue a token with `issue`'s options (`World.presenter`'s); (handshake_id, challenge)."""
        handshake_id = "hs_" + uuid.uuid4().hex[:12]
        challenge = secrets.token_hex(32)
        self.handshakes[handshake_id] = {"challenge": challenge, "issue": issue}
        return {"handshake_id": handshake_id, "challenge": challenge}

    # -- issuance (test-only, in process) ---------------------------------------------------

    def issue(
        self,
        *,
        initiator_id: str,
        initiator_key: PublicJWK,
        target_id: str,
        scope: str,
        permissions: list[str],
        exclusions: list[str] | None = None,
        session_id: str | None = None,
        modality: str = "attested",
        lifetime: int = 300,
        **overrides: Any,
    ) -> tuple[str, str]:
        """A consent token for `initiator_id` to act on `target_id`; (token, session id)."""
        now = int(time.time())
        session_id = session_id or "sess_" + uuid.uuid4().hex
        excluded = list(exclusions or [])
        claims: dict[str, Any] = {
            "ver": 2,
            "scope": scope,
            "permissions": permissions,
            "exclusions": excluded,
            "excluded": excluded,
            "session_id": session_id,
            "token_type": "consent",
            "authorization_modality": modality,
            "initiator_agent_id": initiator_id,
            "target_agent_id": target_id,
            "parent_token_id": None,
            "cnf": {"jkt": initiator_key.thumbprint},
            "initiator_proof": "pop",
            "initiator_proof_at": now,
            "iat": now,
            "exp": now + lifetime,
            "iss": "parafe-trust-broker",
            "jti": str(uuid.uuid4()),
            "sub": initiator_id,
            "aud": agent_did(target_id),
            **overrides,
        }
        return sign_compact(claims, self.key), session_id

    def session_receipt(
        self,
        session_id: str,
        actions: list[dict[str, Any]] | None = None,
        chain_head: str | None = None,
    ) -> str:
        """A broker-signed session receipt v2 for `session_id`."""
        now = int(time.time())
        return sign_compact(
            {
                "ver": 2,
                "receipt_id": "rcpt_" + uuid.uuid4().hex,
                "session_id": session_id,
                "participants": [],
                "consent_tokens": [],
                "session": {"status": "closed"},
                "actions": actions or [],
                "chain_head": chain_head,
                "iss": "did:web:api.parafe.ai",
                "iat": now,
            },
            self.key,
            typ="parafe-session-receipt+jwt",
        )

    # -- extra endpoints ---------------------------------------------------------------------

    def _serve(self, handler: _Handler, method: str) -> None:
        path = urlsplit(handler.path).path
        if method == "POST" and path.startswith(FILING_PREFIX) and path.endswith(FILING_SUFFIX):
            session_id = unquote(path[len(FILING_PREFIX) : -len(FILING_SUFFIX)])
            self._file(handler, session_id)
            return
        if method == "POST" and path == HANDSHAKE_PATH:
            self._complete(handler)
            return
        if method == "POST" and path == TEST_HANDSHAKE_PATH:
            body = self._json(handler)
            with self._lock:
                self.hits[path] += 1
                self.requests.append((method, path, body))
                self.handshake_requests.append(
                    {
                        "body": body,
                        "authorization": handler.headers.get("Authorization"),
                        "pop": handler.headers.get("Parafe-PoP"),
                    }
                )
            issued = self.pending_handshakes.get(str(body.get("handshake_id")))
            if issued is None:
                self._send(handler, 404, {"error": "handshake_not_found"})
            else:
                self._send(handler, 200, issued)
            return
        super()._serve(handler, method)

    @staticmethod
    def _json(handler: _Handler) -> dict[str, Any]:
        length = int(handler.headers.get("Content-Length") or 0)
        try:
            parsed = json.loads(handler.rfile.read(length))
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}

    def _complete(self, handler: _Handler) -> None:
        body = self._json(handler)
        with self._lock:
            self.hits[HANDSHAKE_PATH] += 1
            self.complete_requests.append(
                {
                    "body": body,
                    "authorization": handler.headers.get("Authorization"),
                    "pop": handler.headers.get("Parafe-PoP"),
                    "content_type": handler.headers.get("Content-Type"),
                }
            )
        if self.handshake_failures:
            failure = self.handshake_failures.pop(0)
            if failure == DROP:
                return  # nothing written: the client sees the connection close
            assert not isinstance(failure, str)
            self._send(handler, *failure)
            return
        if self.handshake_answer is not None:
            self._send(handler, *self.handshake_answer)
            return
        handshake = self.handshakes.get(str(body.get("handshake_id")))
        if handshake is None:
            self._send(handler, 404, {"error": "handshake_not_found", "message": "No such"})
            return
        issue = handshake["issue"]
        target = issue["target_id"]
        credential = body.get("target_credential")
        if not credential or self.credentials.get(target) != credential:
            self._send(handler, 401, {"error": "invalid_credential", "message": "Bad credential"})
            return
        if not _signed(
            self.agent_keys[target], handshake["challenge"], body.get("challenge_response")
        ):
            self._send(
                handler, 401, {"error": "invalid_challenge_response", "message": "Bad signature"}
            )
            return
        del self.handshakes[str(body["handshake_id"])]
        token, session_id = self.issue(**issue)
        self._send(
            handler,
            200,
            {
                "handshake_id": body["handshake_id"],
                "session": {"session_id": session_id},
                "consent_token": {
                    "token": token,
                    "scope": issue["scope"],
                    "permissions": issue["permissions"],
                    "exclusions": issue.get("exclusions") or [],
                    "authorization": {"modality": "attested"},
                    "session_id": session_id,
                    "issued_at": "2026-01-01T00:00:00Z",
                    "expires_at": "2026-01-01T00:05:00Z",
                },
            },
        )

    def acknowledge(self, session_id: str, receipt: str, kind: str) -> dict[str, Any]:
        """Index `receipt` at the end of the session's chain: the 201 answer, with the
        broker-signed acknowledgment (§7.4)."""
        entries = self.index.setdefault(session_id, [])
        seq = len(entries) + 1
        rhash = receipt_hash(receipt)
        prev = entries[-1]["entry_hash"] if entries else None
        ehash = entry_hash(seq, rhash, prev)
        now = int(time.time())
        iss = unverified_iss(receipt)
        claims = {
            "ver": 1,
            "session_id": session_id,
            "seq": seq,
            "receipt_hash": rhash,
            "kind": kind,
            "receipt_iss": iss,
            "issuer_verified": iss is not None,
            "prev": prev,
            "entry_hash": ehash,
            "indexed_at": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now)),
            "iss": "did:web:api.parafe.ai",
            "iat": now,
            "jti": str(uuid.uuid4()),
        }
        answer = {
            "session_id": session_id,
            "seq": seq,
            "receipt_hash": rhash,
            "entry_hash": ehash,
            "acknowledgment": sign_compact(claims, self.key, typ="parafe-index-ack+jwt"),
        }
        entries.append({**answer, "receipt": receipt})
        return answer

    def _file(self, handler: _Handler, session_id: str) -> None:
        body = self._json(handler)
        record: dict[str, Any] = {
            "session_id": session_id,
            "body": body,
            "authorization": handler.headers.get("Authorization"),
            "pop": handler.headers.get("Parafe-PoP"),
            "url_path": urlsplit(handler.path).path,
        }
        with self._lock:
            self.hits[urlsplit(handler.path).path] += 1
        forced = self.filing_answer(record) if self.filing_answer is not None else None
        with self._filing_lock:
            self.filed.append(record)
            if forced is not None:
                status, payload = forced
            else:
                receipt = str(body.get("receipt"))
                kind = str(body.get("kind", "parafe.action_receipt"))
                earlier = [e for e in self.index.get(session_id, []) if e["receipt"] == receipt]
                if earlier:
                    status = 409
                    payload = {
                        "error": "duplicate_receipt",
                        "acknowledgment": earlier[0]["acknowledgment"],
                    }
                else:
                    status, payload = 201, self.acknowledge(session_id, receipt, kind)
            record["status"] = status
        self._send(handler, status, payload)


def unverified_iss(jws: str) -> str | None:
    """The `iss` of a JWS's payload, unverified (None when unreadable)."""
    try:
        payload = json.loads(base64.urlsafe_b64decode(jws.split(".")[1] + "=="))
    except (IndexError, ValueError):
        return None
    iss = payload.get("iss") if isinstance(payload, dict) else None
    return iss if isinstance(iss, str) else None


def _signed(key: PublicJWK, challenge: str, response: Any) -> bool:
    """Whether `response` is base64 of `key`'s signature over the challenge's bytes (Ed25519,
    or ES256 as raw r||s)."""
    if not isinstance(response, str):
        return False
    try:
        signature = base64.b64decode(response, validate=True)
    except (binascii.Error, ValueError):
        return False
    data = bytes.fromhex(challenge)
    public = key.key
    try:
        if isinstance(public, ec.EllipticCurvePublicKey):
            if len(signature) != 64:
                return False
            der = encode_dss_signature(
                int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
            )
            public.verify(der, data, ec.ECDSA(hashes.SHA256()))
        elif isinstance(public, ed25519.Ed25519PublicKey):
            public.verify(signature, data)
        else:
            return False
    except InvalidSignature:
        return False
    return True
