"""The A2A error envelope as the reference defines it (pact-provider.md §2.3): what the
tests hold the Provider's errors to, written out here rather than read from pactmw."""

from __future__ import annotations

__all__ = ["ERROR_DOMAIN", "ERROR_INFO", "REASONS"]

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
