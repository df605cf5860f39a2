"""Parafé on an app's own endpoints (`@parafe_action`): what the adapters share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pactmw.core.encoding import json_dumps, json_loads
from pactmw.core.errors import MalformedInput
from pactmw.core.http import Response
from pactmw.protocols.parafe import (
    EXTENSION_URI,
    error_reply_data,
    with_action_receipts,
    with_parafe,
)
from pactmw.provider.parafe._consent import ParafeRefused
from pactmw.provider.parafe._filer import Filing
from pactmw.provider.parafe._reply import refusal_message

if TYPE_CHECKING:
    from pactmw.provider.parafe._agent import ParafeAgent
    from pactmw.provider.parafe._turn import ParafeTurn

#: Where adapters put the `ParafeTurn` of a request (`scope`/`environ` key).
REQUEST_KEY = "pactmw.parafe"


def refusal_response(agent: ParafeAgent, refused: ParafeRefused, status: int = 403) -> Response:
    """`ParafeAgent.refusal_response`: the refusal as JSON, its receipt queued for filing."""
    receipts = [refused.receipt] if refused.receipt else []
    _, message = refusal_message(refused)
    body = json_dumps({"message": with_parafe(message, error_reply_data(refused.error, receipts))})
    agent.file(
        [Filing(refused.error.consent.session_id, r) for r in receipts]
        if refused.error.consent is not None
        else []
    )
    return Response(
        status=status,
        headers=(
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("A2A-Extensions", EXTENSION_URI),
            ("Cache-Control", "no-store"),
        ),
        body=body,
    )


def finish(
    agent: ParafeAgent,
    turn: ParafeTurn,
    body: bytes,
    content_type: str | None,
    status: int | None = None,
) -> bytes | None:
    """`ParafeAgent.finish`: sign the turn's receipts, queue them, add them (and the AP2
    receipts) to the body. An error `status` (400 and up) makes the receipts the endpoint
    did not mark failed say `failed`: a receipt must not claim an action the answer refused."""
    if status is not None and status >= 400:
        turn.fail_unfinished(f"the endpoint answered {status}")
    receipts = turn.sign_receipts()
    agent.file(turn.filings())
    if not content_type or "json" not in content_type.lower():
        return None
    if not receipts and turn.ap2_reply is None:
        return None
    return _message_in_json(body, turn.decorate)


def reply_extensions(existing: str | None) -> str:
    """The `A2A-Extensions` value of an endpoint's answer that carries Parafé data (its
    receipts): the endpoint's own value, if it set one for other extensions, with Parafé's
    URI added once. Refusals carry it too, so an agent sees the extension on every answer."""
    listed = [uri.strip() for uri in (existing or "").split(",") if uri.strip()]
    return ",".join(listed if EXTENSION_URI in listed else [*listed, EXTENSION_URI])


def select_agent(agents: Mapping[str, ParafeAgent], brand: str | None) -> ParafeAgent:
    """The Parafé agent of `brand`, or of the one Brand with Parafé when `brand` is None (for
    `@parafe_action` in the Flask and Django adapters). Raises `RuntimeError` otherwise:
    those adapters ask `pactmw.adapters._view_checks.parafe_view_problem` first, and answer 503
    instead of calling it where it would raise."""
    if brand is not None:
        if brand not in agents:
            raise RuntimeError(f"Brand {brand!r} has no [brands.{brand}.parafe] configuration")
        return agents[brand]
    if len(agents) != 1:
        raise RuntimeError(
            "@parafe_action needs the Brand: pass brand=..., or set PACTMW['parafe_brand']"
            if agents
            else "no Brand configures Parafé ([brands.X.parafe])"
        )
    return next(iter(agents.values()))


def _json_or_none(body: bytes | None) -> Any:
    """The JSON value of `body`; None for no body or one that is not JSON."""
    if not body:
        return None
    try:
        return json_loads(body)
    except MalformedInput:
        return None


def endpoint_message(body: bytes | None) -> Any:
    """The A2A message an endpoint's JSON body carries: `{"message": {...}}` (a
    `message:send` request) or the message itself; None when the body is not JSON."""
    parsed = _json_or_none(body)
    if isinstance(parsed, Mapping) and isinstance(parsed.get("message"), Mapping):
        return parsed["message"]
    return parsed


def body_problem(body: bytes | None) -> str | None:
    """Why an endpoint's request body holds no A2A message, said for the caller (empty, not
    JSON, or JSON but not an object); None when it may hold one. The reference verifier reads
    a message, not a body: for it, no message is no Parafé data, MISSING_PARAFE_EXTENSION, and
    that code stays; only its text would send the caller looking for a token it did send."""
    if not body:
        return "the request body is empty; send the A2A message as JSON"
    try:
        parsed = json_loads(body)
    except MalformedInput:
        return 'the request body is not JSON; send the A2A message (or {"message": ...}) as JSON'
    if not isinstance(parsed, Mapping):
        return (
            "the request body is not a JSON object; send the A2A message "
            '(or {"message": ...}) as JSON'
        )
    return None


def _message_in_json(
    body: bytes, change: Callable[[Mapping[str, Any]], dict[str, Any]]
) -> bytes | None:
    """`body` (JSON: `{"message": ...}` or a message with `messageId` and `role`) with its
    message replaced by `change(message)`; None when it is neither (or `change` refuses)."""
    parsed = _json_or_none(body)
    if not isinstance(parsed, dict):
        return None
    try:
        if isinstance(parsed.get("message"), dict):
            return json_dumps({**parsed, "message": change(parsed["message"])})
        if "messageId" in parsed and "role" in parsed:
            return json_dumps(change(parsed))
    except ValueError:
        return None
    return None


def add_receipts_to_json(body: bytes, receipts: Iterable[str]) -> bytes | None:
    """`body` (JSON: `{"message": ...}` or a message with `messageId`) with `receipts` in the
    message's Parafé data; None when it is neither."""
    listed = list(receipts)
    return _message_in_json(body, lambda message: with_action_receipts(message, listed))


__all__ = [
    "REQUEST_KEY",
    "add_receipts_to_json",
    "body_problem",
    "endpoint_message",
    "finish",
    "refusal_response",
    "reply_extensions",
    "select_agent",
]
