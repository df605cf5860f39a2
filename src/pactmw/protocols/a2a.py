"""The A2A HTTP+JSON error contract as it stands on the wire (PACT §2, §6): the media type, the
reasons with their HTTP and google.rpc statuses, and the one ErrorInfo detail an envelope
carries.

Stated once for the three that speak it: the Provider renders errors with it, the client reads
them, and the conformance checker judges another Provider's answers by it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: Every A2A response carries exactly this content type, with no charset (PACT §2).
A2A_CONTENT_TYPE = "application/a2a+json"

#: reason -> (HTTP status, google.rpc status), PACT §6 and the reference's table.
A2A_REASONS: Mapping[str, tuple[int, str]] = MappingProxyType(
    {
        "INVALID_PARAMS": (400, "INVALID_ARGUMENT"),
        "CONTENT_TYPE_NOT_SUPPORTED": (400, "INVALID_ARGUMENT"),
        "UNSUPPORTED_OPERATION": (400, "FAILED_PRECONDITION"),
        "PUSH_NOTIFICATION_NOT_SUPPORTED": (400, "FAILED_PRECONDITION"),
        "EXTENSION_SUPPORT_REQUIRED": (400, "FAILED_PRECONDITION"),
        "TASK_NOT_FOUND": (404, "NOT_FOUND"),
        "INTERNAL": (500, "INTERNAL"),
    }
)

#: The `@type` of an error envelope's single detail.
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
#: The `domain` of that detail.
A2A_ERROR_DOMAIN = "a2a-protocol.org"


__all__ = [
    "A2A_CONTENT_TYPE",
    "A2A_ERROR_DOMAIN",
    "A2A_REASONS",
    "ERROR_INFO_TYPE",
]
