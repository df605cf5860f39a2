"""The Delegated profile's routes on the Provider's mount: the device authorization and
token endpoints an agent calls, and those no PACT JWT guards: the authorization server's
public documents, and the consent and connected agents pages a person opens in a browser.

A person's browser gets an HTML page for every refusal on those pages, never an A2A JSON
error: this is where the pages' failures become `ConsentRefused` pages.
"""

from __future__ import annotations

import logging

from pactmw.core.errors import AuthenticationFailed, PactmwError, RequestRefused
from pactmw.core.http import Request, Response
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider._log_throttle import log_store_outage
from pactmw.provider.brand import Brand, DelegationConfig
from pactmw.provider.delegated import (
    FORM_LIMIT,
    AuthorizationServer,
    ConsentRefused,
    OAuthError,
    SignedInUser,
)
from pactmw.provider.delegated._forms import NOT_A_FORM, is_form_content_type
from pactmw.provider.errors import error_response
from pactmw.provider.flow import Flow, HostAppUnready, NeedBody, NeedUser, SubFlow
from pactmw.provider.routes import Route, routed_method
from pactmw.store.base import StoreUnavailable

logger = logging.getLogger("pactmw.provider")

#: The authorization server's public documents, read by agents (the rest are pages).
_AGENT_DOCUMENTS = frozenset({"oauth_metadata", "oauth_jwks"})


def _offered(oauth: AuthorizationServer | None, brand: Brand) -> DelegationConfig:
    """The Brand's delegation settings; 404 when it offers no delegation."""
    if brand.delegation is None or oauth is None:
        raise RequestRefused(404)
    return brand.delegation


def _no_pages(route: Route) -> Response | None:
    """A person-facing page of a Brand that offers no delegation: the pages' 404 page.

    A person following an old link (delegation since turned off, or a link to the wrong
    Brand) got routing's empty 404, which a browser shows as a blank page. The agent-facing
    paths keep the bare 404: an agent reads the status, and the metadata's absence is how it
    learns there is no authorization server.
    """
    if route.operation in _AGENT_DOCUMENTS:
        return None
    absent = ConsentRefused("This service does not take authorizations for personal agents.", 404)
    return error_response(absent)


def _form(request: Request) -> SubFlow:
    """The request's form body: `invalid_request` when its Content-Type says it is no form
    (`is_form_content_type`, before the body is read), 413 past `FORM_LIMIT`."""
    if not is_form_content_type(request.header("content-type")):
        raise OAuthError("invalid_request", NOT_A_FORM)
    body = yield NeedBody(FORM_LIMIT)
    if body is None:
        raise RequestRefused(413)
    return body


def _page_form() -> SubFlow:
    """The form a person sent from a page: past `FORM_LIMIT`, the pages' own error page
    (413), not a bare status a browser shows as a blank page (a huge paste into a field)."""
    body = yield NeedBody(FORM_LIMIT)
    if body is None:
        raise ConsentRefused("What was sent is too long for this page. Start again.", 413)
    return body


class _NoSignedInUser(PactmwError):
    """What the host app's `current_user` returned is neither a `SignedInUser` nor None."""

    def __init__(self, returned: object) -> None:
        super().__init__(
            f"current_user returned {type(returned).__name__}, not a "
            f"SignedInUser(account=..., label=...) or None"
        )


def _signed_in_user() -> SubFlow:
    """Who the host app says is signed in. Anything but a `SignedInUser` or None (the
    account's name alone, the app's own user object) is refused here, said as such: read
    later, it failed only on some pages, as an `AttributeError` that did not say why."""
    user = yield NeedUser()
    if user is not None and not isinstance(user, SignedInUser):
        raise _NoSignedInUser(user)
    return user


def agent_oauth_flow(
    oauth: AuthorizationServer | None,
    route: Route,
    brand: Brand,
    caller: PersonalAgent,
    request: Request,
) -> Flow:
    """The device authorization and token endpoints (RFC 8628), for an authenticated agent."""
    config = _offered(oauth, brand)
    assert oauth is not None
    form = yield from _form(request)
    if route.operation == "oauth_token":
        return (yield from oauth.token(brand, config, caller, form))
    return (yield from oauth.device_authorization(brand, config, caller, form))


