"""The PACT Delegated profile on the Provider side (spec §5; pact-provider.md §5).

One `AuthorizationServer` per Provider serves every Brand that offers delegation: RFC 8628
device authorization and token endpoints (the personal agent authenticates each call with its
PACT JWT), RFC 8414 metadata, the signing keys' JWKS, the consent pages, the check of
`X-A2A-User-Delegation` on agent requests, and step-up tasks. Like the A2A routes, each
operation is a generator sub-flow that yields store calls to the Provider's driver.

The private modules hold one concern each, and `AuthorizationServer` (`_server`) hands every
call to the collaborator that owns it:

- `_metadata`: the card's security scheme, RFC 8414 metadata, the JWKS;
- `_device`: the device authorization endpoint; `_token`: the token endpoint;
- `_resource`: delegation tokens on agent requests; `_step_up`: the auth-required task;
- `_consent`: the consent pages, with `_sessions` (who decides) and `_assertion` (the
  Brand's login in brand mode); `_agents_page`: the connected agents page; `_page_limit`:
  the one per-address rate limit of those pages;
- `_revocation`, `_audit`; `_granted`: a grant made without the browser, for an app's
  tests; and the shared pieces `_context`, `_codes`, `_forms`,
  `_responses`, `_errors`.
"""

from __future__ import annotations

from pactmw.protocols.delegation import Delegation
from pactmw.provider.delegated._audit import AuditEvent, AuditHook
from pactmw.provider.delegated._codes import new_user_code, normalize_user_code, secret_hash
from pactmw.provider.delegated._errors import ConsentRefused, OAuthError
from pactmw.provider.delegated._forms import FORM_LIMIT, parse_form
from pactmw.provider.delegated._granted import DelegationGrant
from pactmw.provider.delegated._metadata import DEVICE_CODE_GRANT
from pactmw.provider.delegated._responses import PAGE_HEADERS
from pactmw.provider.delegated._server import AuthorizationServer
from pactmw.provider.delegated._sessions import SignedInUser

__all__ = [
    "DEVICE_CODE_GRANT",
    "FORM_LIMIT",
    "PAGE_HEADERS",
    "AuditEvent",
    "AuditHook",
    "AuthorizationServer",
    "ConsentRefused",
    "Delegation",
    "DelegationGrant",
    "OAuthError",
    "SignedInUser",
    "new_user_code",
    "normalize_user_code",
    "parse_form",
    "secret_hash",
]
