"""Reading the form bodies the token, device and consent endpoints receive."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qs

from pactmw.core.encoding import is_storable_text
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider.delegated._errors import OAuthError

#: The largest form body the Provider reads for these endpoints.
FORM_LIMIT = 64 * 1024
#: The media type of an OAuth request's body (RFC 6749 §3.2, §4.1.3; RFC 7009 §2.1; RFC 8628
#: §3.1), and what an agent is told when it sent another (`invalid_request`).
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
NOT_A_FORM = f"the body must be sent as Content-Type: {FORM_CONTENT_TYPE} (RFC 6749 §3.2)"


def is_form_content_type(content_type: str | None) -> bool:
    """Whether a request's `Content-Type` (None: missing, or repeated) says its body is an
    OAuth form: the media type in any case (RFC 9110 §8.3.1), with any parameters
    (`charset=UTF-8`, which browsers and fetch add).

    The one rule of every endpoint an agent posts a form to, PACT's and Poppy's: a body sent
    as something else (JSON, text, none said) is refused rather than read as a form, as
    RFC 6749 wants, so a client's encoding mistake is told as one instead of surfacing as an
    unrelated refusal (a missing `grant_type`) or, worse, being accepted."""
    if content_type is None:
        return False
    return content_type.partition(";")[0].strip().lower() == FORM_CONTENT_TYPE


def parse_form(body: bytes) -> dict[str, list[str]]:
    """An `application/x-www-form-urlencoded` body; `OAuthError(invalid_request)` if it is not."""
    try:
        return parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=100)
    except (UnicodeDecodeError, ValueError) as exc:
        raise OAuthError("invalid_request", "the body is not a form") from exc


def one(form: Mapping[str, list[str]], name: str) -> str:
    """The field `name`, present exactly once and not empty; `invalid_request` otherwise."""
    values = form.get(name, [])
    if len(values) != 1 or not values[0] or not is_storable_text(values[0]):
        raise OAuthError("invalid_request", f"{name} is required, once")
    return values[0]


def single_value(form: Mapping[str, list[str]], name: str) -> str:
    """The field `name` when it is sent exactly once, else "": the pages' tokens and
    assertions, whose readers refuse "" as they refuse any value that does not verify."""
    values = form.get(name, [])
    return values[0] if len(values) == 1 else ""


def agent_form(body: bytes, caller: PersonalAgent) -> dict[str, list[str]]:
    """The form of a personal agent's request, whose `client_id` must be its JWT's issuer."""
    form = parse_form(body)
    if form.get("client_id") != [caller.issuer]:
        # 401, not 400: the reference client reads 401 as a transport failure (§5.1).
        raise OAuthError("invalid_client", "client_id must equal the JWT's iss", 401)
    return form


__all__ = [
    "FORM_CONTENT_TYPE",
    "FORM_LIMIT",
    "NOT_A_FORM",
    "agent_form",
    "is_form_content_type",
    "one",
    "parse_form",
    "single_value",
]
