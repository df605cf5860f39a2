"""A stand-in for the broker's agent endpoints (spec "New to Parafé"), a real HTTP server on
127.0.0.1 in @getparafe/sdk 0.5's wire format, for `pactmw.client.parafe`:

- `POST /agents/register`: `{agent_type, public_key (base64 SPKI DER), agent_name?,
  principal_name?, scope_policies?}` with a `Parafe-PoP` signed by that key (`htm`, `htu`);
  answers 201 `{agent_id, did, agent_name, agent_type, principal_name, identity_assurance:
  self_registered, verification_tier: unverified, credential, credential_sd_jwt?, issued_at,
  expires_at, claim: {claim_url, code, expires_at}}`;
- `POST /agents/{id}/claim-link`, `GET /agents/{id}/claim-status[?wait=N]`,
  `POST /agents/{id}/renew`: `Authorization: Bearer <credential>` and a `Parafe-PoP` binding
  `agent_id`, checked (signature with the registered key, typ, `htm`, `htu` without the query,
  `iat` within 60 s, `jti` single use); 401 `invalid_credential` / `invalid_proof` otherwise.
  Claim status answers `{claimed, operator_type, operator_id, principal_type, principal_ref,
  identity_assurance, verification_tier, principal_tier, credential_current, registered_at}`,
  held up to `wait` seconds until the claim is approved; renewal `{agent_id, renewed, reason?,
  credential?, issued_at?, expires_at?, current_tier?}`, the old credential then refused.

The person's side is in process: `approve(code)` claims the agent (assurance `claimed`, the
principal's tier `email_verified`). `failures` (status, body, headers) are served first, one a
request to these endpoints; `DROP` closes the connection without an answer. Filing, the JWKS
and DID documents are `IssuingBroker`'s.
"""

from __future__ import annotations

import base64
import secrets
import threading
import time
import uuid
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cryptography.hazmat.primitives import serialization

from pactmw.core.encoding import b64url_encode
from pactmw.core.errors import JoseError, MalformedInput
from pactmw.core.jose import parse_compact, sign_compact, verify_signature
from pactmw.core.jwk import PublicJWK, import_public_jwk
from pactmw.protocols.parafe import agent_did
from tests.parafe.fake_broker import _Handler
from tests.parafe_integration.broker import DROP, IssuingBroker, Scripted

REGISTER = "/agents/register"
_ALG = {"EC": "ES256", "OKP": "EdDSA"}


