"""A stand-in Parafé broker for the demo (standard library only, on 127.0.0.1).

It serves what a real broker publishes, its JWKS and the agents' DID documents, and "issues"
consent tokens in this process, signed with its ES256 key as the broker signs them (the real
handshake runs through api.parafe.ai).
"""

from __future__ import annotations

import http.server
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.demo._common import BRAND_ID
from pactmw.protocols.parafe import ConsentPresenter, agent_did

JWKS_PATH = "/.well-known/jwks.json"
PARAFE_ACME = "prf_agent_acmedemo"
PARAFE_PA = "prf_agent_padem0"
PARAFE_SCOPE = "reorder"


def _parafe_did_document(agent_id: str, key: PrivateJWK) -> dict[str, Any]:
    did = agent_did(agent_id)
    return {
        "@context": ["https://www.w3.org/ns/did/v1"],
        "id": did,
        "verificationMethod": [
            {
                "id": f"{did}#keys-1",
                "type": "JsonWebKey2020",
                "controller": did,
                "publicKeyJwk": dict(key.public.members),
            }
        ],
        "authentication": [f"{did}#keys-1"],
        "assertionMethod": [f"{did}#keys-1"],
    }


class DemoBroker:
    """The broker's ES256 key, Acme's and the personal agent's Parafé keys, their documents
    served from a thread at `url`; `consent()` issues a token, `close()` stops the server."""

    def __init__(self) -> None:
        self.key = generate_private_jwk("ES256")
        self.acme_key = generate_private_jwk("EdDSA")  # Acme's registered Parafé key
        self.pa_key = generate_private_jwk("EdDSA")  # the personal agent's
        documents = {
            f"/agents/{agent}/did.json": json.dumps(_parafe_did_document(agent, key)).encode()
            for agent, key in ((PARAFE_ACME, self.acme_key), (PARAFE_PA, self.pa_key))
        }
        documents[JWKS_PATH] = json.dumps(
            {"keys": [{**self.key.public.to_dict(), "use": "sig", "status": "active"}]}
        ).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = documents.get(self.path.split("?")[0])
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def config(self, workdir: Path) -> str:
        """The `[brands.acme.parafe]` table (Acme's receipt key written beside the config)."""
        (workdir / "acme-parafe.jwk").write_text(json.dumps(self.acme_key.to_dict()))
        return f"""
# Parafé (A2A extension v2): the bot's "reorder" needs broker-issued consent.
[brands.{BRAND_ID}.parafe]
agent_id = "{PARAFE_ACME}"
broker_url = "{self.url}"
allow_http_broker_on_loopback = true   # the demo's stand-in broker, on 127.0.0.1
signing_key = "acme-parafe.jwk"        # Acme's registered key: signs action receipts

[brands.{BRAND_ID}.parafe.scope_requirements.{PARAFE_SCOPE}]
permissions = ["create_order"]
minimum_authorization_modality = "autonomous"
"""

    def consent(self) -> ConsentPresenter:
        """A consent token for the personal agent to reorder at Acme, and its presenter."""
        now = int(time.time())
        session_id = "sess_" + uuid.uuid4().hex
        claims = {
            "ver": 2,
            "iss": "parafe-trust-broker",
            "sub": PARAFE_PA,
            "aud": agent_did(PARAFE_ACME),
            "iat": now,
            "exp": now + 300,
            "jti": str(uuid.uuid4()),
            "scope": PARAFE_SCOPE,
            "permissions": ["create_order"],
            "exclusions": ["issue_refund"],
            "excluded": ["issue_refund"],
            "session_id": session_id,
            "token_type": "consent",
            "authorization_modality": "autonomous",
            "initiator_agent_id": PARAFE_PA,
            "target_agent_id": PARAFE_ACME,
            "parent_token_id": None,
            "cnf": {"jkt": self.pa_key.public.thumbprint},
            "initiator_proof": "pop",
            "initiator_proof_at": now,
        }
        token = sign_compact(claims, self.key)
        return ConsentPresenter(token=token, session_id=session_id, key=self.pa_key)


__all__ = [
    "JWKS_PATH",
    "PARAFE_ACME",
    "PARAFE_PA",
    "PARAFE_SCOPE",
    "DemoBroker",
]
