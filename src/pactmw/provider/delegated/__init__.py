"""The PACT Delegated profile on the Provider side (spec §5; pact-provider.md §5).

One `AuthorizationServer` per Provider serves every Brand that offers delegation: RFC 8628
device authorization and token endpoints (the personal agent authenticates each call with its
PACT JWT), RFC 8414 metadata, the signing keys' JWKS, the consent pages, the check of
`X-A2A-User-Delegation` on agent requests, and step-up tasks. Like the A2A routes, each
operation is a generator sub-flow that yields store calls to the Provider's driver.
"""

from __future__ import annotations

from pactmw.provider.delegated._server import (
    DEVICE_CODE_GRANT,
    FORM_LIMIT,
    PAGE_HEADERS,
    AuditEvent,
    AuditHook,
    AuthorizationServer,
    ConsentRefused,
    Delegation,
    OAuthError,
    SignedInUser,
    new_user_code,
    normalize_user_code,
    parse_form,
    secret_hash,
)

__all__ = [
    "DEVICE_CODE_GRANT",
    "FORM_LIMIT",
    "PAGE_HEADERS",
    "AuditEvent",
    "AuditHook",
    "AuthorizationServer",
    "ConsentRefused",
    "Delegation",
    "OAuthError",
    "SignedInUser",
    "new_user_code",
    "normalize_user_code",
    "parse_form",
    "secret_hash",
]
