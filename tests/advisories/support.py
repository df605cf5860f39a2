"""Forging tokens byte by byte, and serving a Provider with the knobs the attacks need.

`sign_raw` signs exactly the header and payload bytes it is given (duplicate members, BOMs,
invalid UTF-8), so a refusal can be pinned on the one trick under test: the signature is
genuine. `serve_provider` runs a Provider behind `A2AProviderApp` on a real uvicorn socket,
like `tests.delegated.support.serve`, but with configurable agent names, signing keys and
uvicorn's header buffer; it yields the same `Env`, whose helpers act as the personal agent
and the person in a browser.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from pactmw.adapters.asgi import A2AProviderApp
from pactmw.core.encoding import b64url_encode, json_dumps
from pactmw.core.errors import AuthenticationFailed
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from pactmw.protocols.delegation import DelegationRejected, SigningKeys, verify_access_token
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from pactmw.provider import Brand, Provider
from pactmw.provider.delegated import AuditEvent, SignedInUser
from pactmw.provider.ratelimit import RateLimit
from pactmw.store import open_store
from tests.delegated.support import PA_KEYS, Env, default_users
from tests.support.net import free_port
from tests.support.parties import AGENT_NAME, AUDIENCE, ISSUER
from tests.support.servers import uvicorn_server

NOW = 1_800_000_000
INTERFACE = AUDIENCE + "/acme"
POLICY = FetchPolicy(allow_http_on_loopback=True, timeout=2.0)
#: Valid identity claims at NOW, and a valid delegation token's claims for INTERFACE.
IDENTITY_CLAIMS = {"iss": ISSUER, "sub": "u1", "aud": AUDIENCE, "iat": NOW, "exp": NOW + 120}
DELEGATION_CLAIMS = {
    "iss": INTERFACE + "/oauth",
    "aud": INTERFACE,
    "sub": "acct-1",
    "client_id": ISSUER,
    "scope": "orders:read",
    "grant_id": "a2agrant_1",
    "iat": NOW,
    "exp": NOW + 3600,
}

INVALID_TOKEN = 'Bearer realm="a2a", error="invalid_token"'
IDENTITY_CHALLENGE = 'Bearer realm="a2a"'

# -- verifying -----------------------------------------------------------------------------------


def identity_outcome(verifier: IdentityVerifier, token: str) -> str:
    """What `verifier` says of the identity token `token`: its refusal's reason, or
    "accepted"."""
    try:
        verifier.verify("Bearer " + token)
    except AuthenticationFailed as exc:
        return exc.reason
    return "accepted"


def delegation_outcome(key: PrivateJWK, token: str) -> str:
    """What a Provider signing with `key` says of the delegation token `token` at `INTERFACE`
    for the agent `ISSUER`, a second after `NOW`: its refusal's reason, or "accepted"."""
    try:
        verify_access_token(
            "Bearer " + token,
            keys=public_key_set([key]),
            interface_url=INTERFACE,
            client_id=ISSUER,
            now=NOW + 1,
        )
    except DelegationRejected as exc:
        return exc.reason
    return "accepted"


# -- forging -------------------------------------------------------------------------------------


class Raw(str):
    """JSON text that `json_object` writes verbatim (`NaN`, `1e309`, a nested raw object)."""


def json_value(value: Any) -> str:
    return str(value) if isinstance(value, Raw) else json.dumps(value)


def json_object(*members: tuple[str, Any]) -> bytes:
    """A JSON object written member by member, so a name may repeat (UTF-8 bytes).

    A `Raw` name is written verbatim too (for an escaped spelling such as `"a\\u0075d"`).
    """
    body = ",".join(f"{json_value(name)}:{json_value(value)}" for name, value in members)
    return ("{" + body + "}").encode("utf-8")


def segment(value: Any) -> str:
    """One JWS segment: bytes as given, anything else as compact JSON."""
    return b64url_encode(value if isinstance(value, bytes) else json_dumps(value))


