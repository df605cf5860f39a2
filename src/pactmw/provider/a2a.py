"""The A2A HTTP+JSON wire details: media type, the error reasons, JSON responses.

Errors are rendered by `pactmw.provider.errors.error_response`.
"""

from __future__ import annotations

from typing import Any

from pactmw.core.encoding import json_dumps
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


__all__ = [
    "A2A_CONTENT_TYPE",
    "A2A_REASONS",
    "a2a_json",
    "ok",
]
