"""Reading what a personal agent sends: forms, JSON bodies and credentials. Pure.

Tolerant where the protocol says to be (unknown members and unknown extensions are ignored,
PAP-3.3-03/05; a `role` the agent sets on its message is ignored), strict where it matters:
JSON with a repeated member is refused (GUIDE-json-01), as is a form repeating a parameter
(RFC 6749 §3.1), a repeated `Authorization` header, or a token in the URL (PAP-4.3-17). Every
refusal is a `PoppyError` naming what was wrong, never echoing the value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qsl

from attrs import field, frozen

from pactmw.core.encoding import is_storable_text, json_dumps, json_loads
from pactmw.core.errors import MalformedInput
from pactmw.core.http import Request
from pactmw.protocols.poppy._discovery import DEVICE_CODE_GRANT, JWT_BEARER_GRANT
from pactmw.protocols.poppy._errors import PoppyError, invalid_request

#: §7.2: conversation, message and event IDs, and the Session IDs pactmw hands out.
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,256}")
#: RFC 7235 token68: what `DPoP <token>` may carry.
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
MAX_FORM_FIELDS = 100
FEEDBACK_TASK_MAX = 200
FEEDBACK_DESCRIPTION_MAX = 2000
REFRESH_TOKEN_GRANT = "refresh_token"  # noqa: S105 - a grant type
AUTHORIZATION_CODE_GRANT = "authorization_code"
GRANT_TYPES = frozenset(
    {JWT_BEARER_GRANT, DEVICE_CODE_GRANT, REFRESH_TOKEN_GRANT, AUTHORIZATION_CODE_GRANT}
)
SENDERS = frozenset({"agent", "human"})
APPROVERS = frozenset({"user", "standing_permission"})
#: The stores keep an operation's revision as a 32-bit integer: no larger one exists.
MAX_REVISION = 2**31 - 1


# -- bodies ---------------------------------------------------------------------------------


def parse_json_object(body: bytes) -> dict[str, Any]:
    """A JSON object body, strictly parsed: a duplicate member, bad UTF-8, NaN or deep
    nesting is `400 invalid_request`, and so is a value JSON cannot carry back (a lone
    surrogate escape, a number past a double's range): what is accepted is stored and sent
    back as JSON."""
    try:
        value = json_loads(body)
        json_dumps(value)
    except MalformedInput as exc:
        raise invalid_request(f"the body is not strict JSON: {exc}") from exc
    except ValueError as exc:  # UnicodeEncodeError too
        raise invalid_request("the body holds a lone surrogate or an infinite number") from exc
    if not isinstance(value, dict):
        raise invalid_request("the body must be a JSON object")
    return value


def parse_form(body: bytes) -> Mapping[str, str]:
    """An `application/x-www-form-urlencoded` body; a repeated parameter, bad UTF-8 or an
    unstorable value (NUL, a lone surrogate) is `400 invalid_request`."""
    try:
        pairs = parse_qsl(
            body.decode("utf-8"),
            keep_blank_values=True,
            strict_parsing=bool(body),
            errors="strict",  # a %-escape that is not UTF-8 is refused, not replaced
            max_num_fields=MAX_FORM_FIELDS,
        )
    except (UnicodeDecodeError, ValueError) as exc:
        raise invalid_request("the body is not a form") from exc
    form: dict[str, str] = {}
    for name, value in pairs:
        if name in form:
            raise invalid_request(f"{name} is repeated")
        if not is_storable_text(value):
            raise invalid_request(f"{name} is not text")
        form[name] = value
    return MappingProxyType(form)


# -- credentials ----------------------------------------------------------------------------


@frozen
class SessionCredentials:
    """What a request presents with a Session Token: the token (never logged) and every
    `DPoP` header value, for `core.dpop` to insist on exactly one."""

    token: str = field(repr=False)
    proofs: tuple[str, ...] = field(repr=False)


def refuse_token_in_url(query: str) -> None:
    """`400 invalid_request` when the query string carries `access_token` (PAP-4.3-17): a
    token in a URL leaks through logs, caches and Referer, so it is refused even beside a
    header that would be accepted (RFC 6750 §2.3)."""
    try:
        names = [name for name, _ in parse_qsl(query, keep_blank_values=True)]
    except ValueError as exc:
        raise invalid_request("the query string does not parse") from exc
    if "access_token" in names:
        raise invalid_request("tokens are not accepted in a URL")


def session_credentials(request: Request) -> SessionCredentials:
    """The Session Token of `Authorization: DPoP <token>` and the `DPoP` header values.

    A token in the URL or a repeated `Authorization` (two values, or two joined with a
    comma by a WSGI server) is `400 invalid_request`; no
    `Authorization`, another scheme (a DPoP token sent as `Bearer`, PAP-4.3-11) or a
    malformed token is `401 invalid_token`. Cookies are never consulted (PAP-4.3-12).
    """
    refuse_token_in_url(request.query)
    values = [value for name, value in request.headers if name == "authorization"]
    # A WSGI server joins repeated header lines with ", " (PEP 3333): a comma, which no
    # `DPoP <token68>` holds, is a repeated header there, answered as on any other server.
    if len(values) > 1 or (values and "," in values[0]):
        raise invalid_request("one Authorization header, please")
    if not values:
        raise PoppyError(401, "invalid_token", "no Session Token")
    scheme, _, token = values[0].strip().partition(" ")
    token = token.strip()
    # Auth schemes are case-insensitive (RFC 9110 §11.1).
    if scheme.lower() != "dpop" or not _TOKEN68.fullmatch(token):
        raise PoppyError(401, "invalid_token", "a Session Token goes in Authorization: DPoP")
    proofs = tuple(value for name, value in request.headers if name == "dpop")
    return SessionCredentials(token=token, proofs=proofs)


# -- the token endpoint ---------------------------------------------------------------------


@frozen
class TokenRequest:
    """A token endpoint request's grant (the client assertion is read separately).

    `grant_type` decides which members are required: jwt-bearer needs `assertion` (a
    Session assertion; `session_id` renews), device_code `device_code` and `session_id`,
    refresh_token `refresh_token` and `session_id`, authorization_code `code`,
    `redirect_uri`, `code_verifier` and `session_id`.
    """

    grant_type: str
    assertion: str | None = field(default=None, repr=False)
    session_id: str | None = None
    device_code: str | None = field(default=None, repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    scope: str | None = None
    resource: str | None = None
    code: str | None = field(default=None, repr=False)
    redirect_uri: str | None = None
    code_verifier: str | None = field(default=None, repr=False)


_REQUIRED: Mapping[str, tuple[str, ...]] = {
    JWT_BEARER_GRANT: ("assertion",),
    DEVICE_CODE_GRANT: ("device_code", "session_id"),
    REFRESH_TOKEN_GRANT: ("refresh_token", "session_id"),
    AUTHORIZATION_CODE_GRANT: ("code", "redirect_uri", "code_verifier", "session_id"),
}


def parse_token_request(form: Mapping[str, str]) -> TokenRequest:
    """The grant of a token request form; `unsupported_grant_type` or `invalid_request`."""
    grant_type = form.get("grant_type")
    if not grant_type:
        raise invalid_request("grant_type is required")
    if grant_type not in GRANT_TYPES:
        raise PoppyError(400, "unsupported_grant_type", "unknown grant_type")
    for name in _REQUIRED[grant_type]:
        if not form.get(name):
            raise invalid_request(f"{name} is required for this grant_type")
    session_id = form.get("session_id") or None
    if session_id is not None and not ID_PATTERN.fullmatch(session_id):
        raise PoppyError(400, "invalid_session", "session_id is not one this Company issued")

    def optional(name: str) -> str | None:
        return form.get(name) or None

    return TokenRequest(
        grant_type=grant_type,
        assertion=optional("assertion"),
        session_id=session_id,
        device_code=optional("device_code"),
        refresh_token=optional("refresh_token"),
        scope=form.get("scope"),
        resource=optional("resource"),
        code=optional("code"),
        redirect_uri=optional("redirect_uri"),
        code_verifier=optional("code_verifier"),
    )


def parse_scope(value: str | None) -> tuple[str, ...]:
    """A space-separated `scope` as its distinct tokens, in order (RFC 6749 §3.3)."""
    seen: dict[str, None] = {}
    for token in (value or "").split(" "):
        if token:
            seen.setdefault(token)
    return tuple(seen)


# -- conversations, operations and feedback (§7, Ops §5, §8) ---------------------------------


@frozen
class InboundMessage:
    """A message from the personal agent (§7.4); `content()` is what a Company compares to
    tell a replay (same id, same content) from a conflict (same id, other content)."""

    id: str
    sender: str
    text: str | None = None
    data: Mapping[str, Any] | None = field(default=None, repr=False)
    context: Mapping[str, Any] | None = field(default=None, repr=False)

    def content(self) -> dict[str, Any]:
        """What the message says, as JSON members (absent ones left out)."""
        out: dict[str, Any] = {"id": self.id, "sender": self.sender}
        for name in ("text", "data", "context"):
            value = getattr(self, name)
            if value is not None:
                out[name] = dict(value) if isinstance(value, Mapping) else value
        return out


def parse_id(value: Any, name: str) -> str:
    """An ID of §7.2 (`[A-Za-z0-9_-]{1,256}`); `invalid_request` otherwise."""
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise invalid_request(f"{name} must match [A-Za-z0-9_-]{{1,256}}")
    return value


def parse_message(value: Any) -> InboundMessage:
    """A §7.4 message object: `id`, `sender` (`agent`/`human`), and at least one of `text`,
    `data` (an object) and `context` (an object) (PAP-7.4-01). Unknown members and any
    `role` the agent set are ignored."""
    if not isinstance(value, dict):
        raise invalid_request("message must be an object")
    message_id = parse_id(value.get("id"), "message.id")
    sender = value.get("sender")
    if sender not in SENDERS:
        raise invalid_request("message.sender must be agent or human")
    text, data, context = value.get("text"), value.get("data"), value.get("context")
    if text is not None and (not isinstance(text, str) or not is_storable_text(text)):
        raise invalid_request("message.text must be a string")
    for name, member in (("data", data), ("context", context)):
        if member is not None and not isinstance(member, dict):
            raise invalid_request(f"message.{name} must be an object")
    if text is None and data is None and context is None:
        raise invalid_request("a message needs text, data or context")
    return InboundMessage(
        id=message_id,
        sender=sender,
        text=text,
        data=MappingProxyType(data) if data is not None else None,
        context=MappingProxyType(context) if context is not None else None,
    )


def parse_conversation_start(body: bytes) -> tuple[InboundMessage, str | None]:
    """`POST {endpoint}`: the first message and an optional `parent_conversation_id`."""
    document = parse_json_object(body)
    parent = document.get("parent_conversation_id")
    return parse_message(document.get("message")), (
        None if parent is None else parse_id(parent, "parent_conversation_id")
    )


def parse_message_post(body: bytes) -> InboundMessage:
    """`POST {endpoint}/{id}/messages`: one message."""
    return parse_message(parse_json_object(body).get("message"))


@frozen
class Confirmation:
    """`POST {operations}/{id}/confirm` (Ops §5): which revision, approved by whom."""

    revision: int
    approved_by: str


def parse_confirmation(body: bytes) -> Confirmation:
    document = parse_json_object(body)
    revision = document.get("revision")
    if isinstance(revision, bool) or not isinstance(revision, int):
        raise invalid_request("revision must be an integer")
    if not 1 <= revision <= MAX_REVISION:
        raise invalid_request(f"revision must be 1 to {MAX_REVISION}")
    approved_by = document.get("approved_by")
    if approved_by not in APPROVERS:
        raise invalid_request("approved_by must be user or standing_permission")
    return Confirmation(revision=revision, approved_by=approved_by)


@frozen
class FeedbackReport:
    """`POST {feedback}` (§8). Any `kind` is accepted (PAP-8-06); the text is data for the
    operator, never instructions (PAP-8-07)."""

    kind: str
    task: str
    description: str


def _bounded_text(document: Mapping[str, Any], name: str, limit: int) -> str:
    value = document.get(name)
    if not isinstance(value, str) or not value.strip() or not is_storable_text(value):
        raise invalid_request(f"{name} must be a non-empty string")
    if len(value) > limit:
        raise invalid_request(f"{name} is longer than {limit} characters")
    return value


def parse_feedback(body: bytes) -> FeedbackReport:
    document = parse_json_object(body)
    kind = document.get("kind", "missing")
    if not isinstance(kind, str) or not kind or len(kind) > 64 or not is_storable_text(kind):
        raise invalid_request("kind must be a short string")
    return FeedbackReport(
        kind=kind,
        task=_bounded_text(document, "task", FEEDBACK_TASK_MAX),
        description=_bounded_text(document, "description", FEEDBACK_DESCRIPTION_MAX),
    )


__all__ = [
    "APPROVERS",
    "AUTHORIZATION_CODE_GRANT",
    "FEEDBACK_DESCRIPTION_MAX",
    "FEEDBACK_TASK_MAX",
    "GRANT_TYPES",
    "ID_PATTERN",
    "MAX_FORM_FIELDS",
    "MAX_REVISION",
    "REFRESH_TOKEN_GRANT",
    "SENDERS",
    "Confirmation",
    "FeedbackReport",
    "InboundMessage",
    "SessionCredentials",
    "TokenRequest",
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
    "refuse_token_in_url",
    "session_credentials",
]