class AgentBroker(IssuingBroker):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        #: agent id -> its record: key, credential, claim code, claimed, tiers.
        self.agents: dict[str, dict[str, Any]] = {}
        self.failures: list[Scripted] = []
        self.agent_requests: list[dict[str, Any]] = []
        self._seen_jtis: set[str] = set()
        self._claimed = threading.Condition()

    # -- the person's side ---------------------------------------------------------------

    def approve(self, code: str) -> None:
        """The person signed in to Parafé approves the claim link `code`."""
        with self._claimed:
            (record,) = [r for r in self.agents.values() if r["code"] == code]
            record.update(claimed=True, principal_tier="email_verified", current=False)
            self._claimed.notify_all()

    # -- serving -------------------------------------------------------------------------

    def _serve(self, handler: _Handler, method: str) -> None:
        path = urlsplit(handler.path).path
        if path == REGISTER or (path.startswith("/agents/") and path.count("/") == 3):
            action = path.rsplit("/", 1)[1]
            if action in ("register", "claim-link", "claim-status", "renew"):
                self._agent_call(handler, method, path, action)
                return
        super()._serve(handler, method)

    def _agent_call(self, handler: _Handler, method: str, path: str, action: str) -> None:
        body = self._json(handler) if method == "POST" else {}
        with self._lock:
            self.hits[path] += 1
            self.agent_requests.append(
                {
                    "method": method,
                    "path": path,
                    "query": urlsplit(handler.path).query,
                    "body": body,
                    "authorization": handler.headers.get("Authorization"),
                    "pop": handler.headers.get("Parafe-PoP"),
                }
            )
        if self.failures:
            failure = self.failures.pop(0)
            if failure == DROP:
                return
            assert not isinstance(failure, str)
            self._send(handler, *failure)
            return
        if action == "register":
            self._register(handler, body)
            return
        agent_id = unquote(path.split("/")[2])
        record = self.agents.get(agent_id)
        refused = self._authenticate(handler, method, path, agent_id, record)
        if refused is not None:
            self._send(handler, 401, refused)
            return
        assert record is not None
        if action == "claim-link":
            if record["claimed"]:
                self._send(handler, 409, {"error": "already_claimed", "message": "Claimed"})
                return
            self._send(handler, 201, self._new_claim(record))
        elif action == "claim-status":
            wait = parse_qs(urlsplit(handler.path).query).get("wait", ["0"])[0]
            with self._claimed:
                self._claimed.wait_for(lambda: record["claimed"], timeout=min(float(wait), 5))
            self._send(handler, 200, self._status(record))
        else:
            self._renew(handler, record)

    def _authenticate(
        self,
        handler: _Handler,
        method: str,
        path: str,
        agent_id: str,
        record: dict[str, Any] | None,
    ) -> dict[str, str] | None:
        if record is None:
            return {"error": "agent_not_found", "message": "No such agent"}
        if handler.headers.get("Authorization") != f"Bearer {record['credential']}":
            return {"error": "invalid_credential", "message": "Bad credential"}
        claims = self._proof(handler, record["key"], method, path)
        if claims is None or claims.get("agent_id") != agent_id:
            return {"error": "invalid_proof", "message": "Bad proof of possession"}
        return None

    def _proof(
        self, handler: _Handler, key: PublicJWK, method: str, path: str
    ) -> dict[str, Any] | None:
        """The claims of the request's `Parafe-PoP` when it checks out, else None."""
        proof = handler.headers.get("Parafe-PoP")
        if not isinstance(proof, str):
            return None
        try:
            jws = parse_compact(proof, allowed_algs=frozenset({_ALG[key.kty]}))
            verify_signature(jws, key)
            claims = jws.claims()
        except JoseError:
            return None
        fresh = abs(claims.get("iat", 0) - time.time()) <= 60
        jti = claims.get("jti")
        if (
            jws.header.get("typ") != "parafe-pop+jwt"
            or "kid" in jws.header
            or claims.get("htm") != method
            or claims.get("htu") != self.url + path
            or not fresh
            or not isinstance(jti, str)
        ):
            return None
        with self._lock:
            if jti in self._seen_jtis:
                return None  # a proof is single use
            self._seen_jtis.add(jti)
        return claims

    def _register(self, handler: _Handler, body: dict[str, Any]) -> None:
        try:
            der = base64.b64decode(str(body.get("public_key")), validate=True)
            public = serialization.load_der_public_key(der)
            key = import_public_jwk(_jwk_of(public))
        except (ValueError, MalformedInput, TypeError):
            self._send(handler, 400, {"error": "validation_error", "message": "Bad public_key"})
            return
        if body.get("agent_type") not in ("personal", "enterprise"):
            self._send(handler, 400, {"error": "validation_error", "message": "agent_type"})
            return
        if self._proof(handler, key, "POST", REGISTER) is None:
            self._send(handler, 401, {"error": "invalid_proof", "message": "Prove the key"})
            return
        agent_id = "prf_agent_" + uuid.uuid4().hex[:8]
        record: dict[str, Any] = {
            "key": key,
            "name": body.get("agent_name") or agent_id,
            "claimed": False,
            "principal_tier": None,
            "current": True,
            "registered_at": "2026-09-30T12:00:00.000Z",
        }
        record["credential"] = self._credential(agent_id, record)
        self.agents[agent_id] = record
        self.register(agent_id, key, record["credential"])  # its DID document, for filing
        self._send(
            handler,
            201,
            {
                "agent_id": agent_id,
                "did": agent_did(agent_id),
                "agent_name": record["name"],
                "agent_type": body["agent_type"],
                "principal_name": body.get("principal_name"),
                "identity_assurance": "self_registered",
                "verification_tier": "unverified",
                "operator_type": None,
                "principal_type": None,
                "credential": record["credential"],
                "issued_at": "2026-09-30T12:00:00.000Z",
                "expires_at": "2026-12-29T12:00:00.000Z",
                "claim": self._new_claim(record),
            },
        )

    def _credential(self, agent_id: str, record: dict[str, Any]) -> str:
        now = int(time.time())
        claimed = record["claimed"]
        return sign_compact(
            {
                "sub": agent_id,
                "name": record["name"],
                "identity_assurance": "claimed" if claimed else "self_registered",
                "verification_tier": record["principal_tier"] or "unverified",
                "pub_key_thumbprint": record["key"].thumbprint,
                "iss": "parafe-trust-broker",
                "iat": now,
                "exp": now + 90 * 86400,
                "jti": str(uuid.uuid4()),
            },
            self.key,
        )

    @staticmethod
    def _new_claim(record: dict[str, Any]) -> dict[str, str]:
        raw = secrets.token_hex(5).upper()
        record["code"] = code = f"{raw[:4]}-{raw[4:8]}-{raw[8:]}"
        return {
            "claim_url": f"https://platform.parafe.ai/claim?code={code}",
            "code": code,
            "expires_at": "2026-09-30T12:30:00.000Z",
        }

    @staticmethod
    def _status(record: dict[str, Any]) -> dict[str, Any]:
        claimed = record["claimed"]
        return {
            "claimed": claimed,
            "operator_type": None,
            "operator_id": None,
            "principal_type": "personal" if claimed else None,
            "principal_ref": None,
            "identity_assurance": "claimed" if claimed else "self_registered",
            "verification_tier": "unverified",
            "principal_tier": record["principal_tier"],
            "credential_current": record["current"],
            "registered_at": record["registered_at"],
        }

    def _renew(self, handler: _Handler, record: dict[str, Any]) -> None:
        agent_id = next(k for k, v in self.agents.items() if v is record)
        if record["current"]:
            self._send(handler, 200, {"agent_id": agent_id, "renewed": False})
            return
        record["current"] = True
        record["credential"] = self._credential(agent_id, record)  # the old one is revoked
        self.credentials[agent_id] = record["credential"]
        self._send(
            handler,
            200,
            {
                "agent_id": agent_id,
                "renewed": True,
                "reason": "identity_changed",
                "previous_tier": "unverified",
                "current_tier": "email_verified",
                "credential": record["credential"],
                "issued_at": "2026-09-30T13:00:00.000Z",
                "expires_at": "2026-12-29T13:00:00.000Z",
            },
        )


def _jwk_of(public: Any) -> dict[str, str]:
    """The JWK of a P-256 or Ed25519 public key from `cryptography`."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    if isinstance(public, ed25519.Ed25519PublicKey):
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {"kty": "OKP", "crv": "Ed25519", "x": b64url_encode(raw)}
    if isinstance(public, ec.EllipticCurvePublicKey) and public.curve.name == "secp256r1":
        numbers = public.public_numbers()
        return {
            "kty": "EC",
            "crv": "P-256",
            "x": b64url_encode(numbers.x.to_bytes(32, "big")),
            "y": b64url_encode(numbers.y.to_bytes(32, "big")),
        }
    raise ValueError("registration accepts Ed25519 and P-256 keys")
