"""WSGI adapter (Werkzeug): middleware that guards a path prefix, and a view decorator.

The verified caller is put in `environ["pactmw.personal_agent"]`. A refused request is
answered before the application runs, without reading the request body.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wrappers import Response as WerkzeugResponse
from werkzeug.wsgi import get_input_stream

from pactmw.config import in_protected_path
from pactmw.core.encoding import is_ascii_digits
from pactmw.core.errors import AuthenticationFailed
from pactmw.core.http import Request, Response, challenge
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.provider.app import Provider, with_delegation
from pactmw.provider.delegated import SignedInUser
from pactmw.provider.parafe import (
    REQUEST_KEY as PARAFE_KEY,
)
from pactmw.provider.parafe import (
    ParafeAgent,
    ParafeRefused,
    ParafeTurn,
    body_too_large,
    endpoint_message,
)

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

ENVIRON_KEY = "pactmw.personal_agent"


def to_werkzeug(response: Response) -> WerkzeugResponse:
    """A neutral `Response` as a Werkzeug response (no default content type added)."""
    result = WerkzeugResponse(response.body, status=response.status)
    result.headers.clear()
    for name, value in response.headers:
        result.headers.add(name, value)
    return result


def verify_environ(verifier: IdentityVerifier, environ: WSGIEnvironment) -> PersonalAgent:
    """Verify the `Authorization` header of a WSGI request (raises `AuthenticationFailed`)."""
    return verifier.verify(environ.get("HTTP_AUTHORIZATION"))


class PersonalAgentMiddleware:
    """Verify the personal-agent JWT on every request whose `PATH_INFO` is under `path_prefix`.

    Apply as `app.wsgi_app = PersonalAgentMiddleware(app.wsgi_app, verifier)` in Flask, or
    around any WSGI application.
    """

    def __init__(
        self,
        app: WSGIApplication,
        verifier: IdentityVerifier,
        *,
        path_prefix: str | None = "/a2a/",
        delegation_provider: Provider | None = None,
        delegation_brand: str | None = None,
    ) -> None:
        """With `delegation_provider` and `delegation_brand`, an `X-A2A-User-Delegation`
        token for that Brand is verified too (the caller's `.delegation`)."""
        self.app = app
        self.verifier = verifier
        self.path_prefix = path_prefix
        self.delegation_provider = delegation_provider
        self.delegation_brand = delegation_brand

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if not in_protected_path(environ.get("PATH_INFO", ""), self.path_prefix):
            return self.app(environ, start_response)
        try:
            environ[ENVIRON_KEY] = with_delegation(
                self.delegation_provider,
                self.delegation_brand,
                verify_environ(self.verifier, environ),
                environ.get("HTTP_X_A2A_USER_DELEGATION"),
            )
        except AuthenticationFailed as exc:
            return to_werkzeug(challenge(exc))(environ, start_response)
        return self.app(environ, start_response)


def personal_agent_required(
    verifier: IdentityVerifier,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a WSGI application (`(environ, start_response)`) so it needs a personal agent."""

    def decorate(app: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(app)
        def wrapper(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
            if not isinstance(environ.get(ENVIRON_KEY), PersonalAgent):
                try:
                    environ[ENVIRON_KEY] = verify_environ(verifier, environ)
                except AuthenticationFailed as exc:
                    return to_werkzeug(challenge(exc))(environ, start_response)
            result: Iterable[bytes] = app(environ, start_response)
            return result

        return wrapper

    return decorate


def parafe_action(
    action: str, agent: ParafeAgent, *, refusal_status: int = 403
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a WSGI application so it performs `action` only with Parafé consent.

    The JSON body is an A2A message (or `{"message": ...}`) whose consent must permit
    `action`; the body stays readable by the application. On success the application runs
    with the `ParafeTurn` in `environ["pactmw.parafe"]` (`current_parafe(environ)`), and a
    JSON A2A message it answers gets the signed receipt. A refusal is answered with
    `refusal_status` and an A2A-shaped message with the Parafé error and refusal receipt.
    """

    def decorate(app: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(app)
        def wrapper(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
            if body_too_large(environ.get("CONTENT_LENGTH") or None):
                return respond(Response(413, (("Content-Length", "0"),)), start_response)
            body = body_reader(environ)(1024 * 1024)
            if body is None:
                return respond(Response(413, (("Content-Length", "0"),)), start_response)
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
            turn = agent.turn(endpoint_message(body))
            try:
                turn.require(action)
            except ParafeRefused as refused:
                return respond(agent.refusal_response(refused, refusal_status), start_response)
            environ[PARAFE_KEY] = turn
            return _with_receipts(app, agent, turn, environ, start_response)

        return wrapper

    return decorate


def _with_receipts(
    app: Callable[..., Any],
    agent: ParafeAgent,
    turn: ParafeTurn,
    environ: WSGIEnvironment,
    start_response: StartResponse,
) -> Iterable[bytes]:
    """Run `app`, buffering its answer, and add the turn's receipts to a JSON A2A message."""
    started: list[Any] = []
    chunks: list[bytes] = []

    def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        if exc_info is not None and started:
            raise exc_info[1].with_traceback(exc_info[2])
        started[:] = [status, list(headers)]
        return chunks.append

    result = app(environ, capture)
    try:
        chunks.extend(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    status, headers = started
    body = b"".join(chunks)
    content_type = next((v for k, v in headers if k.lower() == "content-type"), None)
    updated = agent.finish(turn, body, content_type)
    if updated is not None:
        body = updated
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        headers.append(("Content-Length", str(len(body))))
    start_response(status, headers)
    return [body]


def current_parafe(environ: WSGIEnvironment) -> ParafeTurn | None:
    """The Parafé turn of a request behind `parafe_action` (`.consent`, `.complete`)."""
    found = environ.get(PARAFE_KEY)
    return found if isinstance(found, ParafeTurn) else None


def current_personal_agent(environ: WSGIEnvironment) -> PersonalAgent | None:
    """The verified caller of this request, or None."""
    found = environ.get(ENVIRON_KEY)
    return found if isinstance(found, PersonalAgent) else None


def neutral_request(environ: WSGIEnvironment) -> Request:
    """A WSGI environ as the neutral `Request` (path decoded as UTF-8, per PEP 3333's dance)."""
    raw_path = environ.get("PATH_INFO", "")
    headers = [
        (key[5:].replace("_", "-").lower(), str(value))
        for key, value in environ.items()
        if key.startswith("HTTP_")
    ]
    for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(key):
            headers.append((key.replace("_", "-").lower(), str(environ[key])))
    return Request(
        method=environ.get("REQUEST_METHOD", "GET"),
        path=raw_path.encode("latin-1").decode("utf-8", "replace"),
        query=environ.get("QUERY_STRING", ""),
        headers=tuple(headers),
        client=environ.get("REMOTE_ADDR"),
    )


def body_reader(environ: WSGIEnvironment) -> Callable[[int], bytes | None]:
    """Read the request body on demand, refusing (None) anything longer than `limit`."""

    def read(limit: int) -> bytes | None:
        declared = environ.get("CONTENT_LENGTH") or ""
        if is_ascii_digits(declared) and int(declared) > limit:
            return None
        body = get_input_stream(environ, safe_fallback=True).read(limit + 1)
        return None if len(body) > limit else body

    return read


def respond(response: Response, start_response: StartResponse) -> Iterable[bytes]:
    """Send a neutral `Response` through `start_response`."""
    reason = HTTP_STATUS_CODES.get(response.status, "Unknown")
    start_response(f"{response.status} {reason}", list(response.headers))
    return [response.body]


class A2AProviderApp:
    """Serve a `Provider` as a WSGI app; other paths go to `app` (or get 404).

    For Flask: `app.wsgi_app = A2AProviderApp(provider, app.wsgi_app)`, or use the Flask
    extension, which does this for you. The Provider authenticates its own routes.
    """

    def __init__(
        self,
        provider: Provider,
        app: WSGIApplication | None = None,
        *,
        current_user: Callable[[WSGIEnvironment], SignedInUser | None] | None = None,
    ) -> None:
        """`current_user(environ)` returns the host app's signed-in user, or None; only
        same-app consent pages call it."""
        self.provider = provider
        self.app = app
        self.current_user = current_user

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        request = neutral_request(environ)
        if self.provider.matches(request.method, request.path):
            resolve = self.current_user
            user = None if resolve is None else (lambda: resolve(environ))
            response = self.provider.handle(request, body_reader(environ), user)
            return respond(response, start_response)
        if self.app is not None:
            return self.app(environ, start_response)
        return respond(Response(status=404, headers=(("Content-Length", "0"),)), start_response)