def public_oauth_flow(
    oauth: AuthorizationServer | None, route: Route, brand: Brand, request: Request
) -> Flow:
    """Answer a public route of the Brand's authorization server."""
    if brand.delegation is None or oauth is None:
        missing = _no_pages(route)
        if missing is not None:
            return missing
    config = _offered(oauth, brand)
    assert oauth is not None
    if route.operation == "oauth_metadata":
        return oauth.metadata(brand, config)
    if route.operation == "oauth_jwks":
        return oauth.jwks()
    try:
        if route.operation == "consent_result":
            return (yield from oauth.result(brand, config, request))
        user = (yield from _signed_in_user()) if config.mode == "same-app" else None
        # A HEAD is shown the GET's page (the driver leaves its body out).
        shown = routed_method(request.method) == "GET"
        if route.operation == "consent" and shown:
            return (yield from oauth.consent(brand, config, request, user, None))
        if route.operation == "connected_agents" and shown:
            return (yield from oauth.connected_agents(brand, config, request, user, None))
        body = yield from _page_form()
        if route.operation == "consent":
            return (yield from oauth.consent(brand, config, request, user, body))
        if route.operation == "connected_agents":
            return (yield from oauth.connected_agents(brand, config, request, user, body))
        return (yield from oauth.decision(brand, config, request, user, body))
    except OAuthError:
        # A malformed form on a page a person sees: an HTML answer, in words the pages'
        # catalog lists (the OAuth description is for clients, and untranslated).
        unreadable = ConsentRefused("This page could not read what was sent. Start again.", 400)
        return _error_page(oauth, route, brand, config, unreadable)
    except ConsentRefused as exc:
        return _error_page(oauth, route, brand, config, exc)
    except (RequestRefused, AuthenticationFailed):
        raise
    except HostAppUnready as exc:
        # The app cannot serve these pages until it is fixed: a 503 (no page of ours failed),
        # the cause said once, without a traceback (it would only show the adapter's check).
        if not exc.said_before:
            logger.error(
                "consent pages (first of brand %r) cannot be shown: %s; until then they answer 503",
                brand.id,
                exc.message,
            )
        unready = ConsentRefused("Something went wrong on our side. Please try again later.", 503)
        return _error_page(oauth, route, brand, config, unready)
    except StoreUnavailable as exc:
        log_store_outage(logger, exc, " on a consent page")
        busy = ConsentRefused("The service is busy. Please try again in a moment.", 503)
        return _error_page(oauth, route, brand, config, busy)
    except _NoSignedInUser as exc:
        logger.error("consent page of brand %r failed: %s", brand.id, exc)
        return _error_page(oauth, route, brand, config, _failed())
    except Exception:
        # The usual cause is `current_user` reading what the host app's middleware sets (a
        # session, a signed-in user) while the Provider runs outside that middleware. Said
        # for every adapter alike, with each one's remedy: a WSGI app has no `a2a_routes`.
        logger.exception(
            "consent page of brand %r failed (if current_user reads what the host app's "
            "middleware sets, its session or signed-in user, the Provider must run after "
            "that middleware: inside a Starlette app with pactmw.adapters.asgi.a2a_routes, "
            "or with that middleware around the WSGI A2AProviderApp)",
            brand.id,
        )
        return _error_page(oauth, route, brand, config, _failed())


def _failed() -> ConsentRefused:
    """The page of a consent page that failed on pactmw's side or the host app's."""
    return ConsentRefused("Something went wrong on our side. Please try again later.", 500)


def _error_page(
    oauth: AuthorizationServer,
    route: Route,
    brand: Brand,
    config: DelegationConfig,
    refused: ConsentRefused,
) -> Response:
    """The error page of a refusal on `route`, with a way on for a person stuck there: the
    connected agents page again from itself, else the code entry page (the consent pages
    start there)."""
    if route.operation == "connected_agents":
        return error_response(refused, pages=config.pages, manage_url=oauth.url(brand, "agents"))
    code_entry = oauth.url(brand, "consent")
    return error_response(refused, pages=config.pages, code_entry_url=code_entry)


__all__ = [
    "agent_oauth_flow",
    "public_oauth_flow",
]
