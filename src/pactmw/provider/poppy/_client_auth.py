"""How the token, device and revocation endpoints read their form and authenticate the
agent: a form body (sent as one, PACT's rule: the SDK's reference company reads any body as
a form, pactmw refuses one its Content-Type does not call a form, as RFC 6749 §3.2 wants),
bounded, then its client assertion (`401 invalid_client`), first of the checks as in the
SDK's order. An agent the Brand does not admit, or one an operator blocked
(`agents block`), is refused as an unknown client is; a blocked one may still revoke its own
tokens (`agent_refusal`)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from pactmw.core.http import Request
from pactmw.protocols.poppy import PoppyError, VerifiedAssertion, parse_form
from pactmw.provider.delegated._forms import FORM_LIMIT, NOT_A_FORM, is_form_content_type
from pactmw.provider.flow import NeedKeys, SubFlow
from pactmw.provider.poppy._bounds import bounded_body
from pactmw.provider.poppy._brands import PoppyBrand


def read_form(request: Request) -> SubFlow:
    """The request's form: `400 invalid_request` when its Content-Type says it is no form
    (PACT's rule, `is_form_content_type`: checked before the body is read), `413
    request_too_large` past `FORM_LIMIT`."""
    if not is_form_content_type(request.header("content-type")):
        # The one refusal here that says why in words: nothing secret is in it, and an
        # agent cannot tell its encoding mistake from `invalid_request` alone.
        raise PoppyError(
            400, "invalid_request", NOT_A_FORM, members={"error_description": NOT_A_FORM}
        )
    body = yield from bounded_body(FORM_LIMIT, "the form")
    return parse_form(body)


def authenticate_client(
    brand: PoppyBrand, form: Mapping[str, str], *, revoking: bool = False
) -> SubFlow:
    """The verified client assertion of `form`, from an agent the Brand admits and no
    operator blocked, unless it is `revoking` its own tokens (`PoppyBrand.refusal`)."""
    claimed = form.get("client_id")
    if claimed:
        # Refused before any fetch: an agent refused gets nothing fetched for it.
        yield from _refuse(brand, claimed, revoking)
    client: VerifiedAssertion = yield NeedKeys(partial(brand.verifier.verify_client, form))
    if client.client_id != claimed:  # the claimed one was checked above
        yield from _refuse(brand, client.client_id, revoking)
    return client


def _refuse(brand: PoppyBrand, client_id: str, revoking: bool) -> SubFlow:
    refusal: str | None = yield from brand.refusal(client_id, revoking=revoking)
    if refusal is not None:
        raise PoppyError(401, "invalid_client", refusal)


__all__ = [
    "authenticate_client",
    "read_form",
]
