"""The A2A error envelope as the reference defines it (pact-provider.md §2.3): what the
tests hold the Provider's errors to, written out here rather than read from pactmw."""

from __future__ import annotations

__all__ = ["ERROR_DOMAIN", "ERROR_INFO", "PENDING", "REASONS"]

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
ERROR_DOMAIN = "a2a-protocol.org"

#: reason -> (HTTP status, google.rpc status).
REASONS = {
    "INVALID_PARAMS": (400, "INVALID_ARGUMENT"),
    "CONTENT_TYPE_NOT_SUPPORTED": (400, "INVALID_ARGUMENT"),
    "UNSUPPORTED_OPERATION": (400, "FAILED_PRECONDITION"),
    "PUSH_NOTIFICATION_NOT_SUPPORTED": (400, "FAILED_PRECONDITION"),
    "TASK_NOT_FOUND": (404, "NOT_FOUND"),
    "INTERNAL": (500, "INTERNAL"),
}

#: The INVALID_PARAMS message for a messageId received before and still without a reply.
PENDING = "messageId was already received in this context and has no reply yet"
