"""The Flask adapter's refusals: werkzeug HTTP exceptions, so Flask's error handlers apply."""

from __future__ import annotations

from typing import Any

from werkzeug.exceptions import Forbidden, HTTPException, ServiceUnavailable, Unauthorized
from werkzeug.wrappers import Response as WerkzeugResponse

from pactmw.adapters._wsgi_http import to_werkzeug
from pactmw.core.errors import AuthenticationFailed, InsufficientScope, PactmwError
from pactmw.provider.guard import GuardRefusal, refusal_response
from pactmw.store.base import StoreUnavailable


class PersonalAgentRefused(Unauthorized, PactmwError):
    """A view's caller was refused (401). Answers with the PACT challenge and an empty body
    unless the app registers an error handler for it or for 401. `failure.reason` says why."""

    def __init__(self, failure: AuthenticationFailed) -> None:
        super().__init__(description=failure.reason)
        self.failure = failure

    def get_headers(self, *args: Any, **kwargs: Any) -> list[tuple[str, str]]:
        return _challenge(super().get_headers(*args, **kwargs), self.failure)

    def get_response(self, *args: Any, **kwargs: Any) -> WerkzeugResponse:
        return to_werkzeug(refusal_response(self.failure))


class ScopeRefused(Forbidden, PactmwError):
    """A view's delegation lacks scopes (403 `insufficient_scope`); `missing` lists them."""

    def __init__(self, refusal: InsufficientScope) -> None:
        super().__init__(description=str(refusal))
        self.missing = refusal.missing
        self.refusal = refusal

    def get_headers(self, *args: Any, **kwargs: Any) -> list[tuple[str, str]]:
        return _challenge(super().get_headers(*args, **kwargs), self.refusal)

    def get_response(self, *args: Any, **kwargs: Any) -> WerkzeugResponse:
        return to_werkzeug(refusal_response(self.refusal))


class StoreOutage(ServiceUnavailable, PactmwError):
    """A view's caller could not be checked: the store the check reads (the agents added at
    runtime, a delegation's grant) could not be used (a database not migrated, or down). A
    503 with `Retry-After`, empty-bodied as the Provider's own, unless the app handles 503;
    the store's message is logged once, here, never shown."""

    def __init__(self, outage: StoreUnavailable) -> None:
        self.answer = refusal_response(outage)  # logs why (throttled: `log_store_outage`)
        retry = next((value for name, value in self.answer.headers if name == "Retry-After"), "")
        super().__init__(retry_after=int(retry) if retry.isdigit() else None)

    def get_response(self, *args: Any, **kwargs: Any) -> WerkzeugResponse:
        return to_werkzeug(self.answer)


def flask_refusal(exc: GuardRefusal) -> HTTPException:
    """What a view raises for a refusal of the guard (`GUARD_REFUSALS`): Flask's HTTP
    exception for it, so the app's error handlers apply."""
    if isinstance(exc, AuthenticationFailed):
        return PersonalAgentRefused(exc)
    if isinstance(exc, InsufficientScope):
        return ScopeRefused(exc)
    return StoreOutage(exc)


def _challenge(
    headers: list[tuple[str, str]], refusal: AuthenticationFailed | InsufficientScope
) -> list[tuple[str, str]]:
    """The headers an app's handler answers with (`return page, error.code,
    error.get_headers()`): the refusal's `WWW-Authenticate` challenge and `Cache-Control`.
    Not werkzeug's `Content-Type` (its own HTML page's, which would relabel a handler's
    `jsonify` as text/html; Flask already labels a returned string as HTML), nor the
    refusal's `Content-Length`: the handler's page has a body of its own."""
    own = refusal_response(refusal).headers
    page = ("content-type", "content-length")
    return [
        *((name, value) for name, value in headers if name.lower() not in page),
        *((name, value) for name, value in own if name.lower() not in page),
    ]


__all__ = ["PersonalAgentRefused", "ScopeRefused", "StoreOutage", "flask_refusal"]
