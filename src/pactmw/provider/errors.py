"""Every error of the family rendered to its HTTP answer, in one place: `error_response`.

The Provider renders what its flow raises with it, the guard renders its refusals with it,
and the adapters translate the neutral `Response` to their framework. Nothing else builds an
error body.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable

from pactmw.core.encoding import json_dumps
from pactmw.core.errors import A2AError, AuthenticationFailed, InsufficientScope, RequestRefused
from pactmw.core.http import Response, challenge, insufficient_scope
from pactmw.protocols.a2a import A2A_ERROR_DOMAIN, A2A_REASONS, ERROR_INFO_TYPE
from pactmw.protocols.poppy import PoppyError, poppy_response
from pactmw.provider._log_throttle import log_store_outage
from pactmw.provider.a2a import a2a_json
from pactmw.provider.consent_pages import ConsentPages
from pactmw.provider.delegated._errors import ConsentRefused, OAuthError
from pactmw.provider.delegated._responses import NO_STORE, json_response, page
from pactmw.store.base import StoreUnavailable

logger = logging.getLogger("pactmw.provider")

#: When to try again after a store that could not answer: its outages are mostly brief (a
#: lock held elsewhere, a failover, a restart).
_STORE_RETRY = (("Retry-After", "1"),)
#: A store that cannot answer right now: retry shortly (no body).
_STORE_BUSY = RequestRefused(503, _STORE_RETRY)
#: The same on an OAuth endpoint, whose clients read an RFC 6749 error body: 503 and
#: `temporarily_unavailable` (RFC 6749 §4.1.2.1's "try again later", which Authlib and
#: oauthlib raise for it too), not cacheable.
_STORE_BUSY_OAUTH = OAuthError(
    "temporarily_unavailable",
    "The service is busy. Please try again in a moment.",
    503,
    _STORE_RETRY,
)


def error_response(
    exc: BaseException,
    *,
    pages: ConsentPages | None = None,
    code_entry_url: str | None = None,
    manage_url: str | None = None,
    oauth: bool = False,
) -> Response:
    """The HTTP answer to `exc`, byte for byte what the protocols prescribe.

    - `ConsentRefused`: an HTML error page (a Brand's consent `pages`, else the default ones),
      linking on to the `code_entry_url` or `manage_url` page when given;
    - `OAuthError`: the RFC 6749 §5.2 JSON body, not cacheable;
    - `PoppyError`: Poppy's JSON error (and `WWW-Authenticate: DPoP` challenge), built by
      `pactmw.protocols.poppy.poppy_response`;
    - `InsufficientScope`: 403 with the RFC 6750 §3.1 challenge naming the missing scopes;
    - `AuthenticationFailed` (a refused delegation too): 401 with its challenge, no body;
    - `A2AError`: the AIP-193 envelope with exactly one ErrorInfo detail (PACT §6);
    - `RequestRefused`: the bare status and its headers;
    - `StoreUnavailable`: 503 with `Retry-After: 1` (logged as an error, once
      an outage and then at most once a minute: `log_store_outage`); with `oauth` (an
      agent's OAuth endpoint) also the RFC 6749 body `temporarily_unavailable`;
    - anything else is a bug: logged with its traceback, answered as the A2A `INTERNAL` error.
    """
    if isinstance(exc, ConsentRefused):
        pages = pages if pages is not None else ConsentPages()
        title = pages.translate("That did not work")
        message = pages.translate(exc.message, **exc.params)
        onward = {"code_entry_url": code_entry_url, "manage_url": manage_url}
        html = pages.error(title, message, **_taken(pages.error, onward))
        return page(html, exc.status, exc.headers)
    if isinstance(exc, OAuthError):
        body = {"error": exc.error, "error_description": exc.description}
        return json_response(body, status=exc.status, extra=(*NO_STORE, *exc.headers))
    if isinstance(exc, PoppyError):
        return poppy_response(exc)
    if isinstance(exc, InsufficientScope):
        return insufficient_scope(exc.missing)
    if isinstance(exc, AuthenticationFailed):
        return challenge(exc)
    if isinstance(exc, A2AError):
        return _envelope(exc)
    if isinstance(exc, RequestRefused):
        return _bare(exc)
    if isinstance(exc, StoreUnavailable):
        log_store_outage(logger, exc)  # once, then at most once a minute while it lasts
        return error_response(_STORE_BUSY_OAUTH) if oauth else _bare(_STORE_BUSY)
    logger.exception("unexpected error in the Provider", exc_info=exc)
    return _envelope(A2AError("INTERNAL", "Internal error"))


def _taken(method: Callable[..., str], links: dict[str, str | None]) -> dict[str, str]:
    """The `links` given that `method` takes: a Brand's `error(self, title, message)`
    override, written before the pages had links, still renders its page (without them)."""
    parameters = inspect.signature(method).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return {name: url for name, url in links.items() if url}
    names = {p.name for p in parameters}
    return {name: url for name, url in links.items() if url and name in names}


def _envelope(error: A2AError) -> Response:
    """The AIP-193 envelope for an A2A error, with exactly one ErrorInfo detail."""
    status, rpc_status = A2A_REASONS[error.reason]
    envelope = {
        "error": {
            "code": status,
            "status": rpc_status,
            "message": error.message,
            "details": [
                {
                    "@type": ERROR_INFO_TYPE,
                    "reason": error.reason,
                    "domain": A2A_ERROR_DOMAIN,
                }
            ],
        }
    }
    return a2a_json(status, json_dumps(envelope))


def _bare(error: RequestRefused) -> Response:
    """A bare status with no A2A body (unmatched routes, unknown Brands, 413, 429, 503)."""
    return Response(status=error.status, headers=(("Content-Length", "0"), *error.headers))


__all__ = ["error_response"]
