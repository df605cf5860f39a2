"""The answer of a refresh, sealed for repeats within the reuse interval (RFC 9700 §4.14.2).

A client that lost the answer of its refresh, or sent one refresh twice at once, presents
the spent refresh token again. Within the Brand's `refresh_reuse_interval` it must get the
very same token pair the winning rotation issued (Okta's and Auth0's behaviour), so that
pair has to be kept for a few seconds. It is kept sealed, never in clear: AES-256-GCM under
a key derived from the spent refresh token itself (HMAC-SHA-256, which the stored SHA-256
hash of that token does not reveal), bound to that hash as associated data. So the store
alone cannot open it, only the one presenting the spent token can, and the store clears it
once the interval is over.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_KEY_INFO = b"pactmw refresh-token reuse answer v1"
_NONCE_BYTES = 12


def _key(refresh_token: str) -> bytes:
    return hmac.new(refresh_token.encode("utf-8"), _KEY_INFO, hashlib.sha256).digest()


def seal_answer(refresh_token: str, token_hash: str, answer: bytes) -> bytes:
    """Seal `answer` (the token response body) for whoever presents `refresh_token` again."""
    nonce = secrets.token_bytes(_NONCE_BYTES)
    return nonce + AESGCM(_key(refresh_token)).encrypt(nonce, answer, token_hash.encode())


def open_answer(refresh_token: str, token_hash: str, sealed: bytes) -> bytes | None:
    """The sealed answer, or None when it does not open with this token (or was altered)."""
    nonce, ciphertext = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
    try:
        return AESGCM(_key(refresh_token)).decrypt(nonce, ciphertext, token_hash.encode())
    except (InvalidTag, ValueError):
        return None


__all__ = ["open_answer", "seal_answer"]
