"""DPoP proofs (RFC 9449) a test makes, well formed or mutated one member at a time."""

from __future__ import annotations

import secrets
from typing import Any

from pactmw.core.dpop import access_token_hash
from pactmw.core.encoding import b64url_encode, json_dumps
from pactmw.core.jose import sign_bytes
from pactmw.core.jwk import PrivateJWK

__all__ = ["MISSING", "dpop_proof"]

#: A `claims`/`header` override value that removes the member.
MISSING: Any = object()


def dpop_proof(
    key: PrivateJWK,
    htm: str,
    htu: str,
    iat: float,
    *,
    access_token: str | None = None,
    nonce: str | None = None,
    header: dict[str, Any] | None = None,
    claims: dict[str, Any] | None = None,
    signer: PrivateJWK | None = None,
) -> str:
    """A compact DPoP proof by `key` (its public JWK in the header), signed by `signer`
    (default `key`). `header` and `claims` override members (`MISSING` removes one)."""
    public = {k: v for k, v in key.to_dict().items() if k in ("kty", "crv", "x", "y", "n", "e")}
    head: dict[str, Any] = {"typ": "dpop+jwt", "alg": key.alg, "jwk": public}
    body: dict[str, Any] = {"jti": secrets.token_urlsafe(16), "htm": htm, "htu": htu, "iat": iat}
    if access_token is not None:
        body["ath"] = access_token_hash(access_token)
    if nonce is not None:
        body["nonce"] = nonce
    for target, changes in ((head, header), (body, claims)):
        for name, value in (changes or {}).items():
            if value is MISSING:
                target.pop(name, None)
            else:
                target[name] = value
    signing_input = f"{b64url_encode(json_dumps(head))}.{b64url_encode(json_dumps(body))}"
    signature = sign_bytes(signer or key, signing_input.encode("ascii"))
    return f"{signing_input}.{b64url_encode(signature)}"