def sign_raw(key: PrivateJWK, header: Any, payload: Any) -> str:
    """A compact JWS whose signature by `key` covers exactly these header and payload bytes."""
    signing_input = f"{segment(header)}.{segment(payload)}".encode("ascii")
    private = key.key
    if isinstance(private, ec.EllipticCurvePrivateKey):
        r, s = decode_dss_signature(private.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    elif isinstance(private, rsa.RSAPrivateKey):
        signature = private.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    else:
        signature = private.sign(signing_input)
    return f"{signing_input.decode('ascii')}.{b64url_encode(signature)}"


_HMAC = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}


def hmac_token(header: Any, payload: Any, secret: bytes) -> str:
    """An HMAC-signed compact JWS (the header's `alg` picks the hash)."""
    signing_input = f"{segment(header)}.{segment(payload)}"
    mac = hmac.new(secret, signing_input.encode("ascii"), _HMAC[header["alg"]]).digest()
    return f"{signing_input}.{b64url_encode(mac)}"


def public_key_spellings(key: PrivateJWK) -> dict[str, bytes]:
    """Every form of a public key that a naive verifier might take as an HMAC secret."""
    public = key.public.key
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    forms = {
        "pem": public.public_bytes(serialization.Encoding.PEM, spki),
        "der": public.public_bytes(serialization.Encoding.DER, spki),
        "jwk-json": json.dumps(key.public.to_dict()).encode(),
        "jwk-compact": json_dumps(key.public.to_dict()),
        "jwk-members": json_dumps(dict(key.public.members)),
    }
    if isinstance(public, ec.EllipticCurvePublicKey):
        forms["x962-point"] = public.public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
    elif isinstance(public, rsa.RSAPublicKey):
        forms["pkcs1-pem"] = public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.PKCS1
        )
    return forms


# -- serving -------------------------------------------------------------------------------------


@contextlib.contextmanager
def serve_provider(
    brands: Sequence[Brand],
    *,
    agent_names: Mapping[str, str] | None = None,
    keys: SigningKeys | None = None,
    clock: Callable[[], float] = time.time,
    store_url: str = "memory://",
    users: Mapping[str, SignedInUser] | None = None,
    h11_max_incomplete_event_size: int | None = None,
) -> Iterator[Env]:
    """A Provider for `brands` on uvicorn; the personal agents are those of `PA_KEYS`.

    `agent_names` overrides the registered display names (what the consent page shows);
    `users` adds signed-in people (the `sid` cookie) to alice and bob.
    """
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    names = {ISSUER: AGENT_NAME, **(agent_names or {})}
    registry = AgentRegistry(
        [
            RegisteredAgent(issuer=issuer, name=names.get(issuer, ""), jwks=public_key_set([key]))
            for issuer, key in PA_KEYS.items()
        ]
    )
    events: list[AuditEvent] = []
    provider = Provider(
        base_url=base,
        verifier=IdentityVerifier(audience=AUDIENCE, registry=registry),
        store=open_store(store_url),
        brands=brands,
        signing_keys=keys or SigningKeys((generate_private_jwk("ES256", kid="provider-1"),)),
        audit=events.append,
        consent_rate_limit=RateLimit(per_agent=1_000_000),
        clock=clock,
    )
    signed_in = {**default_users(), **(users or {})}

    def current_user(connection: Any) -> SignedInUser | None:
        return signed_in.get(connection.cookies.get("sid", ""))

    env = Env(base, provider, signed_in, events)
    env.port = port
    app = A2AProviderApp(provider, current_user=current_user)
    # uvicorn (h11) refuses request heads over 16 KiB itself, with a 400, before the app runs;
    # a larger buffer lets a test reach pactmw's own bounds.
    options: dict[str, Any] = {}
    if h11_max_incomplete_event_size is not None:
        options["h11_max_incomplete_event_size"] = h11_max_incomplete_event_size
    try:
        with uvicorn_server(app, port=port, **options):
            yield env
    finally:
        env.close()
        provider.close()
