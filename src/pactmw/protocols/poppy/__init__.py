"""The Personal Agent Protocol ("Poppy") draft 0.2 with Operations v1: its wire formats.

Company side, protocol only (no store, no framework, no Provider): the discovery document
and the issuer's RFC 8414 metadata (`PoppyCompany`, `discovery_document`,
`authorization_server_metadata`); client and Session assertions (`AssertionVerifier`, keys
through `core.client_metadata`, replay through an injected `core.replay` memory); DPoP
proofs are `core.dpop`'s, refused the Poppy way by `dpop_refusal`; the requests a personal
agent sends (`parse_*`, `session_credentials`); and error answers (`PoppyError`,
`poppy_response`). Requirement ids (`PAP-4.1-05`, `OPS-6-02`, `GUIDE-jwt-04`) are those of
the ledger shipped with `personal-agent-protocol==0.26.0` (docs/design/poppy.md).
"""

from __future__ import annotations

from pactmw.protocols.poppy._assertions import (
    ASSERTION_SKEW,
    CLIENT_ASSERTION_TYPE,
    MAX_ASSERTION_LIFETIME,
    AssertionVerifier,
    VerifiedAssertion,
    check_assertion_claims,
)
from pactmw.protocols.poppy._discovery import (
    DEVICE_CODE_GRANT,
    DISCOVERY_PATH,
    JWT_BEARER_GRANT,
    OPERATIONS_EXTENSION,
    OPERATIONS_VERSION,
    PROTOCOL_VERSION,
    ApiDescriptor,
    PoppyCompany,
    PoppyConfigError,
    authorization_server_metadata,
    discovery_document,
    metadata_url,
)
from pactmw.protocols.poppy._errors import PoppyError, dpop_refusal, poppy_response
from pactmw.protocols.poppy._requests import (
    REFRESH_TOKEN_GRANT,
    Confirmation,
    FeedbackReport,
    InboundMessage,
    SessionCredentials,
    TokenRequest,
    parse_confirmation,
    parse_conversation_start,
    parse_feedback,
    parse_form,
    parse_id,
    parse_json_object,
    parse_message,
    parse_message_post,
    parse_scope,
    parse_token_request,
    refuse_token_in_url,
    session_credentials,
)

__all__ = [
    "ASSERTION_SKEW",
    "CLIENT_ASSERTION_TYPE",
    "DEVICE_CODE_GRANT",
    "DISCOVERY_PATH",
    "JWT_BEARER_GRANT",
    "MAX_ASSERTION_LIFETIME",
    "OPERATIONS_EXTENSION",
    "OPERATIONS_VERSION",
    "PROTOCOL_VERSION",
    "REFRESH_TOKEN_GRANT",
    "ApiDescriptor",
    "AssertionVerifier",
    "Confirmation",
    "FeedbackReport",
    "InboundMessage",
    "PoppyCompany",
    "PoppyConfigError",
    "PoppyError",
    "SessionCredentials",
    "TokenRequest",
    "VerifiedAssertion",
    "authorization_server_metadata",
    "check_assertion_claims",
    "discovery_document",
    "dpop_refusal",
    "metadata_url",
    "parse_confirmation",
    "parse_conversation_start",
    "parse_feedback",
    "parse_form",
    "parse_id",
    "parse_json_object",
    "parse_message",
    "parse_message_post",
    "parse_scope",
    "parse_token_request",
    "poppy_response",
    "refuse_token_in_url",
    "session_credentials",
]
