"""The A2A HTTP+JSON wire details: media type, the error envelope, JSON responses."""

from __future__ import annotations

from typing import Any

from pactmw.core.encoding import json_dumps
from pactmw.core.errors import A2AError, RequestRefused
from pactmw.core.http import Response

#: Every A2A response carries exactly this content type, with no charset (PACT §2).
A2A_CONTENT_TYPE = "application/a2a+json"

#: reason -> (HTTP status, google.rpc status), PACT §6 and the reference's table.
A2A_REASONS: dict[str, tuple[int, str]] = {
    "INVALID_PARAMS": (400, "INVALID_ARGUMENT"),
    "CONTENT_TYPE_NOT_SUPPORTED": (400, "INVALID_ARGUMENT"),
    "UNSUPPORTED_OPERATION": (400, "FAILED_PRECONDITION"),
    "PUSH_NOTIFICATION_NOT_SUPPORTED": (400, "FAILED_PRECONDITION"),
    "EXTENSION_SUPPORT_REQUIRED": (400, "FAILED_PRECONDITION"),
    "TASK_NOT_FOUND": (404, "NOT_FOUND"),
    "INTERNAL": (500, "INTERNAL"),
}


def a2a_json(status: int, body: bytes, extra: tuple[tuple[str, str], ...] = ()) -> Response:
    """An A2A JSON response with the exact media type."""
    return Response(
        status=status,
        headers=(
            ("Content-Type", A2A_CONTENT_TYPE),
            ("Content-Length", str(len(body))),
            *extra,
        ),
        body=body,
    )


def ok(value: Any) -> Response:
    """200 with `value` as compact JSON."""
    return a2a_json(200, json_dumps(value))


def error_response(error: A2AError) -> Response:
    """The AIP-193 envelope for an A2A error, with exactly one ErrorInfo detail."""
    status, rpc_status = A2A_REASONS[error.reason]
    envelope = {
        "error": {
            "code": status,
            "status": rpc_status,
            "message": error.message,
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": error.reason,
                    "domain": "a2a-protocol.org",
                }
            ],
        }
    }
    return a2a_json(status, json_dumps(envelope))


def refused(error: RequestRefused) -> Response:
    """A bare status with no A2A body (unmatched routes, unknown Brands, 413, 429, 503)."""
    return Response(status=error.status, headers=(("Content-Length", "0"), *error.headers))
