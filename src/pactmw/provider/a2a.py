"""The A2A HTTP+JSON responses: the exact media type on every one (the wire contract itself,
media type and error reasons, is `pactmw.protocols.a2a`).

Errors are rendered by `pactmw.provider.errors.error_response`.
"""

from __future__ import annotations

from typing import Any

from pactmw.core.encoding import json_dumps
from pactmw.core.http import Response
from pactmw.protocols.a2a import A2A_CONTENT_TYPE, A2A_REASONS


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
