"""The Session and Account Tokens a Poppy company issues: their shape, how long an Account
Token lasts, and what the store keeps of them (a hash, never the token)."""

from __future__ import annotations

import hashlib
import secrets

SESSION_ID_PREFIX = "ses_"
SESSION_TOKEN_PREFIX = "sat_"  # noqa: S105 - a prefix, not a secret
ACCOUNT_TOKEN_PREFIX = "act_"  # noqa: S105 - a prefix, not a secret
#: How long an unused Account Token lasts (each use rotates it); its grant may end sooner.
ACCOUNT_TOKEN_SECONDS = 30 * 86_400.0


def token_hash(token: str) -> str:
    """What the store keeps of a Session or Account Token: its SHA-256, hex. Any text hashes
    (a form may carry any UTF-8, and such a token is simply unknown); the tokens pactmw
    issues are ASCII, whose UTF-8 bytes are the same."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_session_id() -> str:
    return SESSION_ID_PREFIX + secrets.token_urlsafe(24)


def new_session_token() -> str:
    return SESSION_TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_account_token() -> str:
    return ACCOUNT_TOKEN_PREFIX + secrets.token_urlsafe(32)


__all__ = [
    "ACCOUNT_TOKEN_PREFIX",
    "ACCOUNT_TOKEN_SECONDS",
    "SESSION_ID_PREFIX",
    "SESSION_TOKEN_PREFIX",
    "new_account_token",
    "new_session_id",
    "new_session_token",
    "token_hash",
]
