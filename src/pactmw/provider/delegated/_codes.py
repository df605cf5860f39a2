"""The secrets the authorization server hands out: user codes, device codes, refresh tokens."""

from __future__ import annotations

import hashlib
import secrets

from pactmw.core.encoding import b64url_encode

USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"  # no vowels, no look-alikes (reference)


def new_secret(prefix: str) -> str:
    """A fresh 256-bit bearer secret, `prefix` + base64url (`dc_...`, `rt_...`)."""
    return prefix + b64url_encode(secrets.token_bytes(32))


def secret_hash(value: str) -> str:
    """How device codes and refresh tokens are stored: base64url(SHA-256), never the value."""
    return b64url_encode(hashlib.sha256(value.encode("utf-8")).digest())


def new_user_code() -> str:
    """`XXXX-XXXX` from `BCDFGHJKLMNPQRSTVWXZ` (20^8 ≈ 2.6e10 codes)."""
    letters = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(8))
    return f"{letters[:4]}-{letters[4:]}"


def new_grant_id(now: float) -> str:
    """A fresh grant id: its creation time in hex first (ids sort by age), then 64 random bits."""
    return f"a2agrant_{int(now * 1000):012x}{secrets.token_hex(8)}"


def normalize_user_code(text: str) -> str | None:
    """Read a typed code generously (case, spaces, dashes); None when it cannot be one."""
    letters = "".join(ch for ch in text.upper() if ch.isalnum())
    if len(letters) != 8 or any(ch not in USER_CODE_ALPHABET for ch in letters):
        return None
    return f"{letters[:4]}-{letters[4:]}"


__all__ = [
    "USER_CODE_ALPHABET",
    "new_grant_id",
    "new_secret",
    "new_user_code",
    "normalize_user_code",
    "secret_hash",
]
